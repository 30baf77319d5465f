package chaos

import (
	"slices"
	"sync"
	"time"

	"github.com/orreryhq/orrery"
)

// scheduleOpKind names what a recorded schedule operation asked.
type scheduleOpKind string

const (
	// scheduleCreate is ConfigureSchedule with expected revision 0: create the absent
	// schedule, at revision 1.
	scheduleCreate scheduleOpKind = "create"
	// schedulePause, scheduleResume and scheduleCancel are PauseSchedule, ResumeSchedule and
	// CancelSchedule at an expected revision (never any_revision).
	schedulePause  scheduleOpKind = "pause"
	scheduleResume scheduleOpKind = "resume"
	scheduleCancel scheduleOpKind = "cancel"
	// scheduleReplace is ConfigureSchedule at an expected revision: a new definition, a new
	// generation, at the next revision.
	scheduleReplace scheduleOpKind = "replace"
	// scheduleRead is InspectSchedule.
	scheduleRead scheduleOpKind = "read"
)

// scheduleOp is one schedule call of a workload whose outcome depends on, or reports, the
// schedule's revision, with its invocation and response instants on the client's clock.
type scheduleOp struct {
	scheduleID string
	key        string // lane key
	kind       scheduleOpKind
	// expected is a compare-and-set's expected revision (0 for a create).
	expected uint64
	call     time.Time
	// returned is when the answer came; zero for an unknown outcome, which may take effect at
	// any instant after call.
	returned time.Time
	outcome  outcome
	// code is a failed call's error code; err any error's text.
	code orrery.Code
	err  string
	// revision is an ok compare-and-set's resulting revision, or an ok read's; paused and
	// cancelled an ok read's record's.
	revision          uint64
	paused, cancelled bool
}

// classifyCall is what a client learned of a call that returned err, answered saying whether
// the partition answered (a receipt, or a read's not-found): no error is ok; an error the
// partition answered with is failed (nothing was applied); any other error is unknown (the
// command may have been applied, or may yet be), with no response instant.
func classifyCall(err error, answered bool) (o outcome, returned time.Time, code orrery.Code, text string) {
	switch {
	case err == nil:
		return outcomeOK, time.Now(), 0, ""
	case answered:
		return outcomeFailed, time.Now(), orrery.CodeOf(err), err.Error()
	default:
		return outcomeUnknown, time.Time{}, orrery.CodeOf(err), err.Error()
	}
}

// classify sets the op's outcome from the call's error and whether the partition answered
// (classifyCall).
func (op *scheduleOp) classify(err error, answered bool) {
	op.outcome, op.returned, op.code, op.err = classifyCall(err, answered)
}

// scheduleLog records a workload's schedule operations, from several goroutines.
type scheduleLog struct {
	mu  sync.Mutex
	ops []scheduleOp
}

// add records one schedule operation.
func (l *scheduleLog) add(op scheduleOp) {
	l.mu.Lock()
	l.ops = append(l.ops, op)
	l.mu.Unlock()
}

// snapshot copies what was recorded so far.
func (l *scheduleLog) snapshot() []scheduleOp {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ops)
}
