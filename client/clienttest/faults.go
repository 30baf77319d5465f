package clienttest

import (
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// Fault is what the twin does to one command call.
type Fault int

const (
	// FaultNone delivers the call normally.
	FaultNone Fault = iota
	// FaultFailBeforeApply fails the call without applying it.
	FaultFailBeforeApply
	// FaultLoseReply applies the call, then fails it as if the reply was lost.
	FaultLoseReply
)

// String names the fault.
func (f Fault) String() string {
	switch f {
	case FaultNone:
		return "none"
	case FaultFailBeforeApply:
		return "fail-before-apply"
	case FaultLoseReply:
		return "lose-reply"
	default:
		return "fault?"
	}
}

// FaultHook chooses the fault of a command call that FailNext and LoseNextReplies left alone.
// A nil error with a fault means the default Unavailable error; a non-nil error is returned
// as the transport error (a plain error tests how the client classifies foreign failures).
type FaultHook func(partition int, req *orreryv1.CommandRequest) (Fault, error)

// FailNext makes the next n calls (Command or Inspect) fail with Unavailable before they
// reach the partition.
func (t *Transport) FailNext(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failNext = n
}

// LoseNextReplies makes the next n command calls apply, then fail with Unavailable as if the
// reply was lost. FailNext takes precedence while both are pending.
func (t *Transport) LoseNextReplies(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.loseNext = n
}

// SetFaultHook installs h (nil removes it).
func (t *Transport) SetFaultHook(h FaultHook) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hook = h
}

// nextFault consumes the fault of the next call and returns it with its error. Inspections
// (req nil) only take FailNext faults.
func (t *Transport) nextFault(p int, req *orreryv1.CommandRequest) (Fault, error) {
	t.mu.Lock()
	fault := FaultNone
	var hook FaultHook
	switch {
	case t.failNext > 0:
		t.failNext--
		fault = FaultFailBeforeApply
	case req == nil:
	case t.loseNext > 0:
		t.loseNext--
		fault = FaultLoseReply
	default:
		hook = t.hook
	}
	t.mu.Unlock()
	var err error
	if hook != nil {
		fault, err = hook(p, req)
	}
	if fault != FaultNone && err == nil {
		err = orrery.Errorf(orrery.CodeUnavailable, "clienttest: injected %s on partition %d", fault, p)
	}
	return fault, err
}

// CallKind says which Transport method a Call was.
type CallKind int

const (
	// CallCommand is a Command call.
	CallCommand CallKind = iota + 1
	// CallInspect is an Inspect call.
	CallInspect
)

// Call records one Transport call (Transport.EmitDue makes none).
type Call struct {
	// Kind is the method called, and Partition the partition it addressed.
	Kind      CallKind
	Partition int
	// Request is a copy of the command request (nil for inspections). Do not modify it.
	Request *orreryv1.CommandRequest
	// Start is when the call began.
	Start time.Time
	// Done is false while the call is in flight; the fields below are set when it ends.
	Done bool
	// End is when the call returned.
	End time.Time
	// Fault is the fault injected into the call (FaultNone: none).
	Fault Fault
	// Receipt holds the receipt bytes the partition produced, also when the reply was lost.
	Receipt []byte
	// Err is the error the call returned (nil when it returned a reply).
	Err error
}

// CommandID is the call's command id ("" for inspections).
func (c Call) CommandID() string { return c.Request.GetBatch().GetCommandId() }

// IsReceive reports whether the call is a batch whose only mutation is a Receive.
func (c Call) IsReceive() bool {
	ms := c.Request.GetBatch().GetMutations()
	return len(ms) == 1 && ms[0].GetReceive() != nil
}

// Calls returns a copy of every call so far, in the order they started.
func (t *Transport) Calls() []Call {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Call, len(t.calls))
	for i, c := range t.calls {
		out[i] = *c
		out[i].Receipt = slices.Clone(c.Receipt)
	}
	return out
}

// CommandCalls counts command calls so far, whatever their outcome.
func (t *Transport) CommandCalls() int {
	n := 0
	for _, c := range t.Calls() {
		if c.Kind == CallCommand {
			n++
		}
	}
	return n
}

// ResetCalls forgets the recorded calls.
func (t *Transport) ResetCalls() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls = nil
}

func (t *Transport) begin(kind CallKind, p int, req *orreryv1.CommandRequest) *Call {
	c := &Call{Kind: kind, Partition: p, Start: time.Now()}
	if req != nil {
		c.Request = proto.CloneOf(req)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls = append(t.calls, c)
	return c
}

// end completes the record of call and returns err.
func (t *Transport) end(call *Call, fault Fault, reply *orreryv1.CommandReply, err error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	call.Done = true
	call.End = time.Now()
	call.Fault = fault
	call.Receipt = slices.Clone(reply.GetReceipt())
	call.Err = err
	return err
}
