package saga

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

// Prepared histories of the test saga. The deadline is t0+10s unless said otherwise.
var (
	deadline          = t0 + 10*input.Second
	waitingNoDeadline = []step{casStep(create(0), t0)}
	waitingDeadline   = []step{casStep(create(deadline), t0)}
	completedSaga     = []step{casStep(create(deadline), t0), casStep(exchange(1, completed, 0), t0+1)}
	cancelledSaga     = []step{casStep(create(deadline), t0), casStep(exchange(1, cancelled, 0), t0+1)}
	timedOutSaga      = []step{casStep(create(deadline), t0), expireStep(expire(1), deadline)}
)

// then returns a new history: base followed by more.
func then(base []step, more ...step) []step {
	return append(append([]step(nil), base...), more...)
}

// edit returns a copy of m changed by fn.
func edit[M proto.Message](m M, fn func(M)) M {
	c := proto.CloneOf(m)
	fn(c)
	return c
}

// TestCompareExchangeRejects checks every refusal, and that each leaves the store
// byte-identical: the mutation is applied straight onto the Memory, with no buffer to discard.
func TestCompareExchangeRejects(t *testing.T) {
	t.Parallel()
	validation, notFound, conflict := orrery.CodeValidation, orrery.CodeNotFound, orrery.CodeRevisionConflict
	cases := []struct {
		name  string
		limit func(*input.Limits)
		prep  []step
		m     *orreryv1.CompareExchangeSaga
		now   int64
		code  orrery.Code
		field string
	}{
		// Addressing.
		{name: "no lane", m: edit(create(0), func(m *orreryv1.CompareExchangeSaga) { m.Lane = nil }), code: validation, field: "lane"},
		{name: "empty namespace", m: edit(create(0), func(m *orreryv1.CompareExchangeSaga) { m.Lane.Namespace = "" }), code: validation, field: "lane.namespace"},
		{name: "bad lane queue", m: edit(create(0), func(m *orreryv1.CompareExchangeSaga) { m.Lane.Queue = "no spaces" }), code: validation, field: "lane.queue"},
		{name: "dead-letter lane queue", m: edit(create(0), func(m *orreryv1.CompareExchangeSaga) { m.Lane.Queue = "sagas$dlq" }), code: validation, field: "lane.queue"},
		{name: "control character in key", m: edit(create(0), func(m *orreryv1.CompareExchangeSaga) { m.Lane.Key = "a\nb" }), code: validation, field: "lane.key"},
		{name: "saga id not a uuid", m: edit(create(0), func(m *orreryv1.CompareExchangeSaga) { m.SagaId = "order-17" }), code: validation, field: "saga_id"},
		{name: "saga id upper case", m: edit(create(0), func(m *orreryv1.CompareExchangeSaga) { m.SagaId = strings.ToUpper(sagaID) }), code: validation, field: "saga_id"},
		// Phase.
		{name: "phase unspecified", m: edit(create(0), func(m *orreryv1.CompareExchangeSaga) { m.Phase = absent }), code: validation, field: "phase"},
		{name: "phase unknown number", m: edit(create(0), func(m *orreryv1.CompareExchangeSaga) { m.Phase = 99 }), code: validation, field: "phase"},
		{name: "create completed", m: edit(create(0), func(m *orreryv1.CompareExchangeSaga) { m.Phase = completed }), code: validation, field: "phase"},
		{name: "create cancelled", m: edit(create(0), func(m *orreryv1.CompareExchangeSaga) { m.Phase = cancelled }), code: validation, field: "phase"},
		{name: "create timed out", m: edit(create(0), func(m *orreryv1.CompareExchangeSaga) { m.Phase = timedOut }), code: validation, field: "phase"},
		{name: "direct timed out", prep: waitingNoDeadline, m: exchange(1, timedOut, 0), code: validation, field: "phase"},
		{name: "direct timed out past deadline", prep: waitingDeadline, m: exchange(1, timedOut, 0), now: deadline + 1, code: validation, field: "phase"},
		// State.
		{name: "state not json", m: edit(create(0), func(m *orreryv1.CompareExchangeSaga) { m.StateJson = "{" }), code: validation, field: "state_json"},
		{name: "state too large", limit: func(l *input.Limits) { l.MaxStateBytes = 8 }, m: edit(create(0), func(m *orreryv1.CompareExchangeSaga) { m.StateJson = `{"a":"123456789"}` }), code: validation, field: "state_json"},
		// Deadline and timeout.
		{name: "negative deadline", m: edit(create(deadline), func(m *orreryv1.CompareExchangeSaga) { m.DeadlineUnixMicros = -1 }), code: validation, field: "deadline_unix_micros"},
		{name: "deadline after year 9999", m: edit(create(deadline), func(m *orreryv1.CompareExchangeSaga) { m.DeadlineUnixMicros = input.MaxInstantMicros + 1 }), code: validation, field: "deadline_unix_micros"},
		{name: "deadline without timeout", m: edit(create(deadline), func(m *orreryv1.CompareExchangeSaga) { m.Timeout = nil }), code: validation, field: "timeout"},
		{name: "timeout without deadline", m: edit(create(deadline), func(m *orreryv1.CompareExchangeSaga) { m.DeadlineUnixMicros = 0 }), code: validation, field: "deadline_unix_micros"},
		{name: "deadline at logged time", m: create(t0), code: validation, field: "deadline_unix_micros"},
		{name: "deadline in the past", m: create(t0 - input.Second), code: validation, field: "deadline_unix_micros"},
		{name: "update deadline in the past", prep: waitingDeadline, m: exchange(1, waiting, t0+input.Second), now: t0 + 2*input.Second, code: validation, field: "deadline_unix_micros"},
		{name: "deadline with completed", prep: waitingDeadline, m: exchange(1, completed, deadline), code: validation, field: "deadline_unix_micros"},
		{name: "deadline with cancelled", prep: waitingDeadline, m: exchange(1, cancelled, deadline), code: validation, field: "deadline_unix_micros"},
		{name: "timeout alone with completed", prep: waitingDeadline, m: edit(exchange(1, completed, deadline), func(m *orreryv1.CompareExchangeSaga) { m.DeadlineUnixMicros = 0 }), code: validation, field: "timeout"},
		{name: "deadline alone with cancelled", prep: waitingDeadline, m: edit(exchange(1, cancelled, deadline), func(m *orreryv1.CompareExchangeSaga) { m.Timeout = nil }), code: validation, field: "deadline_unix_micros"},
		{name: "empty timeout queue", m: edit(create(deadline), func(m *orreryv1.CompareExchangeSaga) { m.Timeout.Queue = "" }), code: validation, field: "timeout.queue"},
		{name: "bad timeout queue", m: edit(create(deadline), func(m *orreryv1.CompareExchangeSaga) { m.Timeout.Queue = "-x" }), code: validation, field: "timeout.queue"},
		{name: "dead-letter timeout queue", m: edit(create(deadline), func(m *orreryv1.CompareExchangeSaga) { m.Timeout.Queue = "t$dlq" }), code: validation, field: "timeout.queue"},
		{name: "payload not json", m: edit(create(deadline), func(m *orreryv1.CompareExchangeSaga) { m.Timeout.Template.PayloadJson = "nope" }), code: validation, field: "timeout.template.payload_json"},
		{name: "payload too large", limit: func(l *input.Limits) { l.MaxPayloadBytes = 4 }, m: create(deadline), code: validation, field: "timeout.template.payload_json"},
		{name: "headers not an object", m: edit(create(deadline), func(m *orreryv1.CompareExchangeSaga) { m.Timeout.Template.HeadersJson = "[1]" }), code: validation, field: "timeout.template.headers_json"},
		{name: "negative ttl", m: edit(create(deadline), func(m *orreryv1.CompareExchangeSaga) { m.Timeout.Template.TimeToLiveMicros = -1 }), code: validation, field: "timeout.template.time_to_live_micros"},
		{name: "ttl over a year", m: edit(create(deadline), func(m *orreryv1.CompareExchangeSaga) {
			m.Timeout.Template.TimeToLiveMicros = input.MaxTimeToLiveMicros + 1
		}), code: validation, field: "timeout.template.time_to_live_micros"},
		{name: "deadline plus ttl overflows", m: edit(create(input.MaxInstantMicros-input.Second), func(m *orreryv1.CompareExchangeSaga) { m.Timeout.Template.TimeToLiveMicros = input.Day }), code: validation, field: "timeout.template.time_to_live_micros"},
		{name: "max deliveries too large", m: edit(create(deadline), func(m *orreryv1.CompareExchangeSaga) { m.Timeout.Template.MaxDeliveries = 1_000_000 }), code: validation, field: "timeout.template.max_deliveries"},
		{name: "bad ordering key", m: edit(create(deadline), func(m *orreryv1.CompareExchangeSaga) { m.Timeout.Template.OrderingKey = "\x01" }), code: validation, field: "timeout.template.ordering_key"},
		// Revisions.
		{name: "create over existing", prep: waitingNoDeadline, m: create(0), code: conflict, field: "expected_revision"},
		{name: "create over terminal", prep: completedSaga, m: create(0), now: t0 + 2, code: conflict, field: "expected_revision"},
		{name: "update absent", m: exchange(1, waiting, 0), code: notFound, field: "saga_id"},
		{name: "update other lane", prep: waitingNoDeadline, m: edit(exchange(1, waiting, 0), func(m *orreryv1.CompareExchangeSaga) { m.Lane.Key = "order-18" }), code: notFound, field: "saga_id"},
		{name: "update stale revision", prep: then(waitingNoDeadline, casStep(exchange(1, waiting, 0), t0+1)), m: exchange(1, waiting, 0), now: t0 + 2, code: conflict, field: "expected_revision"},
		{name: "update future revision", prep: waitingNoDeadline, m: exchange(2, waiting, 0), code: conflict, field: "expected_revision"},
		// Terminal sagas are immutable.
		{name: "update completed", prep: completedSaga, m: exchange(2, waiting, 0), now: t0 + 2, code: conflict, field: "expected_revision"},
		{name: "revive completed with deadline", prep: completedSaga, m: exchange(2, waiting, deadline), now: t0 + 2, code: conflict, field: "expected_revision"},
		{name: "complete again", prep: completedSaga, m: exchange(2, completed, 0), now: t0 + 2, code: conflict, field: "expected_revision"},
		{name: "cancel completed", prep: completedSaga, m: exchange(2, cancelled, 0), now: t0 + 2, code: conflict, field: "expected_revision"},
		{name: "update cancelled", prep: cancelledSaga, m: exchange(2, waiting, 0), now: t0 + 2, code: conflict, field: "expected_revision"},
		{name: "complete cancelled", prep: cancelledSaga, m: exchange(2, completed, 0), now: t0 + 2, code: conflict, field: "expected_revision"},
		{name: "cancel again", prep: cancelledSaga, m: exchange(2, cancelled, 0), now: t0 + 2, code: conflict, field: "expected_revision"},
		{name: "revive timed out", prep: timedOutSaga, m: exchange(2, waiting, deadline+input.Second), now: deadline + 1, code: conflict, field: "expected_revision"},
		{name: "complete timed out", prep: timedOutSaga, m: exchange(2, completed, 0), now: deadline + 1, code: conflict, field: "expected_revision"},
		{name: "cancel timed out", prep: timedOutSaga, m: exchange(2, cancelled, 0), now: deadline + 1, code: conflict, field: "expected_revision"},
		{name: "old waiting revision of timed out", prep: timedOutSaga, m: exchange(1, completed, 0), now: deadline + 1, code: conflict, field: "expected_revision"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lim := input.DefaultLimits()
			if tc.limit != nil {
				tc.limit(&lim)
			}
			mem := prepare(t, lim, tc.prep...)
			now := tc.now
			if now == 0 {
				now = t0
			}
			before := mem.Clone()
			res, err := ApplyCompareExchange(mem, lim, otherCaller, tc.m, now)
			if res != nil {
				t.Errorf("result = %v, want nil with an error", res)
			}
			wantError(t, err, tc.code, tc.field)
			if !mem.Equal(before) {
				t.Fatal("a refused CompareExchangeSaga changed the store")
			}
		})
	}
}

// TestCompareExchangeApplies checks the successful transitions: revision, phase, creator,
// stored fields, and the exact due index after each.
func TestCompareExchangeApplies(t *testing.T) {
	t.Parallel()
	later := deadline + 5*input.Second
	cases := []struct {
		name      string
		prep      []step
		principal string
		m         *orreryv1.CompareExchangeSaga
		now       int64
		revision  uint64
		phase     orreryv1.SagaPhase
		dueAt     int64 // zero: the due index is empty
		check     func(t *testing.T, rec *orreryv1.SagaRecord)
	}{
		{name: "create without deadline", principal: creator, m: create(0), now: t0, revision: 1, phase: waiting},
		{name: "create with deadline", principal: creator, m: create(deadline), now: t0, revision: 1, phase: waiting, dueAt: deadline,
			check: func(t *testing.T, rec *orreryv1.SagaRecord) {
				if !proto.Equal(rec.GetTimeout(), timeoutWith(0)) || rec.GetDeadlineUnixMicros() != deadline {
					t.Errorf("timeout %v deadline %d, want %v %d", rec.GetTimeout(), rec.GetDeadlineUnixMicros(), timeoutWith(0), deadline)
				}
			}},
		{name: "create with deadline one microsecond ahead", principal: creator, m: create(t0 + 1), now: t0, revision: 1, phase: waiting, dueAt: t0 + 1},
		{name: "create with empty state", principal: creator, m: edit(create(0), func(m *orreryv1.CompareExchangeSaga) { m.StateJson = "" }), now: t0, revision: 1, phase: waiting},
		{name: "create with scalar state", principal: creator, m: edit(create(0), func(m *orreryv1.CompareExchangeSaga) { m.StateJson = `"x"` }), now: t0, revision: 1, phase: waiting},
		{name: "update keeps creator", prep: waitingNoDeadline, principal: otherCaller, m: exchange(1, waiting, 0), now: t0 + 1, revision: 2, phase: waiting},
		{name: "update adds deadline", prep: waitingNoDeadline, m: exchange(1, waiting, deadline), now: t0 + 1, revision: 2, phase: waiting, dueAt: deadline},
		{name: "update moves deadline", prep: waitingDeadline, m: exchange(1, waiting, later), now: t0 + 1, revision: 2, phase: waiting, dueAt: later},
		{name: "update keeps deadline", prep: waitingDeadline, m: exchange(1, waiting, deadline), now: t0 + 1, revision: 2, phase: waiting, dueAt: deadline},
		{name: "update removes deadline", prep: waitingDeadline, m: exchange(1, waiting, 0), now: t0 + 1, revision: 2, phase: waiting,
			check: func(t *testing.T, rec *orreryv1.SagaRecord) {
				if rec.GetTimeout() != nil || rec.GetDeadlineUnixMicros() != 0 {
					t.Errorf("timeout %v deadline %d, want both removed", rec.GetTimeout(), rec.GetDeadlineUnixMicros())
				}
			}},
		{name: "update after deadline passed", prep: waitingDeadline, m: exchange(1, waiting, later), now: deadline + 1, revision: 2, phase: waiting, dueAt: later},
		{name: "complete", prep: waitingDeadline, principal: otherCaller, m: exchange(1, completed, 0), now: t0 + 1, revision: 2, phase: completed},
		{name: "complete after deadline passed", prep: waitingDeadline, m: exchange(1, completed, 0), now: deadline + 1, revision: 2, phase: completed},
		{name: "cancel", prep: waitingDeadline, m: exchange(1, cancelled, 0), now: t0 + 1, revision: 2, phase: cancelled},
		{name: "complete after updates", prep: then(waitingDeadline, casStep(exchange(1, waiting, later), t0+1), casStep(exchange(2, waiting, later), t0+2)),
			m: exchange(3, completed, 0), now: t0 + 3, revision: 4, phase: completed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lim := input.DefaultLimits()
			mem := prepare(t, lim, tc.prep...)
			principal := tc.principal
			if principal == "" {
				principal = creator
			}
			res, err := ApplyCompareExchange(mem, lim, principal, tc.m, tc.now)
			if err != nil {
				t.Fatalf("ApplyCompareExchange: %v", err)
			}
			want := &orreryv1.SagaResult{Revision: tc.revision, Phase: tc.phase}
			if !proto.Equal(res, want) {
				t.Fatalf("result = %v, want %v", res, want)
			}
			rec := mustLoad(t, mem)
			if rec.GetRevision() != tc.revision || rec.GetPhase() != tc.phase || rec.GetCreator() != creator ||
				rec.GetStateJson() != tc.m.GetStateJson() || rec.GetSagaId() != sagaID || !proto.Equal(rec.GetLane(), sagaLane()) ||
				rec.GetTimeoutMessageId() != "" {
				t.Fatalf("stored %v, want revision %d phase %v creator %q state %q", rec, tc.revision, tc.phase, creator, tc.m.GetStateJson())
			}
			wantDue(t, mem, tc.dueAt, tc.revision)
			if tc.check != nil {
				tc.check(t, rec)
			}
			if msgs := messages(t, mem); len(msgs) != 0 {
				t.Fatalf("CompareExchangeSaga enqueued %v", msgs)
			}
		})
	}
}
