package client

import (
	"context"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/due"
)

// Bounds of ProcessDueRequest.MaxSchedules, and the occurrences one schedule's emit enqueues
// at most (the partition's cap on EmitOccurrences.max).
const (
	DefaultProcessDue = 100
	MaxProcessDue     = 10_000
	processDueEmitMax = 32
	processDuePage    = due.MaxListRefs
)

// ProcessDueRequest names the due schedules ProcessDue processes: those of Namespace (of Queue,
// when set) in Partition, or those of Lane (in its own partition).
type ProcessDueRequest struct {
	Namespace string
	// Queue, when set, processes only that queue's schedules.
	Queue string
	// Lane, when set, processes only that lane's schedules, in the lane's partition (Partition
	// is then ignored); its namespace must be Namespace.
	Lane *orreryv1.Lane
	// Partition is the partition processed when Lane is nil.
	Partition int
	// MaxSchedules bounds the schedules processed (0: DefaultProcessDue; at most
	// MaxProcessDue).
	MaxSchedules int
}

// ProcessedDue is what ProcessDue did.
type ProcessedDue struct {
	// Schedules counts the schedules it sent an emit for; Enqueued the occurrences those emits
	// enqueued. What the due coordinator emitted first is in neither: an occurrence is enqueued
	// once, whoever emits it.
	Schedules, Enqueued int
	// Failed are the schedules whose emit was refused for a reason of their own (a schedule
	// stopped at an expired occurrence, one paused meanwhile): ProcessDue goes on past them.
	Failed []ProcessDueFailure
	// More says due schedules were left when it returned: MaxSchedules stopped it, or a
	// schedule had more occurrences due than one emit enqueues (32).
	More bool
}

// ProcessDueFailure is one schedule ProcessDue could not emit.
type ProcessDueFailure struct {
	Lane       *orreryv1.Lane
	ScheduleID string
	Err        error
}

// ProcessDue processes now, for a caller with a trigger of its own (a cron job, a test, a
// backlog to drain before the due coordinator comes to it), at most req.MaxSchedules
// schedules whose next occurrences are due in a partition: oldest due first, it reads them
// (ListDue, needing QueueInspect) and sends each one's EmitOccurrences, as the due coordinator
// would (needing SchedulerManage and QueuePublish on its lane, and a partition at apply
// version 15 or later), one command per schedule, enqueuing at most 32 of its occurrences.
//
// It never duplicates what the coordinator emits meanwhile: an occurrence's id is its
// schedule's, generation's and ordinal's, and the partition enqueues each once. It checks ctx
// between schedules and returns what it did so far with ctx's error. A schedule replaced or
// deleted between the read and its emit is skipped; one whose emit is refused for a reason of
// its own is listed in Failed; any other error (the partition unreachable, a grant missing)
// ends the call, with the counts so far.
func (c *Client) ProcessDue(ctx context.Context, req ProcessDueRequest) (ProcessedDue, error) {
	var out ProcessedDue
	limit := req.MaxSchedules
	if limit == 0 {
		limit = DefaultProcessDue
	}
	if limit < 0 || limit > MaxProcessDue {
		return out, orrery.Invalid("max_schedules", "must be in 1..%d, got %d", MaxProcessDue, limit)
	}
	partition := req.Partition
	if req.Lane != nil {
		if req.Lane.GetNamespace() != req.Namespace {
			return out, orrery.Invalid("lane.namespace", "is %q, not the namespace %q", req.Lane.GetNamespace(), req.Namespace)
		}
		var err error
		if partition, err = c.partitionOf(req.Lane); err != nil {
			return out, err
		}
	}
	var after []byte
	for {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		reply, err := c.inspect(ctx, partition, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_ListDue{ListDue: &orreryv1.ListDue{
			Namespace: req.Namespace, Queue: req.Queue, Lane: req.Lane, MaxRefs: uint32(min(limit-out.Schedules, processDuePage)), After: after,
		}}})
		if err != nil {
			return out, err
		}
		for _, m := range due.Mutations(reply.GetDue(), processDueEmitMax) {
			if out.Schedules == limit {
				out.More = true
				return out, nil
			}
			if err := ctx.Err(); err != nil {
				return out, err
			}
			emit := m.GetEmitOccurrences()
			r, err := c.mutateOn(ctx, partition, m, c.callOptions(nil)) // a command id each
			switch code := orrery.CodeOf(err); {
			case err == nil:
				out.Schedules++
				out.Enqueued += len(r.GetSchedule().GetEnqueuedIds())
				if len(r.GetSchedule().GetEnqueuedIds()) == processDueEmitMax {
					out.More = true
				}
			case code == orrery.CodeTokenInvalidated || code == orrery.CodeNotFound:
				// Replaced or deleted since it was read: nothing of that generation is due.
			case code == orrery.CodeExpired || code == orrery.CodeSuspended || code == orrery.CodeQuotaExceeded:
				out.Schedules++
				out.Failed = append(out.Failed, ProcessDueFailure{Lane: emit.GetLane(), ScheduleID: emit.GetScheduleId(), Err: err})
			default:
				return out, err
			}
		}
		after = reply.GetListContinuation()
		if after == nil {
			return out, nil
		}
		if out.Schedules == limit {
			out.More = true
			return out, nil
		}
	}
}
