package clienttest

import (
	"context"
	"sync"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/audit"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/listing"
	"github.com/orreryhq/orrery/grains/queue"
	"github.com/orreryhq/orrery/grains/route"
	"github.com/orreryhq/orrery/grains/saga"
	"github.com/orreryhq/orrery/grains/schedule"
)

// partition is one partition's store and logged clock.
type partition struct {
	index int

	mu         sync.Mutex
	store      *kv.Memory
	lastLogged int64         // last logged time, µs
	applied    uint64        // batches applied
	changed    chan struct{} // closed and replaced after every applied batch
}

// command applies req, unless req is a waiting receive: that is answered as a partition
// answers it, without applying (see waitAnswer), once a message of its queue is visible or its
// wait has ended.
func (t *Transport) command(ctx context.Context, p *partition, req *orreryv1.CommandRequest) (*orreryv1.CommandReply, error) {
	receive := waitingReceive(req)
	if receive == nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		return t.apply(p, req), nil
	}
	wait := min(time.Duration(req.GetWaitMicros())*time.Microsecond, t.maxWait)
	deadline := time.Now().Add(wait)
	for {
		p.mu.Lock()
		reply, nextVisibleMicros := t.waitAnswer(p, req, receive, !time.Now().Before(deadline))
		if reply != nil {
			p.mu.Unlock()
			return reply, nil
		}
		changed := p.changed
		p.mu.Unlock()

		sleep := time.Until(deadline)
		if nextVisibleMicros != 0 {
			untilVisible := time.Duration(nextVisibleMicros-t.clock().UnixMicro()) * time.Microsecond
			sleep = min(sleep, max(untilVisible, time.Millisecond))
		}
		timer := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-t.closed:
			timer.Stop()
			return nil, orrery.Errorf(orrery.CodeUnavailable, "clienttest: transport closed")
		case <-changed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// waitingReceive returns the Receive of a batch whose only mutation is a Receive and that may
// wait, or nil.
func waitingReceive(req *orreryv1.CommandRequest) *orreryv1.Receive {
	if req.GetWaitMicros() <= 0 || len(req.GetBatch().GetMutations()) != 1 {
		return nil
	}
	return req.GetBatch().GetMutations()[0].GetReceive()
}

// waitAnswer is the answer to a waiting receive now, as the partition grain gives it, writing
// nothing: the replayed receipt of a command id already answered, the error of an invalid
// request, visible when a message of the queue is visible at the next logged time, or not
// visible when ended. Otherwise it returns nil and when the queue's next message becomes
// visible or lease ends (0 when none is known). The caller holds p.mu.
func (t *Transport) waitAnswer(p *partition, req *orreryv1.CommandRequest, m *orreryv1.Receive, ended bool) (*orreryv1.CommandReply, int64) {
	now := t.nextLogged(p)
	if _, found, err := p.store.Get(keys.InboxKey(req.GetPrincipal(), req.GetBatch().GetCommandId())); err != nil || found {
		return t.apply(p, req), 0 // replays the receipt (or reports the conflict or the error)
	}
	if err := t.applier.CheckWaiting(p.store, req.GetPrincipal(), req.GetBatch(), now); err != nil {
		return &orreryv1.CommandReply{Error: orrery.AsError(err).Proto(), ActivationEpoch: 1}, 0
	}
	visible, err := queue.VisibleAt(p.store, m.GetNamespace(), m.GetQueue(), now)
	switch {
	case err != nil:
		return &orreryv1.CommandReply{Error: orrery.AsError(err).Proto(), ActivationEpoch: 1}, 0
	case visible:
		return &orreryv1.CommandReply{Visible: true, ActivationEpoch: 1}, 0
	case ended:
		return &orreryv1.CommandReply{ActivationEpoch: 1}, 0
	}
	at, found, err := queue.NextVisibleAt(p.store, m.GetNamespace(), m.GetQueue())
	if err != nil || !found {
		return nil, 0
	}
	return nil, at
}

// nextLogged is the logged time the next batch of p would get. The caller holds p.mu.
func (t *Transport) nextLogged(p *partition) int64 {
	return max(t.clock().UnixMicro(), p.lastLogged+1)
}

// apply applies req at the next logged time, as one atomic write of p's store. The caller
// holds p.mu.
func (t *Transport) apply(p *partition, req *orreryv1.CommandRequest) *orreryv1.CommandReply {
	if e := misrouted(req.GetBatch(), p.index, len(t.partitions)); e != nil {
		return &orreryv1.CommandReply{Error: e, ActivationEpoch: 1}
	}
	logged := t.nextLogged(p)
	writes := kv.NewBuffer(p.store)
	out, err := t.applier.AsLeader(req.GetBatch()).ApplyBatch(writes, req.GetPrincipal(), req.GetBatch(), logged)
	if err != nil {
		return &orreryv1.CommandReply{Error: orrery.AsError(err).Proto(), ActivationEpoch: 1}
	}
	if err := writes.Commit(); err != nil {
		return &orreryv1.CommandReply{Error: orrery.AsError(err).Proto(), ActivationEpoch: 1}
	}
	p.lastLogged = logged
	if !out.Replayed {
		p.applied++
		close(p.changed)
		p.changed = make(chan struct{})
	}
	return &orreryv1.CommandReply{Receipt: out.ReceiptBytes, ActivationEpoch: 1}
}

// inspect answers req from p's store.
func (p *partition) inspect(req *orreryv1.InspectRequest, partitions int, nowMicros int64) *orreryv1.InspectReply {
	p.mu.Lock()
	defer p.mu.Unlock()
	reply := &orreryv1.InspectReply{}
	if err := grants.AuthorizeInspect(p.store, req); err != nil {
		return &orreryv1.InspectReply{Error: orrery.AsError(err).Proto()}
	}
	var err error
	switch target := req.GetTarget().(type) {
	case *orreryv1.InspectRequest_Schedule:
		reply.Error = checkLane(target.Schedule.GetLane(), p.index, partitions)
		if reply.Error == nil {
			reply.Schedule, reply.Found, err = schedule.Load(p.store, target.Schedule.GetLane(), target.Schedule.GetScheduleId())
		}
		if err == nil && reply.Found {
			reply.Inspection, err = schedule.Inspect(p.store, target.Schedule.GetLane(), target.Schedule.GetScheduleId(), max(nowMicros, p.lastLogged))
		}
	case *orreryv1.InspectRequest_Ledger:
		q := target.Ledger
		reply.Error = checkLane(q.GetLane(), p.index, partitions)
		if reply.Error == nil {
			to := q.GetToUnixMicros()
			if to == 0 {
				to = input.MaxInstantMicros
			}
			limit := int(q.GetMaxRecords())
			if limit <= 0 || limit > schedule.MaxLedgerRead {
				limit = schedule.MaxLedgerRead
			}
			reply.Ledger, reply.LedgerContinuation, err = schedule.ReadLedger(p.store, q.GetLane(), q.GetScheduleId(),
				schedule.LedgerQuery{FromMicros: q.GetFromUnixMicros(), ToMicros: to, MaxRecords: limit, After: q.GetAfter()})
			reply.Found = len(reply.Ledger) > 0
		}
	case *orreryv1.InspectRequest_Saga:
		reply.Error = checkLane(target.Saga.GetLane(), p.index, partitions)
		if reply.Error == nil {
			reply.Saga, reply.Found, err = saga.Load(p.store, target.Saga.GetLane(), target.Saga.GetSagaId())
		}
	case *orreryv1.InspectRequest_Lane:
		reply.Error = checkLane(target.Lane.GetLane(), p.index, partitions)
		if reply.Error == nil {
			reply.Messages, reply.NextAfterId, err = queue.ListLane(p.store, target.Lane.GetLane(), target.Lane.GetAfterId(), int(target.Lane.GetMaxMessages()), queue.MaxLanePageBytes)
			reply.Found = err == nil
		}
	case *orreryv1.InspectRequest_ListSchedules:
		reply.ListedSchedules, reply.ListContinuation, err = listing.Schedules(p.store, target.ListSchedules, listing.MaxPageBytes)
		reply.Found = len(reply.ListedSchedules) > 0
	case *orreryv1.InspectRequest_ListSagas:
		reply.ListedSagas, reply.ListContinuation, err = listing.Sagas(p.store, target.ListSagas, listing.MaxPageBytes)
		reply.Found = len(reply.ListedSagas) > 0
	case *orreryv1.InspectRequest_Audit:
		reply.AuditRecords, reply.ListContinuation, err = audit.Read(p.store, target.Audit)
		reply.Found = len(reply.AuditRecords) > 0
	case *orreryv1.InspectRequest_Partition:
		reply.Found = true
		reply.Partition = &orreryv1.PartitionStatus{
			Partition:            int32(p.index),
			ActivationEpoch:      1,
			LoggedTimeUnixMicros: p.lastLogged,
			AppliedIndex:         p.applied,
			Silo:                 "clienttest",
		}
	default:
		reply.Error = orrery.Invalid("target", "is required").Proto()
	}
	if err == nil {
		err = grants.ProjectInspect(p.store, req.GetPrincipal(), reply)
	}
	if err != nil {
		return &orreryv1.InspectReply{Error: orrery.AsError(err).Proto()}
	}
	return reply
}

func checkLane(lane *orreryv1.Lane, p, partitions int) *orreryv1.Error {
	if err := input.Lane("lane", lane, true); err != nil {
		return orrery.AsError(err).Proto()
	}
	if got := route.Partition(lane, partitions); got != p {
		return orrery.Invalid("lane", "belongs to partition %d, not %d", got, p).Proto()
	}
	return nil
}
