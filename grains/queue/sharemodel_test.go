package queue

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// shareModel is the reference model of the test queue's share: its policy and share, the
// leases it counts (by model key, with their ends) and its rate bucket, kept by a plain
// refill rule of its own.
type shareModel struct {
	maxLeased, perSecond uint32
	shareLeased          uint32
	shareMilli           int64
	tokensNano           int64
	refilledAt           int64
	counted              map[string]int64
}

func (s *shareModel) String() string {
	return fmt.Sprintf("share{K %d R %d k %d r %d milli/s, tokens %d at %d, %d counted}", s.maxLeased, s.perSecond, s.shareLeased, s.shareMilli, s.tokensNano, s.refilledAt, len(s.counted))
}

func (s *shareModel) burst() int64 {
	if s.shareMilli == 0 {
		return 0
	}
	return max(NanoPerLease, s.shareMilli*1_000_000)
}

// tokens is the bucket at now: tokens + rate × elapsed, at most the burst.
func (s *shareModel) tokens(now int64) int64 {
	return min(s.burst(), s.tokensNano+s.shareMilli*(now-s.refilledAt))
}

// leasedNow counts the counted leases that have not ended at now.
func (s *shareModel) leasedNow(now int64) int {
	n := 0
	for _, until := range s.counted {
		if until > now {
			n++
		}
	}
	return n
}

// admits is the most a receive at now may lease.
func (s *shareModel) admits(now int64) int {
	admits := 1 << 30
	if s.maxLeased > 0 {
		admits = min(admits, max(int(s.shareLeased)-s.leasedNow(now), 0))
	}
	if s.perSecond > 0 {
		admits = min(admits, int(s.tokens(now)/NanoPerLease))
	}
	return admits
}

// took counts what a receive leased at now and spends its tokens.
func (s *shareModel) took(leased []*orreryv1.QueueMessage, now int64) {
	for _, msg := range leased {
		s.counted[modelKey(msg.GetLane(), msg.GetId())] = msg.GetLease().GetUntilUnixMicros()
	}
	if s.perSecond > 0 && len(leased) > 0 {
		s.tokensNano, s.refilledAt = s.tokens(now)-int64(len(leased))*NanoPerLease, now
	}
}

// ended forgets a lease an ack, a release or a cancel ended (s may be nil: no share).
func (s *shareModel) ended(key string) {
	if s != nil {
		delete(s.counted, key)
	}
}

// setShare sets (or removes, when both limits are 0) a random share of the test queue, and
// checks the result against the model: a new share starts with a full bucket, a changed one
// keeps its bucket cut to the new burst and its counted leases, a share is never set below the
// leases it counts (at most the cap), the share in force changes nothing.
func (m *machine) setShare(c chooser) {
	m.t.Helper()
	k, r := uint32(c.intRange("share_max_leased", 0, 3)), uint32(c.intRange("share_per_second", 0, 2))
	cmd := &orreryv1.SetQueueShare{Namespace: testNamespace, Queue: testQueue}
	if k > 0 || r > 0 {
		cmd.Policy = &orreryv1.QueueLimits{MaxLeased: k, LeasesPerSecond: r}
		cmd.ShareLeased = uint32(c.intRange("share_leased", 0, int(k)))
		cmd.ShareMilliPerSecond = uint64(c.intRange("share_milli", 0, 2*int(r))) * 500
	}
	before := m.store.Clone()
	res, err := ApplySetShare(m.store, m.lim, "operator", cmd, m.now)
	if err != nil {
		m.t.Fatalf("set share %v: %v", cmd, err)
	}
	old := m.share
	// The leases the share counts: a share is never set below them. A first share counts the
	// test queue's leases held before it (adoptLeases), read here from the messages.
	counted := m.heldLeases(testQueue)
	if old != nil {
		counted = old.counted
	}
	leasedNow := (&shareModel{counted: counted}).leasedNow(m.now)
	shareLeased := cmd.ShareLeased
	if k > 0 {
		shareLeased = max(shareLeased, min(uint32(leasedNow), k))
	}
	if cmd.Policy == nil {
		if res.GetChanged() != (old != nil) || res.GetShare() != nil {
			m.t.Fatalf("removing share %v: %v", old, res)
		}
		m.share = nil
		return
	}
	same := old != nil && old.maxLeased == k && old.perSecond == r && old.shareLeased == shareLeased && old.shareMilli == int64(cmd.ShareMilliPerSecond)
	if res.GetChanged() == same || (same && !m.store.Equal(before)) {
		m.t.Fatalf("set share %v over %v: %v (or it wrote)", cmd, old, res)
	}
	next := &shareModel{maxLeased: k, perSecond: r, shareLeased: shareLeased, shareMilli: int64(cmd.ShareMilliPerSecond), refilledAt: m.now, counted: counted}
	if old == nil {
		next.tokensNano = next.burst()
	} else if same {
		next = old
	} else {
		next.tokensNano = min(old.tokens(m.now), next.burst())
	}
	if got := res.GetShare(); !proto.Equal(got.GetPolicy(), cmd.GetPolicy()) || got.GetShareLeased() != next.shareLeased ||
		got.GetTokensNano() != next.tokensNano || int(res.GetLeased()) != next.leasedNow(m.now) {
		m.t.Fatalf("set share %v: %v, model %v (%d leased now)", cmd, res, next, next.leasedNow(m.now))
	}
	m.share = next
}

// heldLeases reads queue's messages (not the lease entries) and returns the leases held at
// now, by model key: what a first share of the queue adopts.
func (m *machine) heldLeases(queue string) map[string]int64 {
	m.t.Helper()
	held := map[string]int64{}
	err := kv.ScanPrefix(m.store, keys.Message, func(_, value []byte) (bool, error) {
		msg := &orreryv1.QueueMessage{}
		if err := proto.Unmarshal(value, msg); err != nil {
			return false, err
		}
		if l := msg.GetLease(); msg.GetLane().GetQueue() == queue && l != nil && l.GetUntilUnixMicros() > m.now {
			held[modelKey(msg.GetLane(), msg.GetId())] = l.GetUntilUnixMicros()
		}
		return true, nil
	})
	if err != nil {
		m.t.Fatal(err)
	}
	return held
}
