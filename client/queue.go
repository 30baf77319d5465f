package client

import (
	"context"
	"math"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// Enqueue adds a message to m.Lane, idempotently by id within the lane: an id that already
// exists there (or was acked, expired or cancelled within 24 h) yields Created false and no
// second message — when it is the same message. An enqueue under a taken id whose payload,
// headers, ordering key or origin differ from the message first enqueued under it fails
// ErrMessageConflict, which names the id and the parts that differ (compare-or-return, apply
// version 18; a message acked before its partition took that version is not compared). An
// empty m.Id is replaced by a fresh NewID in the request (m itself is not modified), and the
// result names the id used. With m.Unique (Unique, UniqueByPayload; apply version 21) an
// enqueue whose unique key its lane holds stores nothing: the result has Created false and
// DuplicateOf, the id of the message holding the key (not an error).
func (c *Client) Enqueue(ctx context.Context, m *orreryv1.Enqueue, opts ...CallOption) (*orreryv1.EnqueueResult, error) {
	if m.GetId() == "" {
		m = proto.CloneOf(m)
		if m == nil {
			m = &orreryv1.Enqueue{}
		}
		m.Id = NewID()
	}
	r, err := c.mutate(ctx, m.GetLane(), &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: m}}, opts)
	if err != nil {
		return nil, err
	}
	if r.GetEnqueue() == nil {
		return nil, unexpected("enqueue", r)
	}
	return r.GetEnqueue(), nil
}

// ErrMessageConflict matches, with errors.Is, the error of an enqueue under an id its lane
// holds for another message (see Enqueue): code IdempotencyConflict (it matches
// orrery.ErrIdempotencyConflict too) on the enqueue's id field. Its message names the id and
// which of payload_json, headers_json, ordering_key and origin differ, never their values.
// A command id reused for another request is an IdempotencyConflict too, on command_id, and
// does not match it.
var ErrMessageConflict = &orrery.Error{Code: orrery.CodeIdempotencyConflict, Field: "id"}

// Receive leases up to m.Max visible messages of queue (m.Namespace, m.Queue) held by one
// partition. A queue spans every partition; Worker keeps one such receive per partition.
//
// With wait > 0 it is a long poll: the request waits on the partition (at most wait, bounded by
// the partition) until a message of the queue is visible, leases there and returns what it
// leased; when its wait ends first, Receive returns no messages. A caller whose ctx ends while
// it waits leases nothing it keeps: Receive abandons the waiting request (the partition drops
// it, or answers with what it had leased already), releases what it leased, and returns the
// ctx error. If ctx ends while a leasing request is in flight, Receive waits for it (and for
// the abandon) at most ReceiveSettleTimeout longer. What remains: a process that dies, or a
// request still unanswered after ReceiveSettleTimeout, leaves its leases to expire
// (m.LeaseDurationMicros) before the messages are visible again.
func (c *Client) Receive(ctx context.Context, partition int, m *orreryv1.Receive, wait time.Duration, opts ...CallOption) ([]*orreryv1.QueueMessage, error) {
	res, err := c.receive(ctx, partition, m, wait, ReceiveSettleTimeout, opts...)
	return res.GetMessages(), err
}

// ReceiveSettleTimeout bounds how long Receive waits, after its context ends, for a leasing
// request already sent or the abandon of a waiting one, and then for the releases of what it
// leased.
const ReceiveSettleTimeout = 5 * time.Second

// receive is Receive returning the whole result (with its more flag), waiting at most settle
// for a leasing request, an abandon and its releases after ctx ends.
func (c *Client) receive(ctx context.Context, partition int, m *orreryv1.Receive, wait, settle time.Duration, opts ...CallOption) (*orreryv1.ReceiveResult, error) {
	if wait < 0 {
		return nil, orrery.Invalid("wait", "must not be negative, got %s", wait)
	}
	mutation := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: m}}
	o := c.callOptions(opts)
	if wait > 0 {
		receipt, _, err := c.command(ctx, partition, []*orreryv1.Mutation{mutation}, o, wait)
		if err != nil {
			if ctx.Err() != nil || orrery.Retriable(orrery.CodeOf(err)) || orrery.CodeOf(err) == orrery.CodeDeadlineExceeded {
				// The request may still be parked, or leasing, on the partition.
				c.abandon(ctx, partition, mutation, o, settle)
			}
			return nil, err
		}
		if receipt == nil { // the wait ended with nothing visible
			return &orreryv1.ReceiveResult{}, nil
		}
		res, err := receiveResult(onlyResult(receipt))
		if ctx.Err() != nil {
			c.releaseAll(ctx, res.GetMessages(), settle)
			return nil, stopped(ctx, "receive", partition, 1, err)
		}
		return res, err
	}
	leaseCtx, cancel := outliving(ctx, settle)
	defer cancel()
	res, err := receiveResult(c.mutateOn(leaseCtx, partition, mutation, o))
	if ctx.Err() != nil {
		c.releaseAll(ctx, res.GetMessages(), settle)
		return nil, stopped(ctx, "receive", partition, 1, err)
	}
	return res, err
}

// abandon ends the waiting receive of mutation under o whose caller stopped waiting
// (CommandRequest.abandon), under a context that outlives ctx by at most settle: the partition
// drops it if it is still parked, and otherwise answers with its receipt, whose messages are
// released. settle is measured on the client's clock.
func (c *Client) abandon(ctx context.Context, partition int, mutation *orreryv1.Mutation, o callOptions, settle time.Duration) {
	// settle runs on the client's clock, as the retries' backoffs do.
	abandonCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	timer := c.clock.AfterFunc(settle, cancel)
	defer func() { timer.Stop(); cancel() }()
	req := c.request([]*orreryv1.Mutation{mutation}, o)
	req.Abandon = true
	o.onRetry = nil // the caller has stopped listening
	receipt, _, err := c.submit(abandonCtx, partition, req, o)
	if err == nil && receipt != nil {
		var res *orreryv1.ReceiveResult
		if res, err = receiveResult(onlyResult(receipt)); err == nil {
			c.releaseAll(ctx, res.GetMessages(), settle)
		}
	}
	if err != nil {
		c.log.Warn("orrery client: could not abandon a waiting receive whose caller went away; what it leases waits for its lease to expire",
			"partition", partition, "command_id", o.commandID, "err", err)
	}
}

func receiveResult(r *orreryv1.MutationResult, err error) (*orreryv1.ReceiveResult, error) {
	if err != nil {
		return nil, err
	}
	if r.GetReceive() == nil {
		return nil, unexpected("receive", r)
	}
	return r.GetReceive(), nil
}

// releaseAll releases leased messages whose receiver has gone, visible again at once, under a
// context that outlives ctx by at most settle.
func (c *Client) releaseAll(ctx context.Context, msgs []*orreryv1.QueueMessage, settle time.Duration) {
	if len(msgs) == 0 {
		return
	}
	releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settle)
	defer cancel()
	for _, qm := range msgs {
		if _, err := c.Release(releaseCtx, qm.GetLane(), qm.GetId(), qm.GetLease().GetToken(), 0); err != nil {
			c.log.Warn("orrery client: could not release a message received after the caller went away; its lease will expire",
				"id", qm.GetId(), "err", err)
		}
	}
}

// outliving returns a context with ctx's values that is not cancelled with ctx but at most
// grace after ctx ends (or by the returned cancel): a request that may lease runs on, so that
// what it leases can be released.
func outliving(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-timer.C:
			cancel()
		case <-out.Done():
		}
	})
	return out, func() { stop(); cancel() }
}

// Ack removes a received message; leaseToken must be its current lease's.
func (c *Client) Ack(ctx context.Context, lane *orreryv1.Lane, id, leaseToken string, opts ...CallOption) (*orreryv1.LeaseResult, error) {
	m := &orreryv1.Ack{Lane: lane, Id: id, LeaseToken: leaseToken}
	return c.leaseCall(ctx, lane, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Ack{Ack: m}}, opts)
}

// Release returns a received message early, visible again after delay (zero: at once). The
// delivery still counts toward the message's max deliveries.
func (c *Client) Release(ctx context.Context, lane *orreryv1.Lane, id, leaseToken string, delay time.Duration, opts ...CallOption) (*orreryv1.LeaseResult, error) {
	m := &orreryv1.Release{Lane: lane, Id: id, LeaseToken: leaseToken, DelayMicros: delay.Microseconds()}
	return c.leaseCall(ctx, lane, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Release{Release: m}}, opts)
}

// ExtendLease moves a current lease's end to the partition's logged time + leaseDuration (zero:
// the partition's default lease). An ended lease cannot be extended (Expired).
func (c *Client) ExtendLease(ctx context.Context, lane *orreryv1.Lane, id, leaseToken string, leaseDuration time.Duration, opts ...CallOption) (*orreryv1.LeaseResult, error) {
	m := &orreryv1.ExtendLease{Lane: lane, Id: id, LeaseToken: leaseToken, LeaseDurationMicros: leaseDuration.Microseconds()}
	return c.leaseCall(ctx, lane, &orreryv1.Mutation{Kind: &orreryv1.Mutation_ExtendLease{ExtendLease: m}}, opts)
}

func (c *Client) leaseCall(ctx context.Context, lane *orreryv1.Lane, m *orreryv1.Mutation, opts []CallOption) (*orreryv1.LeaseResult, error) {
	r, err := c.mutate(ctx, lane, m, opts)
	if err != nil {
		return nil, err
	}
	if r.GetLease() == nil {
		return nil, unexpected("lease", r)
	}
	return r.GetLease(), nil
}

// RedriveDeadLetters moves up to maxMessages (0: the partition's receive max) dead letters of
// lane's dead-letter queue back to lane (the live queue's lane), as the RedriveDeadLetters
// mutation describes. A retry with the same command id (WithCommandID) replays the first
// result; a new redrive of an emptied dead-letter queue moves nothing. Result.More says another
// redrive would find more.
func (c *Client) RedriveDeadLetters(ctx context.Context, lane *orreryv1.Lane, maxMessages int, opts ...CallOption) (*orreryv1.RedriveResult, error) {
	if maxMessages < 0 || maxMessages > math.MaxUint32 {
		return nil, orrery.Invalid("max", "must be between 0 and %d, got %d", uint32(math.MaxUint32), maxMessages)
	}
	m := &orreryv1.RedriveDeadLetters{Lane: lane, Max: uint32(maxMessages)}
	r, err := c.mutate(ctx, lane, &orreryv1.Mutation{Kind: &orreryv1.Mutation_RedriveDeadLetters{RedriveDeadLetters: m}}, opts)
	if err != nil {
		return nil, err
	}
	if r.GetRedrive() == nil {
		return nil, unexpected("redrive", r)
	}
	return r.GetRedrive(), nil
}
