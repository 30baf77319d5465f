package partition

import (
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// propose proposes a command's entry to the partition's Raft group; its reply goes out once
// the entry has applied on this replica (applied), or Unavailable when the proposal is
// refused or lost (the caller retries with the same command id, and the command inbox
// answers the receipt if the entry did apply).
func (g *grain) propose(ctx actor.Context, p *pending) {
	cmd, err := proto.MarshalOptions{Deterministic: true}.Marshal(&orreryv1.PartitionCommand{Batch: p.req.GetBatch(), Due: p.req.GetDue()})
	if err != nil {
		g.reply(ctx, p, errorReply(orrery.Wrap(orrery.CodeInternal, err, "partition %d: encode a command", g.partition)))
		return
	}
	proposal, err := g.cfg.Host.propose(g.partition, p.req.GetPrincipal(), cmd)
	if err != nil {
		g.reply(ctx, p, errorReply(err))
		return
	}
	p.proposal = proposal
	g.inflight[proposal.Index] = p
}

// applied takes a round of applied entries: the due head, floor and coordinator learn their
// due-index writes, the commands this activation proposed are answered, and parked receives
// whose queue they made visible are answered visible.
// Entries nobody here proposed (replayed after a restart, or proposed by an earlier
// activation) only update what the grain keeps.
func (g *grain) applied(ctx actor.Context, done *entriesApplied) {
	if g.state == nil {
		return
	}
	for _, w := range done.dueWrites {
		if w.value == nil {
			g.head.Delete(w.key)
		} else {
			g.head.Set(w.key, w.value)
		}
	}
	for _, p := range done.floors {
		g.readFloors.Adopt(p)
	}
	replied := false
	for _, r := range done.results {
		p := g.inflight[r.index]
		if p == nil || p.proposal.Term != r.term {
			continue
		}
		delete(g.inflight, r.index)
		g.reply(ctx, p, r.reply)
		replied = true
	}
	if replied {
		g.cfg.Failpoints.Hit(FailpointReplySent)
	}
	g.lowerDueFloor(done.minDueWritten)
	g.noticeDueWritten(done.minDueWritten)
	g.wakeWaiters(ctx)
}

// lost answers the commands whose proposals will not apply in their term with Unavailable.
func (g *grain) lost(ctx actor.Context, msg *proposalsLost) {
	if g.state == nil {
		return
	}
	for _, lost := range msg.proposals {
		p := g.inflight[lost.Index]
		if p == nil || p.proposal.Term != lost.Term {
			continue
		}
		delete(g.inflight, lost.Index)
		g.reply(ctx, p, &orreryv1.CommandReply{Error: orrery.Errorf(orrery.CodeUnavailable,
			"partition %d: the proposal of command %s lost its leader's term; retry it with the same command id", g.partition, describe(p)).Proto()})
	}
}

// hostFailed answers every command in flight Unavailable: the host failed, and none of them
// will be answered (the silo stops; callers retry with the same command ids).
func (g *grain) hostFailed(ctx actor.Context, err error) {
	unavailable := orrery.Wrap(orrery.CodeUnavailable, err, "partition %d: the silo's replicas failed", g.partition).Proto()
	for index, p := range g.inflight {
		delete(g.inflight, index)
		g.reply(ctx, p, &orreryv1.CommandReply{Error: unavailable})
	}
	g.openErr = err
}

func describe(p *pending) string {
	return p.req.GetPrincipal() + "/" + p.req.GetBatch().GetCommandId()
}
