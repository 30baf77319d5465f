package chaos

import (
	"fmt"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/orreryhq/orrery"
)

// scheduleInput is what a schedule operation asked: its kind and, for a compare-and-set, the
// expected revision.
type scheduleInput struct {
	kind     scheduleOpKind
	expected uint64
}

// scheduleOutput is what a schedule operation got: its outcome, a failure's code, and an ok
// compare-and-set's resulting (or an ok read's) revision.
type scheduleOutput struct {
	outcome  outcome
	code     orrery.Code
	revision uint64
}

// stepScheduleRevision is one schedule's revision register (grains/schedule) as a sequential
// specification, over its least possible revision: whether an operation with this output can
// take effect while the schedule's revision is at least least (0: the schedule may be absent,
// and then is), and the least revision after it.
//
// The register is not the client's alone: every command that changes the record increments
// its revision, and the partition's own commands (an emit that passes ordinals, the release
// of an overlap slot, an expired or failed occurrence) are in no client's history. So the
// register is monotone with unobserved increments: between any two operations the revision of
// an existing schedule may have grown by any amount, never shrunk (an id is never configured
// again once deleted, and the workload deletes none). A state that stood for one exact
// revision would need those increments counted, which the deliveries cannot do (one emit
// passes several ordinals, or none with a message); least stands for every revision at or
// above it, which is exactly the set the increments reach, so the model is deterministic and
// loses nothing but what the unobserved increments hide:
//
//   - An ok read returns the revision as it is: at least least; afterwards the revision is at
//     least what it returned. NotFound means absent.
//   - A create (expected revision 0) applies only to an absent schedule and returns revision 1;
//     RevisionConflict means the schedule existed.
//   - A pause, resume or cancel at expected revision r checks the revision before anything
//     else (loadForAction): an ok one was applied at exactly r (so r ≥ least) and returns r+1,
//     or r for a cancel of a cancelled schedule, which changes nothing; Suspended (pausing a
//     paused schedule, resuming one that is not paused, either on a cancelled one) was refused
//     at exactly r; RevisionConflict at a revision other than r, which rules r out only when r
//     was the least possible (the revision then was above it); NotFound means absent.
//   - Other failures (a refused command, Validation) are refused before the revision is
//     looked at: no change, no constraint.
//   - An unknown outcome may have been applied then, or later, or never. A create applies
//     when the schedule is absent (unapplied is the same as applied after everything: its
//     interval never closes). Any other compare-and-set that applied moved the revision from
//     r to r+1, an increment the register allows at any time anyway: no change.
func stepScheduleRevision(least uint64, in scheduleInput, out scheduleOutput) (bool, uint64) {
	exists := least != 0
	switch in.kind {
	case scheduleRead:
		switch {
		case out.outcome == outcomeOK:
			return exists && out.revision >= least, out.revision
		case out.outcome == outcomeFailed && out.code == orrery.CodeNotFound:
			return !exists, least
		default:
			return true, least
		}
	case scheduleCreate:
		switch {
		case out.outcome == outcomeOK:
			return !exists && out.revision == 1, 1
		case out.outcome == outcomeUnknown && !exists:
			return true, 1
		case out.outcome == outcomeFailed && out.code == orrery.CodeRevisionConflict:
			return exists, least
		default:
			return true, least
		}
	}
	atExpected := exists && in.expected >= least
	switch out.outcome {
	case outcomeOK:
		next := out.revision == in.expected+1 || in.kind == scheduleCancel && out.revision == in.expected
		return atExpected && next, out.revision
	case outcomeUnknown:
		return true, least
	}
	switch out.code {
	case orrery.CodeRevisionConflict:
		if exists && least == in.expected {
			return true, least + 1
		}
		return exists, least
	case orrery.CodeSuspended:
		return atExpected, in.expected
	case orrery.CodeNotFound:
		return !exists, least
	default:
		return true, least
	}
}

// scheduleModel is stepScheduleRevision as a porcupine model of one schedule.
var scheduleModel = porcupine.Model{
	Init: func() any { return uint64(0) },
	Step: func(state, input, output any) (bool, any) {
		return stepScheduleRevision(state.(uint64), input.(scheduleInput), output.(scheduleOutput))
	},
	DescribeOperation: func(input, output any) string {
		return describeScheduleStep(input.(scheduleInput), output.(scheduleOutput))
	},
	DescribeState: func(state any) string {
		if state.(uint64) == 0 {
			return "absent"
		}
		return fmt.Sprintf("revision ≥ %d", state.(uint64))
	},
}

// checkSchedulesLinearizable checks, schedule by schedule (each is one record), that the
// history of its compare-and-sets and reads is linearizable against stepScheduleRevision,
// with porcupine, each schedule within budget. A call's interval is [invocation, response]
// on the client's clock; an unknown outcome's never closes.
func checkSchedulesLinearizable(h history, budget time.Duration) linearizabilityVerdict {
	return checkLinearizable("schedule", scheduleModel, scheduleOperations(h), budget)
}

// scheduleOperations turns a history's schedule calls into porcupine operations by schedule
// id, instants in nanoseconds since the history's first invocation (clientInstants). Reads
// whose outcome is unknown say nothing and are left out.
func scheduleOperations(h history) map[string][]porcupine.Operation {
	if len(h.scheduleOps) == 0 {
		return nil
	}
	base := h.scheduleOps[0].call
	for _, op := range h.scheduleOps {
		base = earliest(base, op.call)
	}
	clock := clientInstants{base}
	out := map[string][]porcupine.Operation{}
	for _, op := range h.scheduleOps {
		if op.kind == scheduleRead && op.outcome == outcomeUnknown {
			continue
		}
		returned := int64(neverReturned)
		if op.outcome != outcomeUnknown {
			returned = clock.returnedAt(op.call, op.returned)
		}
		out[op.scheduleID] = append(out[op.scheduleID], porcupine.Operation{Input: scheduleInput{op.kind, op.expected},
			Output: scheduleOutput{op.outcome, op.code, op.revision}, Call: clock.at(op.call), Return: returned})
	}
	return out
}

// describeScheduleStep renders one operation: "pause(expected 3) ok → revision 4".
func describeScheduleStep(in scheduleInput, out scheduleOutput) string {
	s := fmt.Sprintf("%s(expected %d) %s", in.kind, in.expected, out.outcome)
	if in.kind == scheduleRead {
		s = fmt.Sprintf("read %s", out.outcome)
	}
	switch out.outcome {
	case outcomeOK:
		s += fmt.Sprintf(" → revision %d", out.revision)
	case outcomeFailed:
		s += " " + strings.TrimPrefix(out.code.String(), "ERROR_CODE_")
	}
	return s
}
