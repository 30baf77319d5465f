package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/saga"
)

// Saga ids of sagaFixture.
const (
	sagaCompleted = "00000000-0000-4000-8000-00000000000a" // advanced, then completed by the client
	sagaRaced     = "00000000-0000-4000-8000-00000000000b" // two advances raced, then it timed out before the client's complete
	sagaNeverSeen = "00000000-0000-4000-8000-00000000000c" // a start with an unknown outcome that never applied
	sagaUnknown   = "00000000-0000-4000-8000-00000000000d" // an advance with an unknown outcome that applied, then cancelled
)

// Phases, short.
const (
	phaseWaiting   = orreryv1.SagaPhase_SAGA_PHASE_WAITING
	phaseCompleted = orreryv1.SagaPhase_SAGA_PHASE_COMPLETED
	phaseCancelled = orreryv1.SagaPhase_SAGA_PHASE_CANCELLED
	phaseTimedOut  = orreryv1.SagaPhase_SAGA_PHASE_TIMED_OUT
)

// sagaFixture is a hand-made clean saga history: four sagas (see their ids), the timeout
// message of sagaRaced's revision 2 (delivered twice: a redelivery), the final reads after
// healing, and three replays (two answered with the first receipt, one unanswered).
type sagaFixture struct {
	zero time.Time
	h    history
}

// at is ms milliseconds after the fixture's zero.
func (f *sagaFixture) at(ms int) time.Time { return f.zero.Add(time.Duration(ms) * time.Millisecond) }

// op is a saga call that returned: its interval in ms, its outcome and result.
func (f *sagaFixture) op(sagaID string, kind sagaOpKind, expected uint64, callMS, returnMS int, out outcome, revision uint64, phase orreryv1.SagaPhase) sagaOp {
	op := sagaOp{sagaID: sagaID, key: "k-" + sagaID, kind: kind, expected: expected, call: f.at(callMS), returned: f.at(returnMS),
		outcome: out, revision: revision, phase: phase}
	if out == outcomeUnknown {
		op.returned = time.Time{}
	}
	return op
}

// failed is a saga call the partition refused with code.
func (f *sagaFixture) failed(sagaID string, kind sagaOpKind, expected uint64, callMS, returnMS int, code orrery.Code) sagaOp {
	op := f.op(sagaID, kind, expected, callMS, returnMS, outcomeFailed, 0, 0)
	op.code = code
	return op
}

// finalRead is the read after healing of a saga found at revision in phase, with deadline
// (ms) and the timeout message id of a TimedOut saga.
func (f *sagaFixture) finalRead(sagaID string, callMS int, revision uint64, phase orreryv1.SagaPhase, deadlineMS int) sagaOp {
	op := f.op(sagaID, sagaRead, 0, callMS, callMS+5, outcomeOK, revision, phase)
	op.final = true
	op.record = &orreryv1.SagaRecord{SagaId: sagaID, Revision: revision, Phase: phase, DeadlineUnixMicros: f.at(deadlineMS).UnixMicro()}
	if phase == phaseTimedOut {
		op.record.TimeoutMessageId = saga.TimeoutMessageID(sagaID, revision-1)
	}
	return op
}

// timeout is a delivery of the timeout message of sagaID's Waiting revision, due at
// deadlineMS, enqueued at enqueuedMS, received at receivedMS with delivery count.
func (f *sagaFixture) timeout(sagaID string, revision uint64, deadlineMS, enqueuedMS, receivedMS int, count uint32) delivery {
	return delivery{id: saga.TimeoutMessageID(sagaID, revision), key: "k-" + sagaID, origin: client.OriginSagaTimeout,
		enqueuedAt: f.at(enqueuedMS), count: count, handledAt: f.at(receivedMS),
		timeoutOf: &orreryv1.SagaTimeoutOrigin{SagaId: sagaID, WaitingRevision: revision, DeadlineUnixMicros: f.at(deadlineMS).UnixMicro()}}
}

func newSagaFixture() *sagaFixture {
	f := &sagaFixture{zero: time.Unix(1_700_000_000, 0)}
	f.h = history{recoveryBound: 20 * time.Second, end: f.at(60_000)}
	f.h.sagaOps = []sagaOp{
		f.op(sagaCompleted, sagaStart, 0, 0, 10, outcomeOK, 1, phaseWaiting),
		f.op(sagaCompleted, sagaAdvance, 1, 100, 110, outcomeOK, 2, phaseWaiting),
		f.op(sagaCompleted, sagaRead, 0, 120, 130, outcomeOK, 2, phaseWaiting),
		f.op(sagaCompleted, sagaComplete, 2, 200, 210, outcomeOK, 3, phaseCompleted),
		f.op(sagaCompleted, sagaRead, 0, 220, 230, outcomeUnknown, 0, 0), // unanswered: says nothing

		f.op(sagaRaced, sagaStart, 0, 0, 10, outcomeOK, 1, phaseWaiting),
		f.op(sagaRaced, sagaAdvance, 1, 100, 150, outcomeOK, 2, phaseWaiting),
		f.failed(sagaRaced, sagaAdvance, 1, 100, 140, orrery.CodeRevisionConflict),      // lost the race
		f.failed(sagaRaced, sagaComplete, 2, 4_900, 5_100, orrery.CodeRevisionConflict), // the coordinator expired it first

		f.op(sagaNeverSeen, sagaStart, 0, 0, 0, outcomeUnknown, 0, 0),

		f.op(sagaUnknown, sagaStart, 0, 0, 10, outcomeOK, 1, phaseWaiting),
		f.op(sagaUnknown, sagaAdvance, 1, 100, 0, outcomeUnknown, 0, 0),
		f.op(sagaUnknown, sagaRead, 0, 6_000, 6_010, outcomeOK, 2, phaseWaiting), // the unknown advance applied
		f.op(sagaUnknown, sagaCancel, 2, 6_100, 6_110, outcomeOK, 3, phaseCancelled),

		f.finalRead(sagaCompleted, 50_000, 3, phaseCompleted, 0),
		f.finalRead(sagaRaced, 50_000, 3, phaseTimedOut, 4_800),
		f.failed(sagaNeverSeen, sagaRead, 0, 50_000, 50_005, orrery.CodeNotFound),
		f.finalRead(sagaUnknown, 50_000, 3, phaseCancelled, 0),
	}
	f.h.sagaOps[16].final = true
	f.h.deliveries = []delivery{
		f.timeout(sagaRaced, 2, 4_800, 4_850, 4_900, 1),
		f.timeout(sagaRaced, 2, 4_800, 4_850, 7_000, 2), // released and delivered again
	}
	f.h.replays = []receiptReplay{
		{commandID: "c1", what: "advance", first: []byte{1, 2, 3}, again: []byte{1, 2, 3}},
		{commandID: "c2", what: "complete", first: []byte{4, 5}, again: []byte{4, 5}},
		{commandID: "c3", what: "start", first: []byte{6}, againCode: orrery.CodeUnavailable, againErr: "unavailable"},
	}
	return f
}

// TestSagaCheckersPassACleanHistory: a race of two advances (one lost), a timeout that beat
// the client's complete (delivered twice), unknown outcomes that applied and that never did,
// and replays answered with the first receipt or not at all: no violation of any saga
// checker.
func TestSagaCheckersPassACleanHistory(t *testing.T) {
	f := newSagaFixture()
	v := checkSagaTimeouts(f.h)
	if v.violations() > 0 || len(v.problems) > 0 {
		t.Errorf("checkSagaTimeouts: %d violations: %q", v.violations(), v.problems)
	}
	if v.sagas != 4 || v.timeouts != 1 {
		t.Errorf("checkSagaTimeouts counted %d sagas and %d timeouts; want 4 and 1", v.sagas, v.timeouts)
	}
	lv := checkSagasLinearizable(f.h, 10*time.Second)
	if !lv.linearizable() {
		t.Errorf("checkSagasLinearizable: illegal %q, undecided %q", lv.illegal, lv.undecided)
	}
	if lv.histories != 4 || lv.operations != 18 { // 17 calls with an answer or a possible effect, 1 inferred expiry
		t.Errorf("checkSagasLinearizable checked %d sagas, %d operations; want 4 and 18", lv.histories, lv.operations)
	}
	rv := checkReceipts(f.h.replays)
	if rv.mismatches != 0 || rv.replays != 3 || rv.compared != 2 {
		t.Errorf("checkReceipts: %d mismatches, %d replays, %d compared; want 0, 3, 2: %q", rv.mismatches, rv.replays, rv.compared, rv.problems)
	}
}

// TestCheckSagaTimeoutsFindsEachViolation: each hand-made violation of the saga contract is
// counted under its kind and described.
func TestCheckSagaTimeoutsFindsEachViolation(t *testing.T) {
	for _, tc := range []struct {
		name                string
		change              func(f *sagaFixture)
		double, lost, early int
		want                string
	}{
		{"a Waiting revision enqueued its timeout twice", func(f *sagaFixture) {
			f.h.deliveries = append(f.h.deliveries, f.timeout(sagaRaced, 2, 4_800, 5_300, 5_400, 1))
		}, 1, 0, 0, "Waiting revision 2 produced 2 timeout messages"},
		{"a saga timed out at two revisions", func(f *sagaFixture) {
			f.h.deliveries = append(f.h.deliveries, f.timeout(sagaRaced, 1, 4_000, 4_100, 4_200, 1))
		}, 1, 0, 0, "timed out at Waiting revisions [1 2]"},
		{"a saga the client completed timed out after the complete was acknowledged", func(f *sagaFixture) {
			f.h.deliveries = append(f.h.deliveries, f.timeout(sagaCompleted, 2, 250, 300, 310, 1))
		}, 1, 0, 0, "ended by the client (complete of revision 2"},
		{"a saga the client cancelled had timed out before", func(f *sagaFixture) {
			f.h.deliveries = append(f.h.deliveries, f.timeout(sagaUnknown, 1, 3_000, 3_050, 3_100, 1))
		}, 1, 0, 0, "ended by the client (cancel of revision 2"},
		{"a timeout enqueued before its deadline", func(f *sagaFixture) {
			f.h.deliveries[0].enqueuedAt, f.h.deliveries[1].enqueuedAt = f.at(4_700), f.at(4_700)
		}, 0, 0, 1, "before its deadline"},
		{"a TimedOut saga whose timeout never came", func(f *sagaFixture) {
			f.h.deliveries = nil
		}, 0, 1, 0, "was never delivered"},
		{"a saga left Waiting long after its deadline", func(f *sagaFixture) {
			f.h.sagaOps[17] = f.finalRead(sagaUnknown, 50_000, 2, phaseWaiting, 7_000)
		}, 0, 1, 0, "still Waiting at revision 2 after healing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSagaFixture()
			tc.change(f)
			v := checkSagaTimeouts(f.h)
			if v.doubleTimeouts != tc.double || v.lost != tc.lost || v.early != tc.early {
				t.Errorf("double timeouts %d, lost %d, early %d; want %d, %d, %d: %q", v.doubleTimeouts, v.lost, v.early, tc.double, tc.lost, tc.early, v.problems)
			}
			if !strings.Contains(strings.Join(v.problems, "\n"), tc.want) {
				t.Errorf("no problem says %q: %q", tc.want, v.problems)
			}
		})
	}
}

// TestCheckSagasLinearizableFindsEachViolation: a stale read, a double win of one revision, a
// refused CAS the state allowed, an unknown outcome read as applied before it was sent, and an
// expiry of a revision the client had completed are each not linearizable, and only the saga
// concerned is named.
func TestCheckSagasLinearizableFindsEachViolation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		saga   string
		change func(f *sagaFixture)
	}{
		{"a read after the complete returned sees the revision before it", sagaCompleted, func(f *sagaFixture) {
			f.h.sagaOps = append(f.h.sagaOps, f.op(sagaCompleted, sagaRead, 0, 300, 310, outcomeOK, 2, phaseWaiting))
		}},
		{"two advances from one revision both won", sagaRaced, func(f *sagaFixture) {
			f.h.sagaOps[7] = f.op(sagaRaced, sagaAdvance, 1, 100, 140, outcomeOK, 2, phaseWaiting)
		}},
		{"a CAS refused on the revision it named while Waiting", sagaCompleted, func(f *sagaFixture) {
			f.h.sagaOps = append(f.h.sagaOps, f.failed(sagaCompleted, sagaAdvance, 1, 20, 30, orrery.CodeRevisionConflict))
		}},
		{"an unknown advance seen applied before it was sent", sagaUnknown, func(f *sagaFixture) {
			f.h.sagaOps[11].call = f.at(6_050)
		}},
		{"the coordinator expired a revision the client had completed", sagaCompleted, func(f *sagaFixture) {
			f.h.deliveries = append(f.h.deliveries, f.timeout(sagaCompleted, 2, 250, 300, 310, 1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSagaFixture()
			tc.change(f)
			v := checkSagasLinearizable(f.h, 10*time.Second)
			if v.linearizable() || len(v.illegal) != 1 || !strings.HasPrefix(v.illegal[0], "saga "+tc.saga) {
				t.Errorf("illegal %q, undecided %q; want saga %s alone illegal", v.illegal, v.undecided, tc.saga)
			}
		})
	}
}

// TestCheckReceiptsFindsAMismatch: a replay answered with other bytes, and one refused as
// IdempotencyConflict although the request was the same, are each a mismatch.
func TestCheckReceiptsFindsAMismatch(t *testing.T) {
	replays := newSagaFixture().h.replays
	replays[0].again = []byte{1, 2, 4}
	replays = append(replays, receiptReplay{commandID: "c4", what: "cancel", first: []byte{7}, againCode: orrery.CodeIdempotencyConflict, againErr: "conflict"})
	v := checkReceipts(replays)
	if v.mismatches != 2 || v.compared != 3 {
		t.Fatalf("%d mismatches of %d compared, want 2 of 3: %q", v.mismatches, v.compared, v.problems)
	}
	if !strings.Contains(v.problems[0], "command c1") || !strings.Contains(v.problems[1], "command c4 (cancel) replayed with the same request: IdempotencyConflict") {
		t.Errorf("problems %q", v.problems)
	}
}
