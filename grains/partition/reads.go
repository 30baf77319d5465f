package partition

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
	"github.com/orreryhq/orrery/grains/retained"
	"github.com/orreryhq/orrery/grains/saga"
	"github.com/orreryhq/orrery/grains/schedule"
	"github.com/orreryhq/orrery/persistence"
)

// Read bounds.
const (
	// dueHeadAhead is how far past the logged time a due head is loaded: the head is read
	// from the store again about this often when due entries keep coming.
	dueHeadAhead = 4_000_000 // µs
	// dueHeadEntries bounds a due head (about 200 bytes an entry).
	dueHeadEntries = 4096
	// MaxScanRefs bounds one ScanDue.
	MaxScanRefs = 4096
	// MaxInspectMessages bounds one lane page.
	MaxInspectMessages = 1000
)

// readTime is the logged time a read judges dueness by: what the next entry would get.
func (g *grain) readTime() int64 {
	return persistence.NextLoggedTime(g.state.Applied().LoggedTimeMicros, g.cfg.Clock.Now().UTC().UnixMicro())
}

// scanDue answers a coordinator's bounded due scan.
func (g *grain) scanDue(req *orreryv1.ScanDueRequest) *orreryv1.ScanDueReply {
	if g.state == nil {
		return &orreryv1.ScanDueReply{Error: g.unavailable().Proto()}
	}
	maxRefs := int(req.GetMaxRefs())
	if maxRefs <= 0 || maxRefs > MaxScanRefs {
		maxRefs = MaxScanRefs
	}
	now := g.readTime()
	res, err := g.scanHead(now, due.Budget{MaxRefs: maxRefs, After: req.GetAfter(), FromMicros: g.dueFloor})
	if err != nil {
		return &orreryv1.ScanDueReply{Error: orrery.AsError(err).Proto()}
	}
	g.learnFromScan(res)
	return &orreryv1.ScanDueReply{
		Refs: res.Refs, More: res.More, Continuation: res.Continuation, NextDueAtUnixMicros: res.NextDueAtMicros,
		LoggedTimeUnixMicros: now, ActivationEpoch: g.term(),
	}
}

// scanHead scans the due head at now within budget, loading the head from the store when it
// does not cover now, and reading the store past it for a backlog beyond its bound. A scan
// from the due floor raises it.
func (g *grain) scanHead(now int64, budget due.Budget) (*due.Result, error) {
	res, covered, err := g.head.Scan(now, budget)
	if !covered && !g.head.Covers(now) {
		if err := g.state.View(func(r kv.Reader) error { return g.head.Load(r, g.dueFloor, now+dueHeadAhead) }); err != nil {
			g.head.Reset()
			g.log.Warn("partition could not load its due head", "err", err)
		}
		res, covered, err = g.head.Scan(now, budget)
	}
	if !covered { // a backlog beyond the head's bound: read the store
		err = g.state.View(func(r kv.Reader) error {
			var err error
			res, err = due.ScanDue(r, now, budget)
			return err
		})
	}
	if err == nil && budget.After == nil {
		g.raiseDueFloor(res)
	}
	return res, err
}

// nextDue reads the earliest due instant (zero when the index is empty), starting at the due
// floor, and raises the floor to it.
func (g *grain) nextDue() (int64, error) {
	var next int64
	err := g.state.View(func(r kv.Reader) error {
		res, err := due.ScanDue(r, input.MaxInstantMicros, due.Budget{MaxRefs: 1, FromMicros: g.dueFloor})
		if err == nil && len(res.Refs) == 1 {
			next = res.Refs[0].GetDueAtUnixMicros()
		}
		return err
	})
	if err == nil {
		if next > 0 {
			g.dueFloor = next
		} else {
			g.dueFloor = input.MaxInstantMicros // empty: the next entry written lowers it
		}
	}
	return next, err
}

// lowerDueFloor accounts for due-index entries an apply wrote.
func (g *grain) lowerDueFloor(minWritten int64) {
	if minWritten > 0 && g.dueFloor > 0 && minWritten < g.dueFloor {
		g.dueFloor = minWritten
	}
}

// raiseDueFloor takes a due scan that began at the due floor (no continuation): its first
// entry is the partition's earliest and raises the floor, so the next scans and head loads do
// not step over the entries emitted since. An entry a later group writes lowers it again
// (lowerDueFloor).
func (g *grain) raiseDueFloor(res *due.Result) {
	first := res.NextDueAtMicros
	if len(res.Refs) > 0 {
		first = res.Refs[0].GetDueAtUnixMicros()
	}
	switch {
	case first > 0:
		g.dueFloor = max(g.dueFloor, first)
	case !res.More:
		g.dueFloor = input.MaxInstantMicros // empty: the next entry written lowers it
	}
}

// learnFromScan takes what a coordinator's due scan answered: the coordinator wakes at or
// before the scan's next-due instant, which bounds what a later notice must undercut; a
// partial scan (more refs follow) tells nothing yet.
func (g *grain) learnFromScan(res *due.Result) {
	g.dueTold = input.MaxInstantMicros
	if !res.More && res.NextDueAtMicros > 0 {
		g.dueTold = res.NextDueAtMicros
	}
}

// reportNextDue reads the partition's earliest due instant and tells the due coordinator (on
// activation, when nothing is known of what the coordinator knows).
func (g *grain) reportNextDue() {
	next, err := g.nextDue()
	if err != nil {
		g.log.Warn("partition could not read its next due instant", "err", err)
		g.dueTold = 0
		return
	}
	g.dueTold = next
	if next == 0 {
		g.dueTold = input.MaxInstantMicros
	}
	g.cfg.OnNextDue(&orreryv1.NextDueNotice{Partition: int32(g.partition), NextDueAtUnixMicros: next, ActivationEpoch: g.term()})
}

// noticeDueWritten tells the due coordinator of a commit's earliest written due entry when it
// is earlier than what the coordinator wakes for (or that is unknown). It needs no read: the
// entry itself is the news. Later entries are not reported (the coordinator's scans and emit
// results carry them), which saves a due-index seek on every commit.
func (g *grain) noticeDueWritten(minWritten int64) {
	if g.dueTold == 0 {
		g.reportNextDue()
		return
	}
	if minWritten <= 0 || minWritten >= g.dueTold {
		return
	}
	g.dueTold = minWritten
	g.cfg.OnNextDue(&orreryv1.NextDueNotice{Partition: int32(g.partition), NextDueAtUnixMicros: minWritten, ActivationEpoch: g.term()})
}

// inspect answers one bounded inspection read.
func (g *grain) inspect(req *orreryv1.InspectRequest) *orreryv1.InspectReply {
	if g.state == nil {
		return &orreryv1.InspectReply{Error: g.unavailable().Proto()}
	}
	reply := &orreryv1.InspectReply{}
	err := g.state.View(func(r kv.Reader) error {
		switch t := req.GetTarget().(type) {
		case *orreryv1.InspectRequest_Schedule:
			if err := input.Lane("lane", t.Schedule.GetLane(), false); err != nil {
				return err
			}
			if err := input.UUID("schedule_id", t.Schedule.GetScheduleId()); err != nil {
				return err
			}
			rec, found, err := schedule.Load(r, t.Schedule.GetLane(), t.Schedule.GetScheduleId())
			reply.Found, reply.Schedule = found, rec
			if err != nil || !found {
				return err
			}
			reply.Inspection, err = schedule.Inspect(r, t.Schedule.GetLane(), t.Schedule.GetScheduleId(), g.readTime())
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
		case *orreryv1.InspectRequest_Partition:
			counters, err := retained.Load(r)
			if err != nil {
				return err
			}
			enqueued, err := queue.Sequence(r)
			if err != nil {
				return err
			}
			next, err := g.nextDue()
			mark := g.state.Applied()
			reply.Found = true
			reply.Partition = &orreryv1.PartitionStatus{
				Partition: int32(g.partition), ActivationEpoch: g.term(), LoggedTimeUnixMicros: mark.LoggedTimeMicros,
				AppliedIndex: mark.Index, NextDueAtUnixMicros: next, PendingCommands: uint32(g.queued()),
				RetainedRecords: counters.GetRecords(), RetainedBytes: counters.GetBytes(), Silo: g.silo,
				Partitions: int32(g.partitions()), EnqueuedTotal: enqueued,
				CommandLimits: cluster.CommandLimits(g.applier.Limits),
			}
			return err
		default:
			return orrery.Invalid("target", "is required (schedule, saga, lane, ledger or partition)")
		}
	})
	if err != nil {
		return &orreryv1.InspectReply{Error: orrery.AsError(err).Proto()}
	}
	return reply
}

// readConfirmed answers an inspection read from the state once the host confirms this replica
// may (Host.confirmRead): at once for a sole voter, otherwise after a quorum confirmed its
// leadership, off the actor's goroutine, so the grain goes on meanwhile.
func (g *grain) readConfirmed(ctx actor.Context, req *orreryv1.InspectRequest) {
	if g.state == nil || !g.cfg.Host.shared {
		ctx.Respond(g.inspect(req))
		return
	}
	host, n, sender := g.cfg.Host, g.partition, ctx.Sender()
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() { root.Send(self, &confirmedRead{req: req, sender: sender, err: host.confirmRead(n)}) }()
}

// answerRead answers a confirmed inspection read, or its confirmation's failure.
func (g *grain) answerRead(ctx actor.Context, r *confirmedRead) {
	reply := &orreryv1.InspectReply{}
	if r.err != nil {
		reply.Error = orrery.Wrap(orrery.CodeUnavailable, r.err, "partition %d: this replica cannot confirm it leads; read from the leader", g.partition).Proto()
	} else {
		reply = g.inspect(r.req)
	}
	if r.sender != nil {
		ctx.Send(r.sender, reply)
	}
}
