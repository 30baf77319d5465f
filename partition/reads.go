package partition

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// confirmedRead is an inspection read whose leadership check has ended (err nil: answer it
// from the state).
type confirmedRead struct {
	req      *orreryv1.InspectRequest
	deadline time.Time // the read's deadline, from its budget (zero: none)
	sender   *actor.PID
	err      error
}

// readConfirmed answers an inspection read from the state once the host confirms this replica
// may (Host.confirmRead): at once for a sole voter, otherwise after a quorum confirmed its
// leadership, off the actor's goroutine, so the grain goes on meanwhile.
func (g *grain) readConfirmed(ctx actor.Context, req *orreryv1.InspectRequest) {
	var deadline time.Time
	if b := req.GetBudgetMicros(); b > 0 {
		deadline = g.cfg.Clock.Now().Add(time.Duration(b) * time.Microsecond)
	}
	if g.engine == nil || g.cfg.Host.soleVoter(g.partition) {
		ctx.Respond(g.inspect(req, deadline))
		return
	}
	host, n, sender := g.cfg.Host, g.partition, ctx.Sender()
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		root.Send(self, &confirmedRead{req: req, deadline: deadline, sender: sender, err: host.confirmRead(n)})
	}()
}

// answerRead answers a confirmed inspection read, or its confirmation's failure.
func (g *grain) answerRead(ctx actor.Context, r *confirmedRead) {
	reply := &orreryv1.InspectReply{}
	if r.err != nil {
		reply.Error = orrery.Wrap(orrery.CodeUnavailable, r.err, "partition %d: this replica cannot confirm it leads; read from the leader", g.partition).Proto()
	} else {
		reply = g.inspect(r.req, r.deadline)
	}
	if r.sender != nil {
		ctx.Send(r.sender, reply)
	}
}

// inspect answers one inspection read from the engine (DeadlineExceeded once its deadline,
// zero for none, has passed), adding this silo's fields to a
// partition status and its due coordinator's report to a schedule inspection.
func (g *grain) inspect(req *orreryv1.InspectRequest, deadline time.Time) *orreryv1.InspectReply {
	if g.engine == nil {
		return &orreryv1.InspectReply{Error: g.unavailable().Proto()}
	}
	now := g.cfg.Clock.Now()
	if !deadline.IsZero() && !now.Before(deadline) {
		return &orreryv1.InspectReply{Error: orrery.Errorf(orrery.CodeDeadlineExceeded,
			"partition %d came to the read %v after its caller's budget of %v ran out: it answers nothing late",
			g.partition, now.Sub(deadline).Round(time.Microsecond), time.Duration(req.GetBudgetMicros())*time.Microsecond).Proto()}
	}
	reply := g.engine.Inspect(now, req)
	g.cfg.Host.inspectDenied(g.partition, req, reply)
	if in := reply.GetInspection(); in != nil && g.cfg.Liveness != nil {
		in.Liveness = g.cfg.Liveness(g.partition, orreryv1.DueKind_DUE_KIND_SCHEDULE, req.GetSchedule().GetLane(), req.GetSchedule().GetScheduleId())
	}
	if status := reply.GetPartition(); status != nil {
		status.Silo = g.silo
		status.CommandLimits = g.cfg.Host.machines[g.partition].Limits().CommandLimits()
		status.LastCheck = g.cfg.Host.Consistency(g.partition).Proto()
	}
	return reply
}
