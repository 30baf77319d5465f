package chaos

import (
	"slices"
	"sync"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// sagaOpKind names what a recorded saga operation asked.
type sagaOpKind string

const (
	// sagaStart is CompareExchangeSaga with expected revision 0, to Waiting with a deadline.
	sagaStart sagaOpKind = "start"
	// sagaAdvance is CompareExchangeSaga on the expected revision, staying Waiting with a new
	// deadline.
	sagaAdvance sagaOpKind = "advance"
	// sagaComplete and sagaCancel are CompareExchangeSaga on the expected revision to Completed
	// or Cancelled: the client ends the saga.
	sagaComplete sagaOpKind = "complete"
	sagaCancel   sagaOpKind = "cancel"
	// sagaRead is InspectSaga.
	sagaRead sagaOpKind = "read"
)

// outcome is what a client learned of a call.
type outcome string

const (
	// outcomeOK: the call returned success.
	outcomeOK outcome = "ok"
	// outcomeFailed: the partition answered with an error (a receipt whose mutation failed, or
	// a read that found nothing): the call was not applied.
	outcomeFailed outcome = "failed"
	// outcomeUnknown: the call errored or timed out without an answer from the partition; it
	// may or may not have been applied, then or later.
	outcomeUnknown outcome = "unknown"
)

// sagaOp is one saga call of a workload, with its invocation and response instants on the
// client's clock.
type sagaOp struct {
	sagaID string
	key    string // lane key
	kind   sagaOpKind
	// expected is a CAS's expected revision (0 for a start); deadline the Waiting deadline a
	// start or an advance asked for.
	expected uint64
	deadline time.Time
	call     time.Time
	// returned is when the answer came; zero for an unknown outcome, which may take effect at
	// any instant after call.
	returned time.Time
	outcome  outcome
	// code is a failed call's error code; err any error's text.
	code orrery.Code
	err  string
	// revision and phase: an ok CAS's result, an ok read's record. record is an ok read's
	// whole record (deadline, timeout message id).
	revision uint64
	phase    orreryv1.SagaPhase
	record   *orreryv1.SagaRecord
	// final marks the read of every saga after healing.
	final bool
}

// ends reports whether the op asks to end the saga (complete or cancel).
func (op sagaOp) ends() bool { return op.kind == sagaComplete || op.kind == sagaCancel }

// receiptReplay is a command sent again under its command id, with the same request, and the
// receipts of both sends: the partition's command inbox must answer the second with the bytes
// of the first.
type receiptReplay struct {
	commandID string
	what      string // which call, for the report
	first     []byte
	// again is the replay's receipt; nil when the replay got no receipt (againCode then says
	// why: IdempotencyConflict means the partition took the same request for another, anything
	// else left the replay unanswered).
	again     []byte
	againCode orrery.Code
	againErr  string
}

// sagaLog records a workload's saga operations and replays, from several goroutines.
type sagaLog struct {
	mu      sync.Mutex
	ops     []sagaOp
	replays []receiptReplay
}

// add records one saga operation.
func (l *sagaLog) add(op sagaOp) {
	l.mu.Lock()
	l.ops = append(l.ops, op)
	l.mu.Unlock()
}

// addReplay records one replayed command.
func (l *sagaLog) addReplay(r receiptReplay) {
	l.mu.Lock()
	l.replays = append(l.replays, r)
	l.mu.Unlock()
}

// snapshot copies what was recorded so far.
func (l *sagaLog) snapshot() ([]sagaOp, []receiptReplay) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ops), slices.Clone(l.replays)
}
