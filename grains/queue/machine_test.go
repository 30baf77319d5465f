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
	sent       map[string]string // source lane+id → the payload and headers it was created with
	digested   map[string]bool   // source lane+id → created under CompareOrReturn (with a digest)
	expiresAt  map[string]int64  // source lane+id → expiry instant (0 never)
	acked      map[string]bool   // actual lane+id → removed by an ack
	leaseUntil map[string]int64  // actual lane+id → end of the lease the model granted
	current    map[string]string // actual lane+id → the token the model considers current
	tokens     []issued
	createdIDs []issued        // creation order (token unused), for deterministic checks
	paused     map[string]bool // queue → paused (PauseQueue)
	cancelled  map[string]bool // actual lane+id → a CancelMessage reached it
	share      *shareModel     // the test queue's share (SetQueueShare), nil when uncapped
}

func newMachine(t failer) *machine {
	b := setup(t)
	b.lim.MaxLaneMessages = 6
	b.lim.MaxLaneBytes = 120
	return &machine{
		bundle: b, created: map[string]bool{}, sent: map[string]string{}, digested: map[string]bool{}, expiresAt: map[string]int64{}, acked: map[string]bool{},
		leaseUntil: map[string]int64{}, current: map[string]string{}, paused: map[string]bool{}, cancelled: map[string]bool{},
	}
}

func modelKey(lane *orreryv1.Lane, id string) string { return string(keys.LaneID(lane, id)) }

func (m *machine) step(c chooser) {
	m.t.Helper()
	switch c.intRange("op", 0, 8) {
	case 0:
		m.enqueue(c)
	case 1:
		m.receive(c)
	case 2, 3, 4:
		m.leaseOp(c)
	case 5:
		m.pauseOrResume(c)
	case 6:
		m.cancel(c)
	case 7:
		m.setShare(c)
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
		HeadersJson:      []string{"", `{"h":1}`}[c.intRange("headers", 0, 1)],
		DelayMicros:      int64(c.intRange("delay", 0, 3)) * input.Second,
		TimeToLiveMicros: int64(c.intRange("ttl", 0, 4)) * 2 * input.Second,
		MaxDeliveries:    int32(c.intRange("max_deliveries", 0, 3)),
	}
	// Mostly compare-or-return (apply version 18); sometimes as before it, which stores no
	// digest, so that messages and tombstones without one are met too.
	idempotency := CompareOrReturn
	if c.intRange("idempotency", 0, 3) == 0 {
		idempotency = SameByID
	}
	key, sent := modelKey(lane, cmd.Id), cmd.PayloadJson+"|"+cmd.HeadersJson
	counters, _ := LoadCounters(m.store, lane)
	fits := counters.GetMessages()+1 <= m.lim.MaxLaneMessages && counters.GetBytes()+uint64(len(cmd.PayloadJson)+len(cmd.HeadersJson)) <= m.lim.MaxLaneBytes
	before := m.store.Clone()
	res, err := ApplyEnqueue(m.store, m.lim, cmd, m.now, idempotency)
	_, live := m.message(lane, cmd.Id)
	switch {
	case m.created[key] && idempotency == CompareOrReturn && m.sent[key] != sent && (live || m.digested[key]):
		// Another message under a taken id: a live one is compared field by field, a
		// tombstone by the digest it kept (none when it was stored before version 18).
		if !errors.Is(err, orrery.ErrIdempotencyConflict) || orrery.AsError(err).Field != "id" || !m.store.Equal(before) {
			m.t.Fatalf("enqueue of another message under %s: %v %v (or it wrote), want IdempotencyConflict on id", cmd.Id, res, err)
		}
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
		m.created[key], m.sent[key], m.digested[key] = true, sent, idempotency == CompareOrReturn
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
	capped := queue == testQueue && m.share != nil && !m.paused[queue]
	admits := 0
	if capped {
		admits = m.share.admits(m.now)
		if visible, err := VisibleAt(m.store, testNamespace, queue, m.now); err != nil || (visible && admits == 0) {
			m.t.Fatalf("VisibleAt under a share that admits nothing: %v, %v", visible, err)
		}
	}
	before := m.store.Clone()
	res, err := ApplyReceive(m.store, m.lim, cmd, m.now)
	if err != nil {
		m.t.Fatalf("receive: %v", err)
	}
	if capped {
		if len(res.GetMessages()) > admits {
			m.t.Fatalf("a share admitting %d (%s) leased %d", admits, m.share, len(res.GetMessages()))
		}
		m.share.took(res.GetMessages(), m.now)
	}
	if m.paused[queue] && (len(res.GetMessages()) > 0 || res.GetMore() || !m.store.Equal(before)) {
		m.t.Fatalf("receive of paused queue %s: %v (or it wrote)", queue, res)
	}
	for _, msg := range res.GetMessages() {
		key := modelKey(msg.GetLane(), msg.GetId())
		if m.cancelled[key] || msg.GetCancelled() != nil {
			m.t.Fatalf("%s delivered after it was cancelled", key)
		}
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
	case m.current[key] != use.token, m.cancelled[key]:
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
			m.share.ended(key)
		}
	case 1:
		d := int64(c.intRange("release_delay", 0, 2)) * input.Second
		_, err = ApplyRelease(m.store, m.lim, &orreryv1.Release{Lane: use.lane, Id: use.id, LeaseToken: use.token, DelayMicros: d}, m.now)
		if err == nil {
			delete(m.current, key)
			delete(m.leaseUntil, key)
			m.share.ended(key)
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
			if m.share != nil && use.lane.GetQueue() == testQueue {
				m.share.counted[key] = res.GetLeaseUntilUnixMicros()
			}
		}
	}
	if orrery.CodeOf(err) != want {
		m.t.Fatalf("lease command on %s: %v, want code %v", use.id, err, want)
	}
	if err != nil && !m.store.Equal(before) {
		m.t.Fatalf("refused lease command on %s wrote", use.id)
	}
}

// pauseOrResume pauses or resumes the test queue or its dead-letter queue; a repeated pause or
// resume changes nothing.
func (m *machine) pauseOrResume(c chooser) {
	m.t.Helper()
	queue := []string{testQueue, deadQueue}[c.intRange("pause_queue", 0, 1)]
	before := m.store.Clone()
	var res *orreryv1.QueuePauseResult
	var err error
	pause := c.intRange("pause", 0, 1) == 1
	if pause {
		res, err = ApplyPause(m.store, "operator", &orreryv1.PauseQueue{Namespace: testNamespace, Queue: queue}, m.now)
	} else {
		res, err = ApplyResume(m.store, &orreryv1.ResumeQueue{Namespace: testNamespace, Queue: queue})
	}
	if err != nil || res.GetChanged() != (m.paused[queue] != pause) || (pause && res.GetPause().GetPausedBy() != "operator") {
		m.t.Fatalf("pause %v of %s (paused %v): %v %v", pause, queue, m.paused[queue], res, err)
	}
	if !res.GetChanged() && !m.store.Equal(before) {
		m.t.Fatalf("a pause %v that changed nothing wrote", pause)
	}
	m.paused[queue] = pause
}

// cancel cancels an id in its lane or its dead-letter lane: what it does follows from where the
// id is and whether it is leased, and a cancelled id is never delivered again.
func (m *machine) cancel(c chooser) {
	m.t.Helper()
	lane := laneOf([]string{testQueue, deadQueue}[c.intRange("cancel_queue", 0, 1)], []string{"k1", "k2"}[c.intRange("cancel_lane", 0, 1)])
	id := idOf(c.intRange("cancel_id", 0, 11))
	if len(m.tokens) > 0 && c.intRange("cancel_delivered", 0, 1) == 1 { // most often one received
		use := m.tokens[c.intRange("cancel_token", 0, len(m.tokens)-1)]
		lane, id = use.lane, use.id
	}
	key := modelKey(lane, id)
	stored, live := m.message(lane, id)
	_, gone := m.tombstone(lane, id)
	leased := live && stored.GetLease() != nil && stored.GetLease().GetUntilUnixMicros() > m.now
	var want orreryv1.CancelOutcome
	switch {
	case !live && !gone:
	case !live, m.cancelled[key]:
		want = orreryv1.CancelOutcome_CANCEL_OUTCOME_ALREADY_DONE
	case leased:
		want = orreryv1.CancelOutcome_CANCEL_OUTCOME_LEASE_REVOKED
	default:
		want = orreryv1.CancelOutcome_CANCEL_OUTCOME_REMOVED
	}
	before := m.store.Clone()
	res, first, err := ApplyCancel(m.store, "operator", &orreryv1.CancelMessage{Lane: lane, Id: id}, m.now)
	if want == 0 {
		wantCode(m.t, err, orrery.CodeNotFound, "id")
		if !m.store.Equal(before) {
			m.t.Fatalf("a cancel of unknown %s wrote", key)
		}
		return
	}
	if err != nil || res.GetOutcome() != want || (first != nil) != (want != orreryv1.CancelOutcome_CANCEL_OUTCOME_ALREADY_DONE) {
		m.t.Fatalf("cancel of %s: %v %v (first %v), want %v", key, res, err, first != nil, want)
	}
	if want == orreryv1.CancelOutcome_CANCEL_OUTCOME_ALREADY_DONE && (leased || !live) && !m.store.Equal(before) {
		m.t.Fatalf("a cancel of %s that was done already wrote", key)
	}
	if live {
		m.cancelled[key] = true
	}
	if want == orreryv1.CancelOutcome_CANCEL_OUTCOME_REMOVED {
		m.share.ended(key)
	}
	if _, stillLive := m.message(lane, id); stillLive != (want == orreryv1.CancelOutcome_CANCEL_OUTCOME_LEASE_REVOKED || (want == orreryv1.CancelOutcome_CANCEL_OUTCOME_ALREADY_DONE && leased)) {
		m.t.Fatalf("cancel of %s (%v): live %v after it", key, want, stillLive)
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
			if tombSrc.GetExpired() || tombSrc.GetCancelled() || m.acked[key] {
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
	if ts.GetCancelled() {
		if !m.cancelled[actualKey] {
			m.t.Fatalf("%q was removed as cancelled, but no cancel reached it", actualKey)
		}
	} else if ts.GetExpired() {
		if exp := m.expiresAt[sourceKey]; exp == 0 || exp > m.now {
			m.t.Fatalf("%q expired at %d, before its expiry %d", actualKey, m.now, exp)
		}
	} else if !m.acked[actualKey] {
		m.t.Fatalf("%q was removed without an ack", actualKey)
	}
}

// drain resumes the paused queues, lets every lease end, receives and acks everything (a
// cancelled message is removed on the way), and requires the store to end with no live
// message and every created id acked, expired or cancelled.
func (m *machine) drain() {
	m.t.Helper()
	for round := 0; ; round++ {
		if round == 10 {
			m.t.Fatal("drain did not empty the store")
		}
		m.advance(input.Hour)
		if _, err := ApplySetShare(m.store, "operator", &orreryv1.SetQueueShare{Namespace: testNamespace, Queue: testQueue}, m.now); err != nil {
			m.t.Fatal(err)
		}
		m.share = nil
		for queue := range m.paused {
			if _, err := ApplyResume(m.store, &orreryv1.ResumeQueue{Namespace: testNamespace, Queue: queue}); err != nil {
				m.t.Fatal(err)
			}
			delete(m.paused, queue)
		}
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
