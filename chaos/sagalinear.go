package chaos

import (
	"fmt"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// sagaExpire is the due coordinator's ExpireSaga of one Waiting revision, which no client
// calls: the history infers it from the timeout message it enqueued, or from a read that found
// the saga TimedOut.
const sagaExpire sagaOpKind = "expire"

// sagaState is the model's state of one saga: its revision (0 while absent) and phase.
type sagaState struct {
	revision uint64
	phase    orreryv1.SagaPhase
}

// sagaInput is what an operation asked: its kind and, for a CAS or an expiry, the expected
// revision.
type sagaInput struct {
	kind     sagaOpKind
	expected uint64
}

// sagaOutput is what an operation got: its outcome, a failure's code, and an ok CAS's
// resulting (or an ok read's) revision and phase.
type sagaOutput struct {
	outcome  outcome
	code     orrery.Code
	revision uint64
	phase    orreryv1.SagaPhase
}

// targetPhase is the phase a CAS of kind asks for.
func targetPhase(kind sagaOpKind) orreryv1.SagaPhase {
	switch kind {
	case sagaComplete:
		return orreryv1.SagaPhase_SAGA_PHASE_COMPLETED
	case sagaCancel:
		return orreryv1.SagaPhase_SAGA_PHASE_CANCELLED
	default:
		return orreryv1.SagaPhase_SAGA_PHASE_WAITING
	}
}

// stepSaga is the saga state machine's rules (grains/saga: ApplyCompareExchange, ApplyExpire
// and their transition table) as a sequential specification: whether an operation with this
// output can take effect in state s, and the state after it.
//
//   - A CAS with expected revision 0 applies when the saga is absent and creates it Waiting at
//     revision 1; with expected revision r it applies when the saga is at r and Waiting, and
//     moves it to r+1 in the phase asked (Waiting, Completed or Cancelled). An ok CAS must have
//     applied and reports the new revision and phase. RevisionConflict means it could not
//     apply on an existing saga (another revision, or a terminal phase); NotFound means the
//     saga was absent and the CAS named a revision. Other failures (Validation of a deadline
//     already past, say) are refused before the revision is looked at: no change, no
//     constraint. An unknown outcome applies when it can and otherwise changes nothing: since
//     its interval never closes, "never applied" is the same as "applied after everything".
//   - A read reports the state as it is; NotFound means absent.
//   - An expiry of revision r applies only to a saga Waiting at r and makes it TimedOut at r+1.
func stepSaga(s sagaState, in sagaInput, out sagaOutput) (bool, sagaState) {
	waiting := orreryv1.SagaPhase_SAGA_PHASE_WAITING
	switch in.kind {
	case sagaRead:
		switch {
		case out.outcome == outcomeOK:
			return s == sagaState{out.revision, out.phase}, s
		case out.outcome == outcomeFailed && out.code == orrery.CodeNotFound:
			return s.revision == 0, s
		default:
			return true, s
		}
	case sagaExpire:
		return s.revision == in.expected && s.phase == waiting, sagaState{in.expected + 1, orreryv1.SagaPhase_SAGA_PHASE_TIMED_OUT}
	}
	applies := s.revision == 0
	if in.expected != 0 {
		applies = s.revision == in.expected && s.phase == waiting
	}
	next := sagaState{in.expected + 1, targetPhase(in.kind)}
	switch out.outcome {
	case outcomeOK:
		return applies && sagaState{out.revision, out.phase} == next, next
	case outcomeUnknown:
		if applies {
			return true, next
		}
		return true, s
	}
	switch out.code {
	case orrery.CodeRevisionConflict:
		return s.revision != 0 && !applies, s
	case orrery.CodeNotFound:
		return in.expected != 0 && s.revision == 0, s
	default:
		return true, s
	}
}

// sagaModel is stepSaga as a porcupine model of one saga.
var sagaModel = porcupine.Model{
	Init: func() any { return sagaState{} },
	Step: func(state, input, output any) (bool, any) {
		return stepSaga(state.(sagaState), input.(sagaInput), output.(sagaOutput))
	},
	DescribeOperation: func(input, output any) string {
		return describeSagaStep(input.(sagaInput), output.(sagaOutput))
	},
	DescribeState: func(state any) string {
		s := state.(sagaState)
		return fmt.Sprintf("revision %d %s", s.revision, phaseName(s.phase))
	},
}

// checkSagasLinearizable checks, saga by saga (sagas are independent: each is one record),
// that the history of its CAS calls, reads and expiries is linearizable against stepSaga,
// with porcupine, each saga within budget. A call's interval is [invocation, response] on
// the client's clock; an unknown outcome's never closes. An expiry is inferred for each
// Waiting revision a timeout message was delivered for, over [the saga's first invocation,
// the message's first receipt] (not from its deadline: the partition judges the deadline by
// its own logged time), and for each TimedOut read whose expiry no message showed, never
// closing.
func checkSagasLinearizable(h history, budget time.Duration) linearizabilityVerdict {
	return checkLinearizable("saga", sagaModel, sagaOperations(h), budget)
}

// sagaOperations turns a history's saga calls and timeout messages into porcupine operations
// by saga id, instants in nanoseconds since the history's first invocation (clientInstants). Reads whose
// outcome is unknown say nothing and are left out.
func sagaOperations(h history) map[string][]porcupine.Operation {
	if len(h.sagaOps) == 0 {
		return nil
	}
	base := h.sagaOps[0].call
	firstCall := map[string]time.Time{}
	for _, op := range h.sagaOps {
		base = earliest(base, op.call)
		if first, ok := firstCall[op.sagaID]; !ok || op.call.Before(first) {
			firstCall[op.sagaID] = op.call
		}
	}
	clock := clientInstants{base}
	at := clock.at
	out := map[string][]porcupine.Operation{}
	add := func(sagaID string, in sagaInput, outp sagaOutput, call, returned int64) {
		out[sagaID] = append(out[sagaID], porcupine.Operation{Input: in, Output: outp, Call: call, Return: max(call, returned)})
	}
	expired := map[string]map[uint64]bool{}
	for sagaID, revisions := range timeoutsByRevision(h.deliveries) {
		expired[sagaID] = map[uint64]bool{}
		for revision, messages := range revisions {
			received := messages[0].handledAt
			for _, d := range h.deliveries {
				if d.id == messages[0].id && d.handledAt.Before(received) {
					received = d.handledAt
				}
			}
			expired[sagaID][revision] = true
			add(sagaID, sagaInput{sagaExpire, revision}, sagaOutput{outcome: outcomeOK}, at(firstCall[sagaID]), at(received))
		}
	}
	for _, op := range h.sagaOps {
		if op.kind == sagaRead && op.outcome == outcomeUnknown {
			continue
		}
		returned := int64(neverReturned)
		if op.outcome != outcomeUnknown {
			returned = clock.returnedAt(op.call, op.returned)
		}
		add(op.sagaID, sagaInput{op.kind, op.expected}, sagaOutput{op.outcome, op.code, op.revision, op.phase}, at(op.call), returned)
		if op.kind == sagaRead && op.outcome == outcomeOK && op.phase == orreryv1.SagaPhase_SAGA_PHASE_TIMED_OUT && op.revision > 1 &&
			!expired[op.sagaID][op.revision-1] {
			if expired[op.sagaID] == nil {
				expired[op.sagaID] = map[uint64]bool{}
			}
			expired[op.sagaID][op.revision-1] = true
			add(op.sagaID, sagaInput{sagaExpire, op.revision - 1}, sagaOutput{outcome: outcomeOK}, at(firstCall[op.sagaID]), neverReturned)
		}
	}
	return out
}

// describeSagaStep renders one operation: "advance(expected 3) ok → revision 4 WAITING".
func describeSagaStep(in sagaInput, out sagaOutput) string {
	s := fmt.Sprintf("%s(expected %d) %s", in.kind, in.expected, out.outcome)
	if in.kind == sagaRead {
		s = fmt.Sprintf("read %s", out.outcome)
	}
	switch {
	case out.outcome == outcomeOK && in.kind != sagaExpire:
		s += fmt.Sprintf(" → revision %d %s", out.revision, phaseName(out.phase))
	case out.outcome == outcomeFailed:
		s += " " + strings.TrimPrefix(out.code.String(), "ERROR_CODE_")
	}
	return s
}

// phaseName is p without the enum prefix; the zero phase (an absent saga) reads ABSENT.
func phaseName(p orreryv1.SagaPhase) string {
	if p == orreryv1.SagaPhase_SAGA_PHASE_UNSPECIFIED {
		return "ABSENT"
	}
	return strings.TrimPrefix(p.String(), "SAGA_PHASE_")
}
