package client

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// Enqueue adds a message to m.Lane, idempotently by id within the lane: an id that already
// exists there yields Created false and no second message. An empty m.Id is replaced by a
// fresh NewID in the request (m itself is not modified), and the result names the id used.
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

// Receive leases up to m.Max visible messages of queue (m.Namespace, m.Queue) held by one
// partition. With wait > 0 it is a long poll: the partition answers as soon as a message is
// visible, or with no messages when wait (bounded by the partition) has passed. A queue spans
// every partition; Worker keeps one such receive per partition.
func (c *Client) Receive(ctx context.Context, partition int, m *orreryv1.Receive, wait time.Duration, opts ...CallOption) ([]*orreryv1.QueueMessage, error) {
	res, err := c.receive(ctx, partition, m, wait, opts...)
	return res.GetMessages(), err
}

// receive is Receive returning the whole result (with its more flag).
func (c *Client) receive(ctx context.Context, partition int, m *orreryv1.Receive, wait time.Duration, opts ...CallOption) (*orreryv1.ReceiveResult, error) {
	if wait < 0 {
		return nil, orrery.Invalid("wait", "must not be negative, got %s", wait)
	}
	r, err := c.mutateOn(ctx, partition, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: m}}, opts, wait)
	if err != nil {
		return nil, err
	}
	if r.GetReceive() == nil {
		return nil, unexpected("receive", r)
	}
	return r.GetReceive(), nil
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
