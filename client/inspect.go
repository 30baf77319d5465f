package client

import (
	"context"
	"math"
	"sync"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// DefaultInspectLaneMax is how many messages InspectLane reads when asked for 0.
const DefaultInspectLaneMax = 100

// InspectSchedule reads a schedule record; NotFound when there is none.
func (c *Client) InspectSchedule(ctx context.Context, lane *orreryv1.Lane, scheduleID string) (*orreryv1.ScheduleRecord, error) {
	reply, err := c.inspectLane(ctx, lane, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Schedule{
		Schedule: &orreryv1.InspectSchedule{Lane: lane, ScheduleId: scheduleID},
	}})
	if err != nil {
		return nil, err
	}
	if !reply.GetFound() || reply.GetSchedule() == nil {
		return nil, orrery.FieldErrorf(orrery.CodeNotFound, "schedule_id", "no schedule %q in lane %s", scheduleID, laneName(lane))
	}
	return reply.GetSchedule(), nil
}

// InspectSaga reads a saga record; NotFound when there is none.
func (c *Client) InspectSaga(ctx context.Context, lane *orreryv1.Lane, sagaID string) (*orreryv1.SagaRecord, error) {
	reply, err := c.inspectLane(ctx, lane, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Saga{
		Saga: &orreryv1.InspectSaga{Lane: lane, SagaId: sagaID},
	}})
	if err != nil {
		return nil, err
	}
	if !reply.GetFound() || reply.GetSaga() == nil {
		return nil, orrery.FieldErrorf(orrery.CodeNotFound, "saga_id", "no saga %q in lane %s", sagaID, laneName(lane))
	}
	return reply.GetSaga(), nil
}

// InspectLane reads up to maxMessages (0: DefaultInspectLaneMax) live messages of a lane in id
// order, after the message afterID ("" starts at the beginning). nextAfterID is the afterID
// of the next page, empty when the lane holds no more.
func (c *Client) InspectLane(ctx context.Context, lane *orreryv1.Lane, afterID string, maxMessages int) (msgs []*orreryv1.QueueMessage, nextAfterID string, err error) {
	if maxMessages < 0 {
		return nil, "", orrery.Invalid("max_messages", "must not be negative, got %d", maxMessages)
	}
	if maxMessages == 0 {
		maxMessages = DefaultInspectLaneMax
	}
	reply, err := c.inspectLane(ctx, lane, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Lane{
		Lane: &orreryv1.InspectLane{Lane: lane, AfterId: afterID, MaxMessages: uint32(min(int64(maxMessages), math.MaxUint32))},
	}})
	if err != nil {
		return nil, "", err
	}
	return reply.GetMessages(), reply.GetNextAfterId(), nil
}

// PartitionQueueStats is one partition's share of a queue.
type PartitionQueueStats struct {
	Partition int
	Stats     *orreryv1.QueueStats
}

// QueueStats counts queue (namespace, queue): with key, the lane (namespace, queue, key) in the
// partition it routes to; without, each partition's share, asked in parallel and returned in
// partition order. Counts are each partition's at its own logged time, read within a budget
// (QueueStats.complete false: lower bounds).
func (c *Client) QueueStats(ctx context.Context, namespace, queue, key string) ([]PartitionQueueStats, error) {
	var partitions []int
	if key != "" {
		p, err := c.partitionOf(&orreryv1.Lane{Namespace: namespace, Queue: queue, Key: key})
		if err != nil {
			return nil, err
		}
		partitions = []int{p}
	} else {
		for p := range c.Partitions() {
			partitions = append(partitions, p)
		}
	}
	out := make([]PartitionQueueStats, len(partitions))
	errs := make([]error, len(partitions))
	var wg sync.WaitGroup
	for i, p := range partitions {
		wg.Go(func() {
			// A request of its own: inspect sets the principal on it.
			req := &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Queue{Queue: &orreryv1.InspectQueue{Namespace: namespace, Queue: queue, Key: key}}}
			reply, err := c.inspect(ctx, p, req)
			if err == nil && reply.GetQueueStats() == nil {
				err = orrery.Errorf(orrery.CodeInternal, "partition %d answered without queue stats", p)
			}
			out[i], errs[i] = PartitionQueueStats{Partition: p, Stats: reply.GetQueueStats()}, err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ListQueueStats counts the queues holding messages in one partition, at most maxQueues (0:
// the partition's default, 100) within one scan budget shared by their counts
// (queue.ListQueueStats); more reports queues it left out.
func (c *Client) ListQueueStats(ctx context.Context, partition, maxQueues int) (queues []*orreryv1.QueueStats, more bool, err error) {
	if maxQueues < 0 || maxQueues > math.MaxUint32 {
		return nil, false, orrery.Invalid("max_queues", "must be between 0 and %d, got %d", uint32(math.MaxUint32), maxQueues)
	}
	reply, err := c.inspect(ctx, partition, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_ListQueues{
		ListQueues: &orreryv1.ListQueues{MaxQueues: uint32(maxQueues)},
	}})
	if err != nil {
		return nil, false, err
	}
	return reply.GetQueues(), reply.GetMoreQueues(), nil
}

// PartitionStatus reads what an operator sees of one partition.
func (c *Client) PartitionStatus(ctx context.Context, partition int) (*orreryv1.PartitionStatus, error) {
	reply, err := c.inspect(ctx, partition, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Partition{
		Partition: &orreryv1.InspectPartition{},
	}})
	if err != nil {
		return nil, err
	}
	if reply.GetPartition() == nil {
		return nil, orrery.Errorf(orrery.CodeInternal, "partition %d answered without a status", partition)
	}
	return reply.GetPartition(), nil
}

func (c *Client) inspectLane(ctx context.Context, lane *orreryv1.Lane, req *orreryv1.InspectRequest) (*orreryv1.InspectReply, error) {
	partition, err := c.partitionOf(lane)
	if err != nil {
		return nil, err
	}
	return c.inspect(ctx, partition, req)
}

func laneName(lane *orreryv1.Lane) string {
	return lane.GetNamespace() + "/" + lane.GetQueue() + "/" + lane.GetKey()
}
