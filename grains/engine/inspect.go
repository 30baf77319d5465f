package engine

import (
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/audit"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/listing"
	"github.com/orreryhq/orrery/grains/queue"
	"github.com/orreryhq/orrery/grains/retained"
	"github.com/orreryhq/orrery/grains/saga"
	"github.com/orreryhq/orrery/grains/schedule"
)

// MaxInspectMessages bounds one lane page.
const MaxInspectMessages = 1000

// DefaultListQueues and MaxListQueues are ListQueues.max_queues's default and bound.
const (
	DefaultListQueues = 100
	MaxListQueues     = 1000
)

// Inspect answers one bounded inspection read at now from the replica's state. Its caller
// confirms first that this replica may answer (it leads, and has applied what was committed).
// A partition status holds what the engine knows; the driver adds the silo's own fields.
func (e *Engine) Inspect(now time.Time, req *orreryv1.InspectRequest) *orreryv1.InspectReply {
	if e.stopped {
		return &orreryv1.InspectReply{Error: orrery.Errorf(orrery.CodeUnavailable, "partition %d is stopping", e.cfg.Partition).Proto()}
	}
	reply := &orreryv1.InspectReply{}
	err := e.state.View(func(r kv.Reader) (err error) {
		if err := grants.AuthorizeInspect(r, req); err != nil {
			return err
		}
		defer func() { // what the reply shows passes the caller's read policies of this view
			if err == nil {
				err = grants.ProjectInspect(r, req.GetPrincipal(), reply)
			}
		}()
		switch t := req.GetTarget().(type) {
		case *orreryv1.InspectRequest_Schedule:
			lane, id := t.Schedule.GetLane(), t.Schedule.GetScheduleId()
			if err := input.Lane("lane", lane, false); err != nil {
				return err
			}
			if id == "" && t.Schedule.GetName() != "" { // by name: its current identity
				n, err := schedule.ResolveName(r, lane, "name", t.Schedule.GetName())
				if err != nil {
					return err
				}
				id = n.ScheduleID
			} else if err := input.UUID("schedule_id", id); err != nil {
				return err
			}
			reply.ScheduleId = id
			rec, found, err := schedule.Load(r, lane, id)
			reply.Found, reply.Schedule = found, rec
			if err != nil {
				return err
			}
			if !found {
				reply.Deleted, err = schedule.Deleted(r, lane, id)
				return err
			}
			reply.Inspection, err = schedule.Inspect(r, lane, id, e.readTime(now))
			return err
		case *orreryv1.InspectRequest_Ledger:
			q := t.Ledger
			limit := int(q.GetMaxRecords())
			if limit <= 0 || limit > schedule.MaxLedgerRead {
				limit = schedule.MaxLedgerRead
			}
			to := q.GetToUnixMicros()
			if to == 0 {
				to = input.MaxInstantMicros
			}
			entries, next, err := schedule.ReadLedger(r, q.GetLane(), q.GetScheduleId(), schedule.LedgerQuery{
				FromMicros: q.GetFromUnixMicros(), ToMicros: to, MaxRecords: limit, After: q.GetAfter()})
			reply.Found, reply.Ledger, reply.LedgerContinuation = len(entries) > 0, entries, next
			return err
		case *orreryv1.InspectRequest_Saga:
			rec, found, err := saga.Load(r, t.Saga.GetLane(), t.Saga.GetSagaId())
			reply.Found, reply.Saga = found, rec
			return err
		case *orreryv1.InspectRequest_Lane:
			limit := int(t.Lane.GetMaxMessages())
			if limit <= 0 || limit > MaxInspectMessages {
				limit = MaxInspectMessages
			}
			msgs, next, err := queue.ListLane(r, t.Lane.GetLane(), t.Lane.GetAfterId(), limit, queue.MaxLanePageBytes)
			reply.Found, reply.Messages, reply.NextAfterId = len(msgs) > 0, msgs, next
			return err
		case *orreryv1.InspectRequest_Queue:
			q := t.Queue
			stats, err := queue.Stats(r, q.GetNamespace(), q.GetQueue(), q.GetKey(), e.readTime(now))
			reply.Found, reply.QueueStats = err == nil, stats
			return err
		case *orreryv1.InspectRequest_ListQueues:
			limit := int(t.ListQueues.GetMaxQueues())
			if limit == 0 {
				limit = DefaultListQueues
			}
			if limit > MaxListQueues {
				return orrery.Invalid("max_queues", "must be at most %d, got %d", MaxListQueues, limit)
			}
			queues, more, err := queue.ListQueueStats(r, e.readTime(now), limit)
			reply.Found, reply.Queues, reply.MoreQueues = len(queues) > 0, queues, more
			return err
		case *orreryv1.InspectRequest_ListSchedules:
			listed, next, err := listing.Schedules(r, t.ListSchedules, listing.MaxPageBytes)
			reply.Found, reply.ListedSchedules, reply.ListContinuation = len(listed) > 0, listed, next
			return err
		case *orreryv1.InspectRequest_ListSagas:
			listed, next, err := listing.Sagas(r, t.ListSagas, listing.MaxPageBytes)
			reply.Found, reply.ListedSagas, reply.ListContinuation = len(listed) > 0, listed, next
			return err
		case *orreryv1.InspectRequest_ListDue:
			q, err := dueQuery(t.ListDue)
			if err != nil {
				return err
			}
			refs, next, err := due.List(r, e.readTime(now), q)
			reply.Found, reply.Due, reply.ListContinuation = len(refs) > 0, refs, next
			return err
		case *orreryv1.InspectRequest_Calendar:
			c := t.Calendar
			if err := schedule.CalendarName("name", c.GetName()); err != nil {
				return err
			}
			rec, err := schedule.LoadCalendar(r, c.GetNamespace(), c.GetName())
			reply.Found, reply.Calendar = rec != nil, rec
			return err
		case *orreryv1.InspectRequest_ListCalendars:
			l := t.ListCalendars
			listed, next, err := schedule.ListCalendars(r, l.GetNamespace(), l.GetAfter(), int(l.GetMaxCalendars()))
			reply.Found, reply.ListedCalendars = len(listed) > 0, listed
			if next != "" {
				reply.ListContinuation = []byte(next)
			}
			return err
		case *orreryv1.InspectRequest_Audit:
			records, next, err := audit.Read(r, t.Audit)
			reply.Found, reply.AuditRecords, reply.ListContinuation = len(records) > 0, records, next
			return err
		case *orreryv1.InspectRequest_Partition:
			counters, err := retained.Load(r)
			if err != nil {
				return err
			}
			enqueued, err := queue.Sequence(r)
			if err != nil {
				return err
			}
			next, err := e.NextDue()
			index, logged := e.state.Applied()
			reply.Found = true
			reply.Partition = &orreryv1.PartitionStatus{
				Partition: int32(e.cfg.Partition), ActivationEpoch: e.state.Term(), LoggedTimeUnixMicros: logged,
				AppliedIndex: index, NextDueAtUnixMicros: next, PendingCommands: uint32(e.Queued()),
				RetainedRecords: counters.GetRecords(), RetainedBytes: counters.GetBytes(),
				Partitions: int32(e.cfg.Partitions), EnqueuedTotal: enqueued,
			}
			return err
		default:
			return orrery.Invalid("target", "is required (schedule, saga, lane, queue, list_queues, ledger, list_schedules, list_sagas, list_due, calendar, list_calendars, audit or partition)")
		}
	})
	if err != nil {
		return &orreryv1.InspectReply{Error: orrery.AsError(err).Proto()}
	}
	return reply
}

// dueQuery validates a ListDue: a namespace, a lane (when set) in that namespace and queue, and
// at most due.MaxListRefs refs (zero: due.DefaultListRefs).
func dueQuery(q *orreryv1.ListDue) (due.ListQuery, error) {
	out := due.ListQuery{Namespace: q.GetNamespace(), Queue: q.GetQueue(), Lane: q.GetLane(),
		MaxRefs: int(q.GetMaxRefs()), MaxScanned: listing.MaxScanned, After: q.GetAfter()}
	if out.MaxRefs == 0 {
		out.MaxRefs = due.DefaultListRefs
	}
	switch lane := q.GetLane(); {
	case out.Namespace == "":
		return out, orrery.Invalid("namespace", "is required")
	case out.MaxRefs > due.MaxListRefs:
		return out, orrery.Invalid("max_refs", "must be at most %d, got %d", due.MaxListRefs, out.MaxRefs)
	case lane != nil && lane.GetNamespace() != out.Namespace:
		return out, orrery.Invalid("lane.namespace", "is %q, not the namespace %q listed", lane.GetNamespace(), out.Namespace)
	case lane != nil && out.Queue != "" && lane.GetQueue() != out.Queue:
		return out, orrery.Invalid("lane.queue", "is %q, not the queue %q listed", lane.GetQueue(), out.Queue)
	}
	return out, nil
}
