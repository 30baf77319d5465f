package saga

import (
	"fmt"
	"strings"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// Phase names, short for the table below.
const (
	absent    = orreryv1.SagaPhase_SAGA_PHASE_UNSPECIFIED // the saga does not exist yet
	waiting   = orreryv1.SagaPhase_SAGA_PHASE_WAITING
	completed = orreryv1.SagaPhase_SAGA_PHASE_COMPLETED
	cancelled = orreryv1.SagaPhase_SAGA_PHASE_CANCELLED
	timedOut  = orreryv1.SagaPhase_SAGA_PHASE_TIMED_OUT
)

// operation names what asks a saga to change phase.
type operation uint8

const (
	// opCreate is CompareExchangeSaga with expected revision 0.
	opCreate operation = iota + 1
	// opExchange is CompareExchangeSaga on an existing saga.
	opExchange
	// opExpire is ExpireSaga.
	opExpire
)

func (op operation) String() string {
	switch op {
	case opCreate:
		return "CompareExchangeSaga (create)"
	case opExchange:
		return "CompareExchangeSaga"
	case opExpire:
		return "ExpireSaga"
	default:
		return fmt.Sprintf("operation(%d)", uint8(op))
	}
}

// transition is one allowed phase change.
type transition struct {
	op       operation
	from, to orreryv1.SagaPhase
}

// transitions is the complete table of allowed phase changes (docs/design.md §4 "Sagas"). Anything not
// listed is refused with invalidTransition. There is no row out of a terminal phase, and no
// CompareExchangeSaga row into TimedOut: only ExpireSaga writes it.
var transitions = [...]transition{
	{opCreate, absent, waiting},
	{opExchange, waiting, waiting},
	{opExchange, waiting, completed},
	{opExchange, waiting, cancelled},
	{opExpire, waiting, timedOut},
}

// allowed reports whether the table lists op moving a saga from one phase to another.
func allowed(op operation, from, to orreryv1.SagaPhase) bool {
	for _, t := range transitions {
		if t == (transition{op, from, to}) {
			return true
		}
	}
	return false
}

// checkTransition returns nil when the table allows the change and invalidTransition otherwise.
func checkTransition(op operation, from, to orreryv1.SagaPhase) error {
	if allowed(op, from, to) {
		return nil
	}
	return invalidTransition(op, from, to)
}

// invalidTransition is the one error for a phase change the table does not allow. Its code
// says whose fault it is: a terminal saga is a conflict with the stored state
// (RevisionConflict: it cannot be revived, overwritten or expired); a stored phase this code
// does not know is a corrupt record (Internal); anything else is a request the rules forbid
// whatever the state (Validation on "phase").
func invalidTransition(op operation, from, to orreryv1.SagaPhase) *orrery.Error {
	switch {
	case terminal(from):
		return orrery.FieldErrorf(orrery.CodeRevisionConflict, "expected_revision",
			"saga is %s, a terminal phase: %s cannot move it to %s; a terminal saga is never revived, overwritten or expired",
			phaseName(from), op, phaseName(to))
	case op != opCreate && !known(from):
		return orrery.Errorf(orrery.CodeInternal, "stored saga has unknown phase %s", phaseName(from))
	default:
		return orrery.Invalid("phase", "%s cannot move a saga from %s to %s: %s",
			op, phaseName(from), phaseName(to), allowedFrom(op, from))
	}
}

// allowedFrom describes the table's rows for op out of from, for error messages.
func allowedFrom(op operation, from orreryv1.SagaPhase) string {
	var targets []string
	for _, t := range transitions {
		if t.op == op && t.from == from {
			targets = append(targets, phaseName(t.to))
		}
	}
	if len(targets) == 0 {
		return "it allows no phase change from there"
	}
	s := "it allows only " + strings.Join(targets, ", ")
	if op == opCreate || op == opExchange {
		s += " (TIMED_OUT is written only by ExpireSaga)"
	}
	return s
}

// known reports whether p is a phase a saga can be in.
func known(p orreryv1.SagaPhase) bool {
	switch p {
	case waiting, completed, cancelled, timedOut:
		return true
	default:
		return false
	}
}

// terminal reports whether p is a phase a saga never leaves.
func terminal(p orreryv1.SagaPhase) bool {
	switch p {
	case completed, cancelled, timedOut:
		return true
	default:
		return false
	}
}

// phaseName is p without the enum prefix ("WAITING"); absent reads "ABSENT".
func phaseName(p orreryv1.SagaPhase) string {
	if p == absent {
		return "ABSENT"
	}
	return strings.TrimPrefix(p.String(), "SAGA_PHASE_")
}
