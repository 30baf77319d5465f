package saga

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
)

// createTTL creates the test saga Waiting with the deadline and a timeout of the given TTL.
func createTTL(deadline, ttlMicros int64) *orreryv1.CompareExchangeSaga {
	m := create(deadline)
	m.Timeout = timeoutWith(ttlMicros)
	return m
}

// TestExpireRejects checks every refusal of ExpireSaga, and that each leaves the store
// byte-identical (applied straight onto the Memory).
func TestExpireRejects(t *testing.T) {
	t.Parallel()
	ttl := input.Second
	cases := []struct {
		name    string
		prep    []step
		m       *orreryv1.ExpireSaga
		now     int64
		code    orrery.Code
		field   string
		message string // a substring the message must contain
	}{
		{name: "no lane", prep: waitingDeadline, m: edit(expire(1), func(m *orreryv1.ExpireSaga) { m.Lane = nil }), code: orrery.CodeValidation, field: "lane"},
		{name: "bad lane queue", prep: waitingDeadline, m: edit(expire(1), func(m *orreryv1.ExpireSaga) { m.Lane.Queue = "a b" }), code: orrery.CodeValidation, field: "lane.queue"},
		{name: "bad saga id", prep: waitingDeadline, m: edit(expire(1), func(m *orreryv1.ExpireSaga) { m.SagaId = "x" }), code: orrery.CodeValidation, field: "saga_id"},
		{name: "revision zero", prep: waitingDeadline, m: expire(0), code: orrery.CodeValidation, field: "expected_revision"},
		{name: "absent", m: expire(1), code: orrery.CodeNotFound, field: "saga_id"},
		{name: "other saga", prep: waitingDeadline, m: edit(expire(1), func(m *orreryv1.ExpireSaga) { m.SagaId = otherSagaID }), code: orrery.CodeNotFound, field: "saga_id"},
		{name: "changed revision", prep: then(waitingDeadline, casStep(exchange(1, waiting, deadline), t0+1)), m: expire(1), code: orrery.CodeRevisionConflict, field: "expected_revision"},
		{name: "future revision", prep: waitingDeadline, m: expire(2), code: orrery.CodeRevisionConflict, field: "expected_revision"},
		{name: "completed", prep: completedSaga, m: expire(2), code: orrery.CodeRevisionConflict, field: "expected_revision"},
		{name: "completed, waiting revision", prep: completedSaga, m: expire(1), code: orrery.CodeRevisionConflict, field: "expected_revision"},
		{name: "cancelled", prep: cancelledSaga, m: expire(2), code: orrery.CodeRevisionConflict, field: "expected_revision"},
		{name: "timed out", prep: timedOutSaga, m: expire(2), now: deadline + 1, code: orrery.CodeRevisionConflict, field: "expected_revision"},
		{name: "timed out, retried", prep: timedOutSaga, m: expire(1), now: deadline + 1, code: orrery.CodeRevisionConflict, field: "expected_revision"},
		{name: "no deadline", prep: waitingNoDeadline, m: expire(1), now: t0 + input.Day, code: orrery.CodeValidation, field: "expected_revision", message: "no deadline"},
		{name: "deadline removed", prep: then(waitingDeadline, casStep(exchange(1, waiting, 0), t0+1)), m: expire(2), now: deadline, code: orrery.CodeValidation, field: "expected_revision", message: "no deadline"},
		{name: "not due", prep: waitingDeadline, m: expire(1), now: deadline - 1, code: orrery.CodeValidation, field: "expected_revision",
			message: "due at " + input.FormatInstant(deadline)},
		{name: "not due after moving the deadline", prep: then(waitingDeadline, casStep(exchange(1, waiting, deadline+input.Second), t0+1)), m: expire(2), now: deadline,
			code: orrery.CodeValidation, field: "expected_revision", message: "due at " + input.FormatInstant(deadline+input.Second)},
		{name: "ttl ended exactly", prep: []step{casStep(createTTL(deadline, ttl), t0)}, m: expire(1), now: deadline + ttl, code: orrery.CodeExpired},
		{name: "ttl ended long ago", prep: []step{casStep(createTTL(deadline, ttl), t0)}, m: expire(1), now: deadline + input.Day, code: orrery.CodeExpired},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lim := input.DefaultLimits()
			mem := prepare(t, lim, tc.prep...)
			now := tc.now
			if now == 0 {
				now = deadline
			}
			before := mem.Clone()
			res, err := ApplyExpire(mem, lim, tc.m, now, queue.CompareOrReturn)
			if res != nil {
				t.Errorf("result = %v, want nil with an error", res)
			}
			wantError(t, err, tc.code, tc.field)
			if !strings.Contains(err.Error(), tc.message) {
				t.Errorf("error %q does not mention %q", err, tc.message)
			}
			if !mem.Equal(before) {
				t.Fatal("a refused ExpireSaga changed the store")
			}
		})
	}
}

// TestExpireApplies checks a successful expiry: exactly one timeout message with the derived
// id, the origin and the times, and the saga TimedOut at the next revision with its due entry
// gone.
func TestExpireApplies(t *testing.T) {
	t.Parallel()
	later := deadline + 7*input.Second
	cases := []struct {
		name      string
		prep      []step
		m         *orreryv1.ExpireSaga
		now       int64
		waiting   uint64 // the Waiting revision that timed out
		deadline  int64
		timeout   *orreryv1.SagaTimeout
		expiresAt int64
		maxDeliv  uint32
	}{
		{name: "at the deadline", prep: waitingDeadline, m: expire(1), now: deadline,
			waiting: 1, deadline: deadline, timeout: timeoutWith(0), maxDeliv: 10},
		{name: "long after the deadline without ttl", prep: waitingDeadline, m: expire(1), now: deadline + 300*input.Day,
			waiting: 1, deadline: deadline, timeout: timeoutWith(0), maxDeliv: 10},
		{name: "within the ttl", prep: []step{casStep(createTTL(deadline, input.Minute), t0)}, m: expire(1), now: deadline + input.Minute - 1,
			waiting: 1, deadline: deadline, timeout: timeoutWith(input.Minute), expiresAt: deadline + input.Minute, maxDeliv: 10},
		{name: "after updates", prep: then(waitingNoDeadline, casStep(exchange(1, waiting, later), t0+1), casStep(exchange(2, waiting, later), t0+2)),
			m: expire(3), now: later, waiting: 3, deadline: later, timeout: timeoutWith(0), maxDeliv: 10},
		{name: "explicit max deliveries and another queue", prep: []step{casStep(edit(create(deadline), func(m *orreryv1.CompareExchangeSaga) {
			m.Timeout.Queue = "other.queue"
			m.Timeout.Template.MaxDeliveries = 3
		}), t0)}, m: expire(1), now: deadline + 1, waiting: 1, deadline: deadline,
			timeout: edit(timeoutWith(0), func(to *orreryv1.SagaTimeout) { to.Queue = "other.queue"; to.Template.MaxDeliveries = 3 }), maxDeliv: 3},
		{name: "a template's priority", prep: []step{casStep(edit(create(deadline), func(m *orreryv1.CompareExchangeSaga) {
			m.Timeout.Template.Priority = 6
		}), t0)}, m: expire(1), now: deadline, waiting: 1, deadline: deadline,
			timeout: edit(timeoutWith(0), func(to *orreryv1.SagaTimeout) { to.Template.Priority = 6 }), maxDeliv: 10},
		{name: "empty template", prep: []step{casStep(edit(create(deadline), func(m *orreryv1.CompareExchangeSaga) { m.Timeout.Template = nil }), t0)},
			m: expire(1), now: deadline, waiting: 1, deadline: deadline, timeout: &orreryv1.SagaTimeout{Queue: timeoutQueue}, maxDeliv: 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lim := input.DefaultLimits()
			mem := prepare(t, lim, tc.prep...)
			before := mustLoad(t, mem)
			res, err := ApplyExpire(mem, lim, tc.m, tc.now, queue.CompareOrReturn)
			if err != nil {
				t.Fatalf("ApplyExpire: %v", err)
			}
			id := TimeoutMessageID(sagaID, tc.waiting)
			wantRes := &orreryv1.SagaResult{Revision: tc.waiting + 1, Phase: timedOut, TimeoutMessageId: id}
			if !proto.Equal(res, wantRes) {
				t.Fatalf("result = %v, want %v", res, wantRes)
			}

			msgs := messages(t, mem)
			if len(msgs) != 1 {
				t.Fatalf("queue holds %d messages, want exactly 1: %v", len(msgs), msgs)
			}
			got := msgs[0]
			if got.GetSequence() == 0 {
				t.Error("the timeout message has no sequence")
			}
			got.Sequence = 0
			tmpl := tc.timeout.GetTemplate()
			wantMsg := &orreryv1.QueueMessage{
				Id:                   id,
				Lane:                 &orreryv1.Lane{Namespace: sagaLane().GetNamespace(), Queue: tc.timeout.GetQueue(), Key: sagaLane().GetKey()},
				PayloadJson:          tmpl.GetPayloadJson(),
				HeadersJson:          tmpl.GetHeadersJson(),
				OrderingKey:          tmpl.GetOrderingKey(),
				EnqueuedAtUnixMicros: tc.now,
				VisibleAtUnixMicros:  tc.now,
				ExpiresAtUnixMicros:  tc.expiresAt,
				MaxDeliveries:        tc.maxDeliv,
				Priority:             tmpl.GetPriority(),
				Origin: &orreryv1.QueueMessage_SagaTimeout{SagaTimeout: &orreryv1.SagaTimeoutOrigin{
					SagaId: sagaID, WaitingRevision: tc.waiting, DeadlineUnixMicros: tc.deadline,
				}},
			}
			if !got.GetCompared() {
				t.Error("the timeout message is not marked compared")
			}
			got.Compared = false
			if !proto.Equal(got, wantMsg) {
				t.Fatalf("timeout message = %v\nwant %v", got, wantMsg)
			}

			rec := mustLoad(t, mem)
			wantRec := proto.CloneOf(before)
			wantRec.Revision = tc.waiting + 1
			wantRec.Phase = timedOut
			wantRec.TimeoutMessageId = id
			if !proto.Equal(rec, wantRec) {
				t.Fatalf("stored %v\nwant %v", rec, wantRec)
			}
			wantDue(t, mem, 0, 0)

			// A retry of the same command finds the saga moved on and enqueues nothing more.
			after := mem.Clone()
			_, err = ApplyExpire(mem, lim, tc.m, tc.now+1, queue.CompareOrReturn)
			wantError(t, err, orrery.CodeRevisionConflict, "expected_revision")
			if !mem.Equal(after) {
				t.Fatal("a retried ExpireSaga changed the store")
			}
		})
	}
}

// TestExpireQuotaLeavesWaiting fills the destination lane to its quota, then expires: the
// error is QuotaExceeded and, the caller discarding the mutation's buffer, the store is
// unchanged and the saga still Waiting and due.
func TestExpireQuotaLeavesWaiting(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		limit func(*input.Limits)
	}{
		{name: "messages", limit: func(l *input.Limits) { l.MaxLaneMessages = 2 }},
		{name: "bytes", limit: func(l *input.Limits) { l.MaxLaneBytes = 40 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lim := input.DefaultLimits()
			tc.limit(&lim)
			mem := prepare(t, lim, waitingDeadline...)
			for i := range 2 {
				filler := &orreryv1.QueueMessage{Id: "filler-" + strconv.Itoa(i), Lane: destLane(), PayloadJson: `"0123456789"`,
					EnqueuedAtUnixMicros: t0, VisibleAtUnixMicros: t0, MaxDeliveries: 10}
				if created, err := queue.Put(mem, lim, filler); err != nil || !created {
					t.Fatalf("pre-fill: created %v, err %v", created, err)
				}
			}
			before := mem.Clone()

			buf := kv.NewBuffer(mem)
			res, err := ApplyExpire(buf, lim, expire(1), deadline, queue.CompareOrReturn)
			if res != nil {
				t.Errorf("result = %v, want nil with an error", res)
			}
			wantError(t, err, orrery.CodeQuotaExceeded, "lane")
			// The caller discards buf: nothing is committed.
			if !mem.Equal(before) {
				t.Fatal("the store changed")
			}
			rec := mustLoad(t, mem)
			if rec.GetPhase() != waiting || rec.GetRevision() != 1 || rec.GetTimeoutMessageId() != "" {
				t.Fatalf("saga = %v, want Waiting at revision 1", rec)
			}
			wantDue(t, mem, deadline, 1)
			if n := len(messages(t, mem)); n != 2 {
				t.Fatalf("queue holds %d messages, want the 2 fillers", n)
			}

			// Once the lane has room, the same command succeeds.
			lim = input.DefaultLimits()
			if _, err := ApplyExpire(mem, lim, expire(1), deadline+1, queue.CompareOrReturn); err != nil {
				t.Fatalf("expire after the quota was lifted: %v", err)
			}
			wantDue(t, mem, 0, 0)
		})
	}
}

// TestExpireMessageAlreadyPresent covers a message with the timeout's id already in the lane
// before apply version 18 (queue.SameByID): nothing is enqueued, yet the saga ends TimedOut,
// as if that message were its timeout. TestExpireMeetsForeignMessage is the case from 18 on.
func TestExpireMessageAlreadyPresent(t *testing.T) {
	t.Parallel()
	lim := input.DefaultLimits()
	mem := prepare(t, lim, waitingDeadline...)
	id := TimeoutMessageID(sagaID, 1)
	existing := &orreryv1.QueueMessage{Id: id, Lane: destLane(), PayloadJson: `"earlier"`, EnqueuedAtUnixMicros: t0, VisibleAtUnixMicros: t0, MaxDeliveries: 10}
	if created, err := queue.Put(mem, lim, existing); err != nil || !created {
		t.Fatalf("pre-put: created %v, err %v", created, err)
	}
	res, err := ApplyExpire(mem, lim, expire(1), deadline, queue.SameByID)
	if err != nil {
		t.Fatal(err)
	}
	if res.GetPhase() != timedOut || res.GetRevision() != 2 || res.GetTimeoutMessageId() != id {
		t.Fatalf("result = %v", res)
	}
	msgs := messages(t, mem)
	if len(msgs) != 1 || msgs[0].GetPayloadJson() != `"earlier"` {
		t.Fatalf("messages = %v, want only the earlier one", msgs)
	}
	wantDue(t, mem, 0, 0)
}

// TestExpireMeetsForeignMessage: from apply version 18 (queue.CompareOrReturn), a message a
// client enqueued under the timeout's id — its origin is not this saga's timeout — makes the
// expiry fail IdempotencyConflict on id, writing nothing: the saga stays Waiting and due, the
// client's message stays as it was, and nothing is lost. Once that message is acked its
// tombstone still holds the id; the expiry succeeds only when the id is the timeout's own.
func TestExpireMeetsForeignMessage(t *testing.T) {
	t.Parallel()
	lim := input.DefaultLimits()
	mem := prepare(t, lim, waitingDeadline...)
	id := TimeoutMessageID(sagaID, 1)
	squat := &orreryv1.Enqueue{Lane: destLane(), Id: id, PayloadJson: `"earlier"`}
	if res, err := queue.ApplyEnqueue(mem, lim, squat, t0, queue.CompareOrReturn); err != nil || !res.GetCreated() {
		t.Fatalf("client enqueue under the timeout's id: %v %v", res, err)
	}
	before := mem.Clone()
	_, err := ApplyExpire(mem, lim, expire(1), deadline, queue.CompareOrReturn)
	if !errors.Is(err, orrery.ErrIdempotencyConflict) || orrery.AsError(err).Field != "id" || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), "origin") {
		t.Fatalf("expire: %v, want IdempotencyConflict on id naming %s and its origin", err, id)
	}
	if !mem.Equal(before) {
		t.Fatal("the refused expiry wrote")
	}
	if rec := mustLoad(t, mem); rec.GetPhase() != waiting || rec.GetRevision() != 1 {
		t.Fatalf("saga %v, want still waiting at revision 1", rec)
	}
	wantDue(t, mem, deadline, 1)
}

// TestExpireOnBufferCommits checks that ExpireSaga applied on a buffer and committed gives the
// same store as applied directly: the batch layer's path.
func TestExpireOnBufferCommits(t *testing.T) {
	t.Parallel()
	lim := input.DefaultLimits()
	direct := prepare(t, lim, waitingDeadline...)
	viaBuffer := direct.Clone()
	if _, err := ApplyExpire(direct, lim, expire(1), deadline, queue.CompareOrReturn); err != nil {
		t.Fatal(err)
	}
	buf := kv.NewBuffer(viaBuffer)
	if _, err := ApplyExpire(buf, lim, expire(1), deadline, queue.CompareOrReturn); err != nil {
		t.Fatal(err)
	}
	if err := buf.Commit(); err != nil {
		t.Fatal(err)
	}
	if !direct.Equal(viaBuffer) {
		t.Fatal("buffered and direct application differ")
	}
}
