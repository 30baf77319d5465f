package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/queue"
)

// SetQueueLimits caps queue (namespace, queue) cluster-wide: at most maxLeased of its messages
// leased at once across every partition and worker, and at most perSecond leases a second (0:
// no limit of that kind; not both 0, see RemoveQueueLimits). A queue spans every partition, so
// each holds a share of the limits (SetQueueShare): this call gives partition i of P the
// static split (StaticShare; 0 for some partitions when maxLeased < P), and the silos'
// rebalancer then moves share units toward the partitions with demand.
//
// The shares never sum above the limits in force: the call reads every partition's share,
// lowers each to the smaller of its old and new share and, once every partition has applied
// that, raises each to its new share. A share is never set below the leases it counts, so
// lowering maxLeased below the leases held leaves the shares above it until those end (the
// rebalancer then lowers them). Every set is a compare-and-set against the share the call
// read or set last, so a rebalancer moving units meanwhile makes the call start over (at most
// 5 times; then a PartitionsError whose partitions answered RevisionConflict) rather than
// create units. A failure before the raises has raised nothing; calling again is safe. While a partition has
// no share yet its receives are not capped: the cap holds from the call's return on. It needs
// QueueConsume and QueuePublish on the queue, and apply version 22.
func (c *Client) SetQueueLimits(ctx context.Context, namespace, queueName string, maxLeased, perSecond int, opts ...CallOption) error {
	switch {
	case maxLeased < 0 || maxLeased > queue.MaxQueueLeased:
		return orrery.Invalid("max_leased", "must be between 0 and %d, got %d", queue.MaxQueueLeased, maxLeased)
	case perSecond < 0 || perSecond > queue.MaxQueueLeasesPerSecond:
		return orrery.Invalid("per_second", "must be between 0 and %d, got %d", queue.MaxQueueLeasesPerSecond, perSecond)
	case maxLeased == 0 && perSecond == 0:
		return orrery.Invalid("max_leased", "and per_second are both 0 (no limit): remove the limits with RemoveQueueLimits")
	}
	var err error
	for range setLimitsAttempts {
		if err = c.setLimitsOnce(ctx, namespace, queueName, maxLeased, perSecond, opts); !sharesMovedMeanwhile(err) {
			return err
		}
	}
	return err
}

// setLimitsAttempts bounds how many times SetQueueLimits starts over when a rebalancer moved
// units between its read and its sets.
const setLimitsAttempts = 5

// sharesMovedMeanwhile reports whether err is a PartitionsError whose every partition refused a set
// because its share changed since it was read (RevisionConflict): a rebalancer moved units.
func sharesMovedMeanwhile(err error) bool {
	var missed *PartitionsError
	if !errors.As(err, &missed) {
		return false
	}
	for _, f := range missed.Failed {
		if orrery.CodeOf(f.Err) != orrery.CodeRevisionConflict {
			return false
		}
	}
	return true
}

// setLimitsOnce is one attempt of SetQueueLimits: read, lower, raise.
func (c *Client) setLimitsOnce(ctx context.Context, namespace, queueName string, maxLeased, perSecond int, opts []CallOption) error {
	stats, err := c.QueueStats(ctx, namespace, queueName, "")
	if err != nil {
		return err
	}
	p := len(stats)
	policy := &orreryv1.QueueLimits{MaxLeased: uint32(maxLeased), LeasesPerSecond: uint32(perSecond)}
	operation := fmt.Sprintf("set limits of queue %s/%s", namespace, queueName)
	lowered := make([]*orreryv1.SetQueueShare, p)
	for i, s := range stats {
		k, r := StaticShare(maxLeased, perSecond, p, i)
		if old := s.Stats.GetShare(); old != nil {
			k, r = min(k, old.GetShareLeased()), min(r, old.GetShareMilliPerSecond())
		}
		lowered[i] = &orreryv1.SetQueueShare{Namespace: namespace, Queue: queueName, Policy: policy, ShareLeased: k, ShareMilliPerSecond: r,
			Compare: true, ExpectedSetAtUnixMicros: s.Stats.GetShare().GetSetAtUnixMicros()}
	}
	set, err := c.setShares(ctx, operation, lowered, opts)
	if err != nil {
		return err
	}
	final := make([]*orreryv1.SetQueueShare, p)
	for i := range p {
		k, r := StaticShare(maxLeased, perSecond, p, i)
		final[i] = &orreryv1.SetQueueShare{Namespace: namespace, Queue: queueName, Policy: policy, ShareLeased: k, ShareMilliPerSecond: r,
			Compare: true, ExpectedSetAtUnixMicros: set[i].GetShare().GetSetAtUnixMicros()}
	}
	_, err = c.setShares(ctx, operation, final, opts)
	return err
}

// RemoveQueueLimits removes the limits of queue (namespace, queue) from every partition
// (SetQueueShare without a policy); the error and the needs are SetQueueLimits'.
func (c *Client) RemoveQueueLimits(ctx context.Context, namespace, queue string, opts ...CallOption) error {
	m := &orreryv1.SetQueueShare{Namespace: namespace, Queue: queue}
	return c.fanOut(ctx, fmt.Sprintf("remove limits of queue %s/%s", namespace, queue), &orreryv1.Mutation{Kind: &orreryv1.Mutation_SetQueueShare{SetQueueShare: m}}, opts)
}

// SetQueueShare sets one partition's share of a capped queue (the SetQueueShare mutation)
// and returns the share in force after it. It is the silo rebalancer's step; an application
// sets limits with SetQueueLimits, which keeps the shares' sum within them.
func (c *Client) SetQueueShare(ctx context.Context, partition int, m *orreryv1.SetQueueShare, opts ...CallOption) (*orreryv1.QueueShareResult, error) {
	if err := c.checkPartition(partition); err != nil {
		return nil, err
	}
	r, err := c.mutateOn(ctx, partition, &orreryv1.Mutation{Kind: &orreryv1.Mutation_SetQueueShare{SetQueueShare: m}}, c.callOptions(opts))
	if err != nil {
		return nil, err
	}
	if r.GetQueueShare() == nil {
		return nil, unexpected("set_queue_share", r)
	}
	return r.GetQueueShare(), nil
}

// StaticShare is partition i's share of limits (maxLeased, perSecond) split evenly over p
// partitions: maxLeased/p leases, one more for i < maxLeased mod p, and perSecond×1000/p
// thousandths of a lease a second, one more for i < perSecond×1000 mod p. The shares of the
// p partitions sum to exactly the limits.
func StaticShare(maxLeased, perSecond, p, i int) (shareLeased uint32, shareMilliPerSecond uint64) {
	split := func(total int64) int64 {
		n := total / int64(p)
		if int64(i) < total%int64(p) {
			n++
		}
		return n
	}
	return uint32(split(int64(maxLeased))), uint64(split(int64(perSecond) * 1000))
}

// setShares sends shares[i] to partition i, all at once (fanOutEach), and returns each
// partition's result.
func (c *Client) setShares(ctx context.Context, operation string, shares []*orreryv1.SetQueueShare, opts []CallOption) ([]*orreryv1.QueueShareResult, error) {
	results := make([]*orreryv1.QueueShareResult, len(shares))
	err := c.fanOutEach(ctx, operation, func(n int) *orreryv1.Mutation {
		return &orreryv1.Mutation{Kind: &orreryv1.Mutation_SetQueueShare{SetQueueShare: shares[n]}}
	}, func(n int, r *orreryv1.MutationResult) { results[n] = r.GetQueueShare() }, opts)
	return results, err
}

// QueueStatsOn counts queue (namespace, queue) in one partition: QueueStats' answer of that
// partition alone, its share when the queue is capped there included.
func (c *Client) QueueStatsOn(ctx context.Context, partition int, namespace, queueName string) (*orreryv1.QueueStats, error) {
	if err := c.checkPartition(partition); err != nil {
		return nil, err
	}
	req := &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Queue{Queue: &orreryv1.InspectQueue{Namespace: namespace, Queue: queueName}}}
	reply, err := c.inspect(ctx, partition, req)
	if err == nil && reply.GetQueueStats() == nil {
		err = orrery.Errorf(orrery.CodeInternal, "partition %d answered without queue stats", partition)
	}
	return reply.GetQueueStats(), err
}
