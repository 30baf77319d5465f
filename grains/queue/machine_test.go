package queue

import (
	"errors"
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// chooser draws the machine's random choices (rapid, or a seeded math/rand in tests).
type chooser interface {
	intRange(label string, lowest, highest int) int
}

// issued is a lease token a receive handed out.
type issued struct {
	lane  *orreryv1.Lane
	id    string
	token string
}

// machine drives random commands against the store and a small reference model of what
// must hold: which ids were created, acked and when they expire, and who holds a lease.
type machine struct {
	*bundle
	created    map[string]bool   // source lane+id → created by an enqueue
	expiresAt  map[string]int64  // source lane+id → expiry instant (0 never)
	acked      map[string]bool   // actual lane+id → removed by an ack
	leaseUntil map[string]int64  // actual lane+id → end of the lease the model granted
	current    map[string]string // actual lane+id → the token the model considers current
	tokens     []issued
	createdIDs []issued // creation order (token unused), for deterministic checks
}

func newMachine(t failer) *machine {
	b := setup(t)
	b.lim.MaxLaneMessages = 6
	b.lim.MaxLaneBytes = 120
	return &machine{
		bundle: b, created: map[string]bool{}, expiresAt: map[string]int64{}, acked: map[string]bool{},
		leaseUntil: map[string]int64{}, current: map[string]string{},
	}
}

func modelKey(lane *orreryv1.Lane, id string) string { return string(keys.LaneID(lane, id)) }

func (m *machine) step(c chooser) {
	m.t.Helper()
	switch c.intRange("op", 0, 5) {
	case 0:
		m.enqueue(c)
	case 1:
		m.receive(c)
	case 2, 3, 4:
		m.leaseOp(c)
	default:
		m.advance(int64(c.intRange("advance", 0, 8)) * input.Second / 2)
	}
	m.check()
	m.checkIDs()
}

func (m *machine) enqueue(c chooser) {
	m.t.Helper()
	lane := laneOf(testQueue, []string{"k1", "k2"}[c.intRange("lane", 0, 1)])
	cmd := &orreryv1.Enqueue{
		Lane:             lane,
		Id:               idOf(c.intRange("id", 0, 11)),
		PayloadJson:      fmt.Sprintf(`"%0*d"`, c.intRange("payload", 1, 20), 0),
		DelayMicros:      int64(c.intRange("delay", 0, 3)) * input.Second,
		TimeToLiveMicros: int64(c.intRange("ttl", 0, 4)) * 2 * input.Second,
		MaxDeliveries:    int32(c.intRange("max_deliveries", 0, 3)),
	}
	key := modelKey(lane, cmd.Id)
	counters, _ := LoadCounters(m.store, lane)
	fits := counters.GetMessages()+1 <= m.lim.MaxLaneMessages && counters.GetBytes()+uint64(len(cmd.PayloadJson)) <= m.lim.MaxLaneBytes
	before := m.store.Clone()
	res, err := ApplyEnqueue(m.store, m.lim, cmd, m.now)
	switch {
	case m.created[key]:
		if err != nil || res.GetCreated() || !m.store.Equal(before) {
			m.t.Fatalf("re-enqueue of %s: %v %v (or it wrote)", cmd.Id, res, err)
		}
	case !fits:
		if !errors.Is(err, orrery.ErrQuotaExceeded) || !m.store.Equal(before) {
			m.t.Fatalf("enqueue of %s into a full lane: %v %v", cmd.Id, res, err)
		}
	default:
		if err != nil || !res.GetCreated() {
			m.t.Fatalf("enqueue of %s: %v %v", cmd.Id, res, err)
		}
		m.created[key] = true
		m.createdIDs = append(m.createdIDs, issued{lane: lane, id: cmd.Id})
		if cmd.TimeToLiveMicros != 0 {
			m.expiresAt[key] = m.now + cmd.DelayMicros + cmd.TimeToLiveMicros
		}
	}
}

func (m *machine) receive(c chooser) {
	m.t.Helper()
	queue := []string{testQueue, deadQueue}[c.intRange("queue", 0, 1)]
	cmd := &orreryv1.Receive{
		Namespace: testNamespace, Queue: queue, Owner: "w",
		Max:                 uint32(c.intRange("max", 1, 3)),
		LeaseDurationMicros: int64(c.intRange("lease", 1, 3)) * input.Second,
	}
	res, err := ApplyReceive(m.store, m.lim, cmd, m.now)
	if err != nil {
		m.t.Fatalf("receive: %v", err)
	}
	for _, msg := range res.GetMessages() {
		key := modelKey(msg.GetLane(), msg.GetId())
		if until, held := m.leaseUntil[key]; held && until > m.now {
			m.t.Fatalf("%s delivered at %d while leased until %d", key, m.now, until)
		}
		if exp := msg.GetExpiresAtUnixMicros(); exp != 0 && exp <= m.now {
			m.t.Fatalf("%s delivered after it expired", msg.GetId())
		}
		if !input.IsDeadLetterQueue(queue) && msg.GetDeliveryCount() > effectiveMaxDeliveries(msg, m.lim) {
			m.t.Fatalf("%s delivered %d times, max %d", msg.GetId(), msg.GetDeliveryCount(), msg.GetMaxDeliveries())
		}
		lease := msg.GetLease()
		if lease.GetToken() != LeaseToken(msg.GetLane(), msg.GetId(), msg.GetDeliveryCount(), m.now) || lease.GetUntilUnixMicros() != m.now+cmd.LeaseDurationMicros {
			m.t.Fatalf("%s got lease %v", msg.GetId(), lease)
		}
		m.leaseUntil[key] = lease.GetUntilUnixMicros()
		m.current[key] = lease.GetToken()
		m.tokens = append(m.tokens, issued{lane: msg.GetLane(), id: msg.GetId(), token: lease.GetToken()})
	}
}

// leaseOp acks, releases or extends with a token handed out earlier (current or stale).
func (m *machine) leaseOp(c chooser) {
	m.t.Helper()
	if len(m.tokens) == 0 {
		return
	}
	use := m.tokens[c.intRange("token", 0, len(m.tokens)-1)]
	key := modelKey(use.lane, use.id)
	stored, live := m.message(use.lane, use.id)
	var want orrery.Code
	switch {
	case !live:
		want = orrery.CodeNotFound
	case m.current[key] != use.token:
		want = orrery.CodeTokenInvalidated
	}
	before := m.store.Clone()
	var err error
	switch kind := c.intRange("kind", 0, 2); kind {
	case 0:
		_, _, err = ApplyAck(m.store, m.lim, &orreryv1.Ack{Lane: use.lane, Id: use.id, LeaseToken: use.token}, m.now)
		if err == nil {
			m.acked[key] = true
			delete(m.current, key)
			delete(m.leaseUntil, key)
		}
	case 1:
		d := int64(c.intRange("release_delay", 0, 2)) * input.Second
		_, err = ApplyRelease(m.store, m.lim, &orreryv1.Release{Lane: use.lane, Id: use.id, LeaseToken: use.token, DelayMicros: d}, m.now)
		if err == nil {
			delete(m.current, key)
			delete(m.leaseUntil, key)
		}
	default:
		if want == 0 && stored.GetLease().GetUntilUnixMicros() <= m.now {
			want = orrery.CodeExpired
		}
		d := int64(c.intRange("extend", 1, 3)) * input.Second
		var res *orreryv1.LeaseResult
		res, err = ApplyExtendLease(m.store, m.lim, &orreryv1.ExtendLease{Lane: use.lane, Id: use.id, LeaseToken: use.token, LeaseDurationMicros: d}, m.now)
		if err == nil {
			m.leaseUntil[key] = res.GetLeaseUntilUnixMicros()
		}
	}
	if orrery.CodeOf(err) != want {
		m.t.Fatalf("lease command on %s: %v, want code %v", use.id, err, want)
	}
	if err != nil && !m.store.Equal(before) {
		m.t.Fatalf("refused lease command on %s wrote", use.id)
	}
}

// checkIDs requires every created id to be in exactly one place, and anything gone to have
// gone for a reason the model knows: an ack, or a TTL that has passed.
func (m *machine) checkIDs() {
	m.t.Helper()
	for _, c := range m.createdIDs {
		lane, id, key := c.lane, c.id, modelKey(c.lane, c.id)
		dead := laneOf(deadQueue, lane.GetKey())
		_, liveSrc := m.message(lane, id)
		tombSrc, goneSrc := m.tombstone(lane, id)
		_, liveDead := m.message(dead, id)
		tombDead, goneDead := m.tombstone(dead, id)
		switch {
		case liveSrc:
			if goneSrc || liveDead || goneDead {
				m.t.Fatalf("%s is live in its lane and also elsewhere", id)
			}
		case !goneSrc:
			m.t.Fatalf("%s was lost: neither live nor tombstoned", id)
		case liveDead && goneDead:
			m.t.Fatalf("%s is live and tombstoned in the dead-letter lane", id)
		case liveDead:
			if tombSrc.GetExpired() || m.acked[key] {
				m.t.Fatalf("%s is dead-lettered but its source tombstone says %v", id, tombSrc)
			}
		case goneDead:
			m.checkGone(modelKey(dead, id), key, tombDead)
		default:
			m.checkGone(key, key, tombSrc)
		}
	}
	err := kv.ScanPrefix(m.store, keys.Message, func(_, value []byte) (bool, error) {
		msg := &orreryv1.QueueMessage{}
		if err := proto.Unmarshal(value, msg); err != nil {
			return false, err
		}
		source := msg.GetLane()
		if from := msg.GetDeadLetteredFrom(); from != "" {
			source = laneOf(from, source.GetKey())
		}
		if !m.created[modelKey(source, msg.GetId())] {
			return false, fmt.Errorf("message %s was never created", msg.GetId())
		}
		return true, nil
	})
	if err != nil {
		m.t.Fatal(err)
	}
}

func (m *machine) checkGone(actualKey, sourceKey string, ts *orreryv1.MessageTombstone) {
	m.t.Helper()
	if ts.GetExpired() {
		if exp := m.expiresAt[sourceKey]; exp == 0 || exp > m.now {
			m.t.Fatalf("%q expired at %d, before its expiry %d", actualKey, m.now, exp)
		}
	} else if !m.acked[actualKey] {
		m.t.Fatalf("%q was removed without an ack", actualKey)
	}
}

// drain lets every lease end, receives and acks everything, and requires the store to end
// with no live message and every created id acked or expired.
func (m *machine) drain() {
	m.t.Helper()
	for round := 0; ; round++ {
		if round == 10 {
			m.t.Fatal("drain did not empty the store")
		}
		m.advance(input.Hour)
		var got []*orreryv1.QueueMessage
		for _, queue := range []string{testQueue, deadQueue} {
			res, err := ApplyReceive(m.store, m.lim, &orreryv1.Receive{Namespace: testNamespace, Queue: queue, Max: m.lim.MaxReceivePerCommand}, m.now)
			if err != nil {
				m.t.Fatal(err)
			}
			got = append(got, res.GetMessages()...)
		}
		sort.Slice(got, func(i, j int) bool { return got[i].GetSequence() < got[j].GetSequence() })
		for _, msg := range got {
			if _, _, err := ApplyAck(m.store, m.lim, &orreryv1.Ack{Lane: msg.GetLane(), Id: msg.GetId(), LeaseToken: msg.GetLease().GetToken()}, m.now); err != nil {
				m.t.Fatal(err)
			}
			m.acked[modelKey(msg.GetLane(), msg.GetId())] = true
		}
		m.check()
		m.checkIDs()
		if !m.anyLive() {
			return
		}
	}
}

func (m *machine) anyLive() bool {
	live := false
	_ = kv.ScanPrefix(m.store, keys.Message, func(_, _ []byte) (bool, error) {
		live = true
		return false, nil
	})
	return live
}
