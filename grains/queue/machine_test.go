package queue

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
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
	createdIDs []issued              // creation order (token unused), for deterministic checks
	paused     map[string]bool       // queue → paused (PauseQueue)
	cancelled  map[string]bool       // actual lane+id → a CancelMessage reached it
	unique     map[string]uniqueHold // lane+unique key → the message that took it last
	retry      retryModel            // retry policies and what they dropped
	share      *shareModel           // the test queue's share (SetQueueShare), nil when uncapped
}

// uniqueHold is the model of a unique record: the message that took the key and the instant
// the key is held until (0: while that message is live in its lane).
type uniqueHold struct {
	lane  *orreryv1.Lane
	id    string
	until int64
}

func newMachine(t failer) *machine {
	b := setup(t)
	b.lim.MaxLaneMessages = 6
	b.lim.MaxLaneBytes = 120
	return &machine{
		bundle: b, created: map[string]bool{}, sent: map[string]string{}, digested: map[string]bool{}, expiresAt: map[string]int64{}, acked: map[string]bool{},
		leaseUntil: map[string]int64{}, current: map[string]string{}, paused: map[string]bool{}, cancelled: map[string]bool{},
		unique: map[string]uniqueHold{},
		retry:  newRetryModel(),
	}
}

func modelKey(lane *orreryv1.Lane, id string) string { return string(keys.LaneID(lane, id)) }

func (m *machine) step(c chooser) {
	m.t.Helper()
	switch c.intRange("op", 0, 10) {
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
		m.pruneUniques(c)
	case 8:
		m.setRetryPolicy(c)
	case 9:
		m.setShare(c)
	default:
		m.advance(int64(c.intRange("advance", 0, 8)) * input.Second / 2)
	}
	m.check()
	m.checkIDs()
	m.checkUnique()
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
		Priority:         []int32{0, 0, 1, 2, 9}[c.intRange("priority", 0, 4)],
		Retry:            m.drawPolicy(c, "enqueue_retry"),
	}
	// Mostly compare-or-return (apply version 18); sometimes as before it, which stores no
	// digest, so that messages and tombstones without one are met too.
	idempotency := CompareOrReturn
	if c.intRange("idempotency", 0, 3) == 0 {
		idempotency = SameByID
	}
	uniqueKey := m.uniqueSpec(c, cmd)
	key, sent := modelKey(lane, cmd.Id), cmd.PayloadJson+"|"+cmd.HeadersJson
	holder, duplicate := m.holder(lane, uniqueKey)
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
		if err != nil || res.GetCreated() || res.GetDuplicateOf() != "" || !m.store.Equal(before) {
			m.t.Fatalf("re-enqueue of %s: %v %v (or it wrote)", cmd.Id, res, err)
		}
	case duplicate:
		if err != nil || res.GetCreated() || res.GetDuplicateOf() != holder || !m.store.Equal(before) {
			m.t.Fatalf("enqueue of %s under unique key %q held by %s: %v %v (or it wrote)", cmd.Id, uniqueKey, holder, res, err)
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
		m.retry.message[key], m.retry.maxDeliveries[key] = cmd.Retry, input.EffectiveMaxDeliveries(cmd.MaxDeliveries, m.lim)
		m.createdIDs = append(m.createdIDs, issued{lane: lane, id: cmd.Id})
		if cmd.TimeToLiveMicros != 0 {
			m.expiresAt[key] = m.now + cmd.DelayMicros + cmd.TimeToLiveMicros
		}
		if uniqueKey != "" {
			hold := uniqueHold{lane: lane, id: cmd.Id}
			if p := cmd.GetUnique().GetPeriodMicros(); p != 0 {
				hold.until = m.now + p
			}
			m.unique[string(keys.UniqueKey(lane, uniqueKey))] = hold
		}
	}
}

// uniqueSpec sometimes gives cmd a unique spec (a caller's key or by payload, held while live
// or for a period) and returns the key the model resolves it to ("" without one).
func (m *machine) uniqueSpec(c chooser, cmd *orreryv1.Enqueue) string {
	kind := c.intRange("unique", 0, 3)
	if kind == 0 {
		return ""
	}
	cmd.Unique = &orreryv1.UniqueSpec{PeriodMicros: int64(c.intRange("unique_period", 0, 2)) * 3 * input.Second}
	if kind == 3 {
		cmd.Unique.ByPayload = true
		sum := sha256.Sum256([]byte(cmd.PayloadJson + "\x00" + cmd.HeadersJson))
		return hex.EncodeToString(sum[:])
	}
	cmd.Unique.Key = []string{"u1", "u2"}[kind-1]
	return cmd.Unique.Key
}

// holder is the id of the message the model says holds uniqueKey in lane now, if any: one that
// took it for a period that has not passed, or while live and still live in the lane (not
// cancelled, not past its expiry).
func (m *machine) holder(lane *orreryv1.Lane, uniqueKey string) (string, bool) {
	if uniqueKey == "" {
		return "", false
	}
	hold, found := m.unique[string(keys.UniqueKey(lane, uniqueKey))]
	if !found {
		return "", false
	}
	if hold.until != 0 {
		return hold.id, m.now < hold.until
	}
	key := modelKey(lane, hold.id)
	_, live := m.message(lane, hold.id)
	expired := m.expiresAt[key] != 0 && m.expiresAt[key] <= m.now
	return hold.id, live && !m.cancelled[key] && !expired
}

// pruneUniques removes lapsed unique records within a small bound: the soonest lapsed first
// (then in key order), as the model sorts them.
func (m *machine) pruneUniques(c chooser) {
	m.t.Helper()
	budget := c.intRange("prune", 1, 3)
	var lapsed []string
	for k, hold := range m.unique {
		if hold.until != 0 && hold.until <= m.now {
			lapsed = append(lapsed, k)
		}
	}
	sort.Slice(lapsed, func(i, j int) bool {
		a, b := m.unique[lapsed[i]], m.unique[lapsed[j]]
		if a.until != b.until {
			return a.until < b.until
		}
		return lapsed[i] < lapsed[j]
	})
	removed, more, err := PruneUniques(m.store, m.now, budget)
	want := min(budget, len(lapsed))
	if err != nil || removed != want || more != (len(lapsed) > budget) {
		m.t.Fatalf("prune of %d lapsed unique records within %d: %d %v %v", len(lapsed), budget, removed, more, err)
	}
	for _, k := range lapsed[:want] {
		delete(m.unique, k)
	}
}

// checkUnique requires the store's unique records to be the model's: one held for a period
// stays until pruned, one held while live exactly while its message is in its lane.
func (m *machine) checkUnique() {
	m.t.Helper()
	count := 0
	err := kv.ScanPrefix(m.store, keys.Unique, func(key, _ []byte) (bool, error) {
		if !bytes.HasPrefix(key, keys.UniqueLapsePrefix()) {
			count++
		}
		return true, nil
	})
	if err != nil {
		m.t.Fatal(err)
	}
	want := 0
	for k, hold := range m.unique {
		rec := &orreryv1.UniqueRecord{}
		found, err := record.Load(m.store, []byte(k), rec)
		if err != nil {
			m.t.Fatal(err)
		}
		_, live := m.message(hold.lane, hold.id)
		if hold.until == 0 && !live {
			if found {
				m.t.Fatalf("the record %x outlived its holder %s", k, hold.id)
			}
			continue
		}
		want++
		if !found || rec.GetMessageId() != hold.id || rec.GetHeldUntilUnixMicros() != hold.until {
			m.t.Fatalf("record %x is %v (found %v), the model says %s until %d", k, rec, found, hold.id, hold.until)
		}
	}
	if count != want {
		m.t.Fatalf("the store holds %d unique records, the model %d", count, want)
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
	m.lim.PriorityStepMicros = []int64{0, input.Second / 2, input.Second, 3 * input.Second}[c.intRange("priority_step", 0, 3)]
	capped := queue == testQueue && m.share != nil && !m.paused[queue]
	admits := 0
	limit := int(cmd.Max)
	if capped {
		admits = m.share.admits(m.now)
		if visible, err := VisibleAt(m.store, testNamespace, queue, m.now); err != nil || (visible && admits == 0) {
			m.t.Fatalf("VisibleAt under a share that admits nothing: %v, %v", visible, err)
		}
		limit = min(limit, admits)
	}
	wantIDs, wantMore := m.expectedReceive(queue, limit)
	if capped && limit < int(cmd.Max) && len(wantIDs) == limit {
		wantMore = false // the share stopped it: its caller waits for a lease to end or a token
	}
	before := m.store.Clone()
	res := m.receiveJudged(cmd)
	if !m.paused[queue] && (!slices.Equal(ids(res.GetMessages()), wantIDs) || res.GetMore() != wantMore) {
		m.t.Fatalf("receive of %d from %s at step %d: leased %v (more %v), the model picks %v (more %v)",
			cmd.Max, queue, m.lim.PriorityStepMicros, ids(res.GetMessages()), res.GetMore(), wantIDs, wantMore)
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
		if limit := m.attemptLimit(nil, msg.GetLane(), msg.GetId()); !input.IsDeadLetterQueue(queue) && msg.GetDeliveryCount() > limit {
			m.t.Fatalf("%s delivered %d times, max %d", msg.GetId(), msg.GetDeliveryCount(), limit)
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

// expectedReceive is the reference model of a receive's order: it reads queue's messages
// (not the index) and picks, among those visible at now (an ended lease included), the one
// with the smallest visible time minus priority × step, then enqueue sequence (with a step of
// 0, the highest priority first): the ids the receive must lease, skipping those it sweeps
// (expired, cancelled, out of deliveries), and whether visible ones remain past them.
func (m *machine) expectedReceive(queue string, maxMessages int) (leased []string, more bool) {
	m.t.Helper()
	type candidate struct {
		msg       *orreryv1.QueueMessage
		visibleAt int64
	}
	var visible []candidate
	err := kv.ScanPrefix(m.store, keys.Message, func(_, value []byte) (bool, error) {
		msg := &orreryv1.QueueMessage{}
		if err := proto.Unmarshal(value, msg); err != nil {
			return false, err
		}
		at := msg.GetVisibleAtUnixMicros()
		if l := msg.GetLease(); l != nil {
			at = l.GetUntilUnixMicros()
		}
		if msg.GetLane().GetQueue() == queue && at <= m.now {
			visible = append(visible, candidate{msg, at})
		}
		return true, nil
	})
	if err != nil {
		m.t.Fatal(err)
	}
	step := m.lim.PriorityStepMicros
	sort.Slice(visible, func(i, j int) bool {
		a, b := visible[i], visible[j]
		pa, pb := int64(a.msg.GetPriority()), int64(b.msg.GetPriority())
		if step == 0 && pa != pb {
			return pa > pb
		}
		if ea, eb := a.visibleAt-pa*step, b.visibleAt-pb*step; ea != eb {
			return ea < eb
		}
		return a.msg.GetSequence() < b.msg.GetSequence()
	})
	leased = []string{}
	for i, c := range visible {
		if len(leased) == maxMessages {
			return leased, i < len(visible)
		}
		msg := c.msg
		swept := (msg.GetExpiresAtUnixMicros() != 0 && msg.GetExpiresAtUnixMicros() <= m.now) || msg.GetCancelled() != nil ||
			(!input.IsDeadLetterQueue(queue) && msg.GetDeliveryCount() >= m.attemptLimit(nil, msg.GetLane(), msg.GetId()))
		if !swept {
			leased = append(leased, msg.GetId())
		}
	}
	return leased, false
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
		err = m.release(c, use, stored, want)
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
	} else if !m.acked[actualKey] && !m.retry.dropped[actualKey] {
		m.t.Fatalf("%q was removed without an ack or a drop", actualKey)
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
		if _, err := ApplySetShare(m.store, m.lim, "operator", &orreryv1.SetQueueShare{Namespace: testNamespace, Queue: testQueue}, m.now); err != nil {
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
			res := m.receiveJudged(&orreryv1.Receive{Namespace: testNamespace, Queue: queue, Max: m.lim.MaxReceivePerCommand})
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
