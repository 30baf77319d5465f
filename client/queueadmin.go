package client

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// PauseQueue pauses the consumption of queue (namespace, queue) on every partition (a queue
// spans them all): their receives lease nothing, and Workers' long polls wait, until
// ResumeQueue. Enqueues still land, and leases already held keep working (ack, release,
// extend). reason is optional; each partition records it with the client's principal and its
// logged time (QueueStats' Pause). It returns once every partition has applied it; when some
// could not be reached or refused it, the error names them (PartitionsError) and the others
// keep the pause: calling PauseQueue again is safe (a paused partition keeps its first
// record). It needs QueueConsume and QueuePublish on the queue, and apply version 13.
func (c *Client) PauseQueue(ctx context.Context, namespace, queue, reason string, opts ...CallOption) error {
	m := &orreryv1.PauseQueue{Namespace: namespace, Queue: queue, Reason: reason}
	return c.fanOut(ctx, fmt.Sprintf("pause queue %s/%s", namespace, queue), &orreryv1.Mutation{Kind: &orreryv1.Mutation_PauseQueue{PauseQueue: m}}, opts)
}

// ResumeQueue ends a PauseQueue of queue (namespace, queue) on every partition, like
// PauseQueue (resuming a queue that is not paused changes nothing).
func (c *Client) ResumeQueue(ctx context.Context, namespace, queue string, opts ...CallOption) error {
	m := &orreryv1.ResumeQueue{Namespace: namespace, Queue: queue}
	return c.fanOut(ctx, fmt.Sprintf("resume queue %s/%s", namespace, queue), &orreryv1.Mutation{Kind: &orreryv1.Mutation_ResumeQueue{ResumeQueue: m}}, opts)
}

// CancelMessage cancels the message id of lane, as the CancelMessage mutation describes: a
// message that is not leased is removed (its id stays taken while its tombstone is kept); a
// leased one has its lease revoked, so its worker's next lease extension fails and the worker
// cancels its handler's context (context.Cause is the extension's TokenInvalidated error), and
// its ack fails; a schedule's occurrence is ledgered "cancelled". The result's Outcome says
// which; a message removed already (acked, expired, cancelled) is ALREADY_DONE, an id the lane
// has neither a message nor a tombstone of is NotFound. reason is optional. It needs
// QueueConsume and QueuePublish on the queue, and apply version 14.
func (c *Client) CancelMessage(ctx context.Context, lane *orreryv1.Lane, id, reason string, opts ...CallOption) (*orreryv1.CancelMessageResult, error) {
	m := &orreryv1.CancelMessage{Lane: lane, Id: id, Reason: reason}
	r, err := c.mutate(ctx, lane, &orreryv1.Mutation{Kind: &orreryv1.Mutation_CancelMessage{CancelMessage: m}}, opts)
	if err != nil {
		return nil, err
	}
	if r.GetCancelMessage() == nil {
		return nil, unexpected("cancel_message", r)
	}
	return r.GetCancelMessage(), nil
}

// PartitionsError is the error of a call sent to every partition that some did not apply:
// Failed maps each of them to its error. Its code (orrery.CodeOf) is the lowest failed
// partition's.
type PartitionsError struct {
	// Operation names the call ("pause queue ns/jobs").
	Operation string
	// Partitions is how many partitions the call was sent to.
	Partitions int
	// Failed are the partitions that did not apply it, ascending, with their errors.
	Failed []PartitionMiss
}

// PartitionMiss is one partition a call sent to every partition did not reach.
type PartitionMiss struct {
	// Partition is the partition's number.
	Partition int
	// Err is why it did not apply the call.
	Err error
}

// Error names the partitions not reached and the first one's error.
func (e *PartitionsError) Error() string {
	names := make([]string, len(e.Failed))
	for i, f := range e.Failed {
		names[i] = strconv.Itoa(f.Partition)
	}
	return fmt.Sprintf("%s: partitions %s of %d not reached (the others applied it; calling again is safe): partition %d: %v",
		e.Operation, strings.Join(names, ", "), e.Partitions, e.Failed[0].Partition, e.Failed[0].Err)
}

// Unwrap returns the first failed partition's error, so orrery.CodeOf and errors.Is see its
// code.
func (e *PartitionsError) Unwrap() error { return e.Failed[0].Err }

// fanOut sends m under one command id to every partition at once and waits for them all; the
// partitions that fail make a *PartitionsError, unless every partition refused m as invalid
// (Validation: the command itself is, wherever it goes), which is that error alone.
func (c *Client) fanOut(ctx context.Context, operation string, m *orreryv1.Mutation, opts []CallOption) error {
	return c.fanOutEach(ctx, operation, func(int) *orreryv1.Mutation { return m }, nil, opts)
}

// fanOutEach is fanOut sending partition n the mutation m(n), and handing each partition's
// result to done when set (from the partitions' goroutines, each its own n).
func (c *Client) fanOutEach(ctx context.Context, operation string, m func(n int) *orreryv1.Mutation, done func(n int, r *orreryv1.MutationResult), opts []CallOption) error {
	p := c.transport.Partitions()
	if p <= 0 {
		return orrery.Errorf(orrery.CodeUnavailable, "transport reports %d partitions", p)
	}
	o := c.callOptions(opts)
	o.receipt = nil // one call, P receipts
	errs := make([]error, p)
	var wg sync.WaitGroup
	for n := range p {
		wg.Go(func() {
			var r *orreryv1.MutationResult
			r, errs[n] = c.mutateOn(ctx, n, m(n), o)
			if errs[n] == nil && done != nil {
				done(n, r)
			}
		})
	}
	wg.Wait()
	failed := &PartitionsError{Operation: operation, Partitions: p}
	for n, err := range errs {
		if err != nil {
			failed.Failed = append(failed.Failed, PartitionMiss{Partition: n, Err: err})
		}
	}
	if len(failed.Failed) == p && allInvalid(failed.Failed) {
		return failed.Failed[0].Err
	}
	if len(failed.Failed) > 0 {
		return failed
	}
	return nil
}

// allInvalid reports whether every miss is a Validation error.
func allInvalid(misses []PartitionMiss) bool {
	for _, m := range misses {
		if orrery.CodeOf(m.Err) != orrery.CodeValidation {
			return false
		}
	}
	return true
}
