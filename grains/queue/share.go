package queue

import (
	"bytes"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// MaxQueueLeased bounds a capped queue's QueueLimits.max_leased: a capped receive counts the
// partition's leases of the queue by reading their entries, at most this many.
const MaxQueueLeased = 10000

// MaxQueueLeasesPerSecond bounds a capped queue's QueueLimits.leases_per_second.
const MaxQueueLeasesPerSecond = 1_000_000

// NanoPerLease is one lease in the rate bucket's unit: tokens are billionths of a lease, so that
// a share in thousandths of a lease a second refills exactly by the microsecond
// (milli-leases per second × microseconds = nano-leases).
const NanoPerLease int64 = 1_000_000_000

// ApplySetShare sets the cluster-wide policy of queue (m.namespace, m.queue) and this
// partition's share of it (SetQueueShare), or removes the cap from this partition when the
// policy is absent. A new share starts with a full rate bucket; a changed one keeps its bucket,
// refilled to loggedNow and cut to the new burst, and the leases it counts. A share_leased below
// the leases the share counts now is raised to them (at most max_leased): a lowering gives up
// only units no lease holds, so a partition's counted leases never exceed its share, and the
// result's share says what was set. A share first set in a partition counts the leases held
// there before it (adoptLeases, within AdoptBudget), and every lease taken, extended,
// released, acked or removed while it is in force.
// Setting the share in force reports changed false. With m.compare the share in force must be
// the one set at m.expected_set_at_unix_micros (0: none), else RevisionConflict. A refused
// command writes nothing.
func ApplySetShare(v kv.View, lim input.Limits, principal string, m *orreryv1.SetQueueShare, loggedNowMicros int64) (*orreryv1.QueueShareResult, error) {
	if m == nil {
		return nil, orrery.Invalid("", "set_queue_share is required")
	}
	if err := validateQueue(m.GetNamespace(), m.GetQueue()); err != nil {
		return nil, err
	}
	namespace, queue := m.GetNamespace(), m.GetQueue()
	if m.GetPolicy() == nil {
		if m.GetShareLeased() != 0 || m.GetShareMilliPerSecond() != 0 {
			return nil, orrery.Invalid("policy", "is required with a share (an absent policy removes the cap)")
		}
		old, err := LoadShare(v, namespace, queue)
		if err != nil {
			return nil, err
		}
		if err := compareShare(m, old); err != nil {
			return nil, err
		}
		return removeShare(v, namespace, queue)
	}
	if err := validateShare(m); err != nil {
		return nil, err
	}
	old, err := LoadShare(v, namespace, queue)
	if err != nil {
		return nil, err
	}
	if err := compareShare(m, old); err != nil {
		return nil, err
	}
	if old == nil {
		// A first share counts the leases held before it (adoptLeases).
		if err := adoptLeases(v, lim, namespace, queue, loggedNowMicros); err != nil {
			return nil, err
		}
	}
	leased, err := countLeased(v, namespace, queue, loggedNowMicros)
	if err != nil {
		return nil, err
	}
	share := &orreryv1.QueueShare{Namespace: namespace, Queue: queue, Policy: proto.CloneOf(m.GetPolicy()),
		ShareLeased: m.GetShareLeased(), ShareMilliPerSecond: m.GetShareMilliPerSecond(),
		SetBy: principal, SetAtUnixMicros: loggedNowMicros, RefilledAtUnixMicros: loggedNowMicros}
	if leaseCapped(share) {
		// Never below the leases the share counts: units a lease holds are not given up.
		share.ShareLeased = max(share.GetShareLeased(), min(leased, share.GetPolicy().GetMaxLeased()))
	}
	if old == nil {
		share.TokensNano = burstNano(share)
	} else {
		// Each change's set_at differs from the last, even within one logged time (one batch),
		// so that a compare-and-set never takes one share for another.
		share.SetAtUnixMicros = max(loggedNowMicros, old.GetSetAtUnixMicros()+1)
		if proto.Equal(old.GetPolicy(), share.GetPolicy()) && old.GetShareLeased() == share.GetShareLeased() &&
			old.GetShareMilliPerSecond() == share.GetShareMilliPerSecond() {
			return &orreryv1.QueueShareResult{Share: old, Leased: leased}, nil
		}
		share.TokensNano = min(tokensAt(old, loggedNowMicros), burstNano(share))
	}
	if _, err := record.Store(v, keys.QueueShareKey(namespace, queue), share); err != nil {
		return nil, err
	}
	return &orreryv1.QueueShareResult{Changed: true, Share: share, Leased: leased}, nil
}

// compareShare checks a compare-and-set's expectation against the share in force (old, nil
// when none).
func compareShare(m *orreryv1.SetQueueShare, old *orreryv1.QueueShare) error {
	if !m.GetCompare() || old.GetSetAtUnixMicros() == m.GetExpectedSetAtUnixMicros() {
		return nil
	}
	return orrery.FieldErrorf(orrery.CodeRevisionConflict, "expected_set_at_unix_micros",
		"the share of queue %q in force was set at %d, not %d", m.GetQueue(), old.GetSetAtUnixMicros(), m.GetExpectedSetAtUnixMicros())
}

// validateShare checks a SetQueueShare's policy and share.
func validateShare(m *orreryv1.SetQueueShare) error {
	p := m.GetPolicy()
	switch {
	case p.GetMaxLeased() == 0 && p.GetLeasesPerSecond() == 0:
		return orrery.Invalid("policy", "sets no limit (max_leased and leases_per_second both 0): omit it to remove the cap")
	case p.GetMaxLeased() > MaxQueueLeased:
		return orrery.Invalid("policy.max_leased", "must be at most %d, got %d", MaxQueueLeased, p.GetMaxLeased())
	case p.GetLeasesPerSecond() > MaxQueueLeasesPerSecond:
		return orrery.Invalid("policy.leases_per_second", "must be at most %d, got %d", MaxQueueLeasesPerSecond, p.GetLeasesPerSecond())
	case m.GetShareLeased() > p.GetMaxLeased():
		return orrery.Invalid("share_leased", "must be at most the policy's max_leased %d, got %d", p.GetMaxLeased(), m.GetShareLeased())
	case m.GetShareMilliPerSecond() > 1000*uint64(p.GetLeasesPerSecond()):
		return orrery.Invalid("share_milli_per_second", "must be at most 1000 × the policy's leases_per_second (%d), got %d",
			1000*uint64(p.GetLeasesPerSecond()), m.GetShareMilliPerSecond())
	}
	return nil
}

// removeShare deletes queue (namespace, queue)'s share record and the lease entries it counts.
func removeShare(v kv.View, namespace, queue string) (*orreryv1.QueueShareResult, error) {
	key := keys.QueueShareKey(namespace, queue)
	_, found, err := v.Get(key)
	if err != nil || !found {
		return &orreryv1.QueueShareResult{}, err
	}
	var entries [][]byte
	if err := v.Scan(key, kv.PrefixEnd(key), func(k, _ []byte) (bool, error) {
		entries = append(entries, bytes.Clone(k))
		return true, nil
	}); err != nil {
		return nil, err
	}
	for _, k := range entries { // the record first, then its lease entries
		if err := v.Delete(k); err != nil {
			return nil, err
		}
	}
	return &orreryv1.QueueShareResult{Changed: true}, nil
}

// LoadShare returns queue (namespace, queue)'s share record in this partition, or nil when the
// queue is not capped here.
func LoadShare(v kv.Reader, namespace, queue string) (*orreryv1.QueueShare, error) {
	share := &orreryv1.QueueShare{}
	found, err := record.Load(v, keys.QueueShareKey(namespace, queue), share)
	if err != nil || !found {
		return nil, err
	}
	return share, nil
}

// burstNano is the most tokens share's rate bucket holds: one second of its rate, and at least
// one lease so that a share below one lease a second leases at all; none at rate 0.
func burstNano(share *orreryv1.QueueShare) int64 {
	rate := int64(share.GetShareMilliPerSecond())
	if rate == 0 {
		return 0
	}
	return max(NanoPerLease, rate*1_000_000)
}

// tokensAt is share's bucket refilled from its last refill to atMicros (logged time): one
// nano-lease per milli-lease a second and microsecond, up to the burst.
func tokensAt(share *orreryv1.QueueShare, atMicros int64) int64 {
	burst, rate := burstNano(share), int64(share.GetShareMilliPerSecond())
	tokens := min(share.GetTokensNano(), burst)
	elapsed := atMicros - share.GetRefilledAtUnixMicros()
	if rate == 0 || elapsed <= 0 || tokens >= burst {
		return tokens
	}
	// Bound the elapsed time by what fills the bucket, so the product cannot overflow.
	elapsed = min(elapsed, (burst-tokens)/rate+1)
	return min(burst, tokens+rate*elapsed)
}

// rateLimited reports whether share's policy limits the rate.
func rateLimited(share *orreryv1.QueueShare) bool { return share.GetPolicy().GetLeasesPerSecond() > 0 }

// leaseCapped reports whether share's policy caps the leased messages.
func leaseCapped(share *orreryv1.QueueShare) bool { return share.GetPolicy().GetMaxLeased() > 0 }

// countLeased counts the queue's leases its share counts that have not ended at nowMicros: its
// lease entries after nowMicros (an ended lease's entry stays until a receive prunes it, and
// no longer counts).
func countLeased(v kv.Reader, namespace, queue string, nowMicros int64) (uint32, error) {
	var n uint32
	end := kv.PrefixEnd(keys.QueueShareKey(namespace, queue))
	err := v.Scan(keys.QueueLeaseKey(namespace, queue, nowMicros+1, 0), end, func(_, _ []byte) (bool, error) {
		n++
		return true, nil
	})
	return n, err
}

// shareAdmits is how many messages share lets a receive lease at nowMicros: its share_leased
// less the leases it counts (never below 0) when the policy caps leases, and the whole leases
// in its refilled bucket when it limits the rate. unlimited is returned when neither binds.
func shareAdmits(v kv.Reader, share *orreryv1.QueueShare, nowMicros int64, unlimited int) (int, error) {
	admits := unlimited
	if leaseCapped(share) {
		leased, err := countLeased(v, share.GetNamespace(), share.GetQueue(), nowMicros)
		if err != nil {
			return 0, err
		}
		admits = min(admits, int(max(int64(share.GetShareLeased())-int64(leased), 0)))
	}
	if rateLimited(share) {
		admits = min(admits, int(min(tokensAt(share, nowMicros)/NanoPerLease, int64(unlimited))))
	}
	return admits, nil
}

// receivable reports whether queue (namespace, queue)'s share, if it has one, lets a receive
// lease a message at nowMicros.
func receivable(v kv.Reader, namespace, queue string, nowMicros int64) (bool, error) {
	share, err := LoadShare(v, namespace, queue)
	if err != nil || share == nil {
		return true, err
	}
	admits, err := shareAdmits(v, share, nowMicros, 1)
	return admits > 0, err
}

// shareFreesAt is the earliest instant at or after which queue (namespace, queue)'s share lets
// a receive lease a message, as far as time alone changes it (a lease ending, the bucket
// refilling); capped is false when the queue has no share here (any instant will do), and never
// is true for a share that only a command can open (a share of 0). An ack, a release or a new
// share opens it sooner: their writes wake a long poll (the engine's recorder).
func shareFreesAt(v kv.Reader, namespace, queue string) (atMicros int64, capped, never bool, err error) {
	share, err := LoadShare(v, namespace, queue)
	if err != nil || share == nil {
		return 0, false, false, err
	}
	if leaseCapped(share) {
		if share.GetShareLeased() == 0 {
			return 0, true, true, nil
		}
		// With the lease ends e[0] ≤ … ≤ e[n-1], fewer than k end after t from t = e[n-k] on.
		var ends []int64
		key := keys.QueueShareKey(namespace, queue)
		if err := v.Scan(append(bytes.Clone(key), 0), kv.PrefixEnd(key), func(k, _ []byte) (bool, error) {
			end, err := keys.QueueLeaseEnd(namespace, queue, k)
			if err != nil {
				return false, orrery.Wrap(orrery.CodeInternal, err, "lease entry %x", k)
			}
			ends = append(ends, end)
			return true, nil
		}); err != nil {
			return 0, true, false, err
		}
		if k := int(share.GetShareLeased()); len(ends) >= k {
			atMicros = ends[len(ends)-k]
		}
	}
	if rateLimited(share) {
		rate := int64(share.GetShareMilliPerSecond())
		if rate == 0 {
			return 0, true, true, nil
		}
		if tokens := min(share.GetTokensNano(), burstNano(share)); tokens < NanoPerLease {
			need := NanoPerLease - tokens
			atMicros = max(atMicros, share.GetRefilledAtUnixMicros()+(need+rate-1)/rate)
		}
	}
	return atMicros, true, false, nil
}

// shareTook records what a receive under share leased at nowMicros: a lease entry for each
// leased message, and the bucket's tokens spent. It prunes up to SweepBudget entries of leases
// that ended at or before nowMicros first, so ended leases do not pile up.
func shareTook(v kv.View, share *orreryv1.QueueShare, leased []*orreryv1.QueueMessage, nowMicros int64) error {
	namespace, queue := share.GetNamespace(), share.GetQueue()
	var ended [][]byte
	key := keys.QueueShareKey(namespace, queue)
	if err := v.Scan(append(bytes.Clone(key), 0), keys.QueueLeaseKey(namespace, queue, nowMicros+1, 0), func(k, _ []byte) (bool, error) {
		ended = append(ended, bytes.Clone(k))
		return len(ended) < SweepBudget, nil
	}); err != nil {
		return err
	}
	for _, k := range ended {
		if err := v.Delete(k); err != nil {
			return err
		}
	}
	for _, msg := range leased {
		if err := v.Set(keys.QueueLeaseKey(namespace, queue, msg.GetLease().GetUntilUnixMicros(), msg.GetSequence()), nil); err != nil {
			return err
		}
	}
	if !rateLimited(share) || len(leased) == 0 {
		return nil
	}
	share.TokensNano = tokensAt(share, nowMicros) - int64(len(leased))*NanoPerLease
	share.RefilledAtUnixMicros = nowMicros
	_, err := record.Store(v, keys.QueueShareKey(namespace, queue), share)
	return err
}

// leaseChanged keeps the lease entries of msg's queue in step when the lease of msg (as stored
// before the change) moves to newUntilMicros (0: the lease ends, by an ack, a release or a
// removal): only while the queue has a share here, so a lease of an uncapped queue costs one
// read of an absent key.
func leaseChanged(v kv.View, msg *orreryv1.QueueMessage, newUntilMicros int64) error {
	if msg.GetLease() == nil && newUntilMicros == 0 {
		return nil
	}
	lane := msg.GetLane()
	namespace, queue := lane.GetNamespace(), lane.GetQueue()
	_, found, err := v.Get(keys.QueueShareKey(namespace, queue))
	if err != nil || !found {
		return err
	}
	if l := msg.GetLease(); l != nil {
		if err := v.Delete(keys.QueueLeaseKey(namespace, queue, l.GetUntilUnixMicros(), msg.GetSequence())); err != nil {
			return err
		}
	}
	if newUntilMicros != 0 {
		return v.Set(keys.QueueLeaseKey(namespace, queue, newUntilMicros, msg.GetSequence()), nil)
	}
	return nil
}

// receiveShared is ApplyReceiveNoting under share: it leases at most what the share admits
// at loggedNow, and records what it leased (shareTook). More is not set when the share, not
// the receive's max, stopped it: the next lease waits for the share, not for another receive.
func receiveShared(v kv.View, lim input.Limits, m *orreryv1.Receive, share *orreryv1.QueueShare, maxMessages int, until, loggedNowMicros int64, deadLettered Noting) (*orreryv1.ReceiveResult, error) {
	admits, err := shareAdmits(v, share, loggedNowMicros, maxMessages)
	if err != nil {
		return nil, err
	}
	if admits == 0 {
		return &orreryv1.ReceiveResult{}, nil
	}
	res, err := receiveUpTo(v, lim, m, admits, until, loggedNowMicros, deadLettered)
	if err != nil {
		return nil, err
	}
	if admits < maxMessages && len(res.GetMessages()) == admits {
		res.More = false
	}
	return res, shareTook(v, share, res.GetMessages(), loggedNowMicros)
}

// visibleUnderShare is NextVisibleBefore of a queue that is not paused: its first
// visibility-index instant before limitMicros, or, when the queue is capped here, the later
// instant from which its share admits a lease too.
func visibleUnderShare(v kv.Reader, namespace, queue string, limitMicros int64) (atMicros int64, found bool, err error) {
	freesAt, capped, never, err := shareFreesAt(v, namespace, queue)
	if err != nil || never || (capped && freesAt >= limitMicros) {
		return 0, false, err
	}
	atMicros, found, err = firstVisibleBefore(v, namespace, queue, limitMicros) // every priority band
	if err != nil || !found {
		return 0, false, err
	}
	return max(atMicros, freesAt), true, nil
}

// AdoptBudget bounds the visibility-index entries a queue's first share reads to find the
// leases held before it (adoptLeases): leases beyond it, in a partition holding more than
// AdoptBudget of the queue's messages leased or delayed into the next maximum lease, are not
// counted by the share until they end.
const AdoptBudget = 65_536

// adoptLeases writes the lease entry (QueueLeaseKey) of each of the queue's leases in this
// partition that has not ended at nowMicros, so that a first share counts the leases held
// before it. A leased message's index entry sits at its lease end, which is at most
// lim.MaxLeaseMicros after nowMicros (a lease or an extension is never longer), so it reads
// each priority band's entries in (now, now + max lease] — leased messages and messages delayed
// into that window — at most AdoptBudget of them in all, oldest lease end first in each band.
func adoptLeases(v kv.View, lim input.Limits, namespace, queue string, nowMicros int64) error {
	bands, err := usedBands(v, namespace, queue)
	if err != nil {
		return err
	}
	horizon, ok := input.AddMicros(nowMicros, lim.MaxLeaseMicros)
	if !ok {
		horizon = input.MaxInstantMicros
	}
	read := 0
	var adopted [][]byte // written after every scan, so no view is written while it is scanned
	for _, p := range bands {
		if read >= AdoptBudget {
			break
		}
		entries, err := scanIndex(v, keys.PriorityVisibilityKey(namespace, queue, p, nowMicros+1, 0),
			keys.PriorityVisibilityKey(namespace, queue, p, horizon+1, 0), AdoptBudget-read)
		if err != nil {
			return err
		}
		read += len(entries)
		for _, e := range entries {
			msg := &orreryv1.QueueMessage{}
			if _, err := record.Load(v, e.messageKey, msg); err != nil {
				return err
			}
			if l := msg.GetLease(); l != nil && l.GetUntilUnixMicros() > nowMicros {
				adopted = append(adopted, keys.QueueLeaseKey(namespace, queue, l.GetUntilUnixMicros(), msg.GetSequence()))
			}
		}
	}
	for _, k := range adopted {
		if err := v.Set(k, nil); err != nil {
			return err
		}
	}
	return nil
}
