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
	cmd, err := proto.MarshalOptions{Deterministic: true}.Marshal(&orreryv1.PartitionCommand{Batch: p.req.GetBatch(), Own: p.own != nil})
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
// due-index writes, the commands this activation proposed are answered, parked receives whose
// queue they made visible are answered visible, and the next own due batch is proposed.
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
		if p.own != nil {
			p.ownReceipt = r.ownReceipt
			g.ownLanded(p)
			g.ownApplied(p, r.reply)
			continue
		}
		g.reply(ctx, p, r.reply)
		replied = true
	}
	if replied {
		g.cfg.Failpoints.Hit(FailpointReplySent)
	}
	g.lowerDueFloor(done.minDueWritten)
	g.noticeDueWritten(done.minDueWritten)
	g.wakeWaiters(ctx)
	g.emitDue(ctx)
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
		if p.own != nil {
			g.ownLanded(p)
			continue
		}
		g.reply(ctx, p, &orreryv1.CommandReply{Error: orrery.Errorf(orrery.CodeUnavailable,
			"partition %d: the proposal of command %s lost its leader's term; retry it with the same command id", g.partition, describe(p)).Proto()})
	}
	g.emitDue(ctx)
}

// hostFailed answers every command in flight Unavailable: the host failed, and none of them
// will be answered (the silo stops; callers retry with the same command ids).
func (g *grain) hostFailed(ctx actor.Context, err error) {
	unavailable := orrery.Wrap(orrery.CodeUnavailable, err, "partition %d: the silo's replicas failed", g.partition).Proto()
	for index, p := range g.inflight {
		delete(g.inflight, index)
		if p.own != nil {
			g.ownLanded(p)
			continue
		}
		g.reply(ctx, p, &orreryv1.CommandReply{Error: unavailable})
	}
	g.openErr = err
}

// maxOwnInflight bounds the own due batches in flight: the next one is proposed while the one
// before commits and applies, so a backlog is emitted without waiting for each batch's apply.
const maxOwnInflight = 2

// emitDue proposes the partition's own due batches (Config.OwnEmission) while refs not in a
// batch in flight are due and fewer than maxOwnInflight are in flight, and arms the due timer
// at the next due instant when none is.
func (g *grain) emitDue(ctx actor.Context) {
	if !g.cfg.OwnEmission || g.state == nil || g.stopping {
		return
	}
	for g.ownInflight < maxOwnInflight {
		own := g.ownDue(g.readTime())
		if own == nil {
			break
		}
		if g.dueTimer != nil {
			g.dueTimer.Stop()
			g.dueTimer = nil
		}
		g.propose(ctx, own)
		if own.proposal.Index == 0 { // refused (answered already): try again at the next tick
			break
		}
		g.ownInflight++
		if g.ownFlying == nil {
			g.ownFlying = map[string]struct{}{}
		}
		for _, ref := range own.own {
			g.ownFlying[ownRefKey(ref)] = struct{}{}
		}
	}
	g.armDueTimer(ctx)
}

// ownLanded takes an own due batch out of flight: applied, lost or failed.
func (g *grain) ownLanded(p *pending) {
	g.ownInflight--
	for _, ref := range p.own {
		delete(g.ownFlying, ownRefKey(ref))
	}
}

// ownRefKey names a due ref's record: its kind, lane and id.
func ownRefKey(ref *orreryv1.DueRef) string {
	l := ref.GetLane()
	return ref.GetKind().String() + "\x00" + l.GetNamespace() + "\x00" + l.GetQueue() + "\x00" + l.GetKey() + "\x00" + ref.GetId()
}

func describe(p *pending) string {
	return p.req.GetPrincipal() + "/" + p.req.GetBatch().GetCommandId()
}
