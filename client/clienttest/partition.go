package clienttest

import (
	"context"
	"sync"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
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

// command applies req, first waiting as a long poll when req is a waiting receive.
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
		ready, nextVisibleMicros := t.receiveReady(p, req, receive)
		if ready || !time.Now().Before(deadline) {
			defer p.mu.Unlock()
			return t.apply(p, req), nil
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

// receiveReady reports whether a waiting receive should apply now: it would return messages,
// or fail, or it is a replay of an answered command — what a trial application on a discarded
// buffer shows — or the queue has due entries that the receive would only sweep. Otherwise it
// also returns when the queue's next message becomes visible or lease ends (0 when none is
// known). The caller holds p.mu.
func (t *Transport) receiveReady(p *partition, req *orreryv1.CommandRequest, m *orreryv1.Receive) (bool, int64) {
	trial, err := t.applier.ApplyBatch(kv.NewBuffer(p.store), req.GetPrincipal(), req.GetBatch(), t.nextLogged(p))
	if err != nil || trial.Replayed || trial.Receipt.GetError() != nil {
		return true, 0
	}
	if r := trial.Receipt.GetResults()[0]; r.GetError() != nil || len(r.GetReceive().GetMessages()) > 0 {
		return true, 0
	}
	at, found, err := queue.NextVisibleAt(p.store, m.GetNamespace(), m.GetQueue())
	switch {
	case err != nil || !found:
		return false, 0
	case at <= t.nextLogged(p):
		// Due index entries the receive would only sweep (expired or dead-lettered messages):
		// apply, so the sweep commits, rather than spin on them.
		return true, 0
	default:
		return false, at
	}
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
	out, err := t.applier.ApplyBatch(writes, req.GetPrincipal(), req.GetBatch(), logged)
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
			reply.Messages, reply.NextAfterId, err = queue.ListLane(p.store, target.Lane.GetLane(), target.Lane.GetAfterId(), int(target.Lane.GetMaxMessages()))
			reply.Found = err == nil
		}
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
