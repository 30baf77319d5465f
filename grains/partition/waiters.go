package partition

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
)

// waitingReceive returns the Receive of a long-poll command: wait_micros > 0 and a batch whose
// only mutation is a Receive.
func waitingReceive(req *orreryv1.CommandRequest) *orreryv1.Receive {
	if req.GetWaitMicros() <= 0 || len(req.GetBatch().GetMutations()) != 1 {
		return nil
	}
	return req.GetBatch().GetMutations()[0].GetReceive()
}

// park answers a long-poll receive, or holds it until a message of its queue is visible or its
// wait ends. A waiting receive never applies (it leases nothing and writes nothing): it is
// answered without a receipt, CommandReply.visible saying whether a message is visible, and a
// caller that is still there sends the same batch again without waiting, which leases. park
// reports whether it took the command. A command whose id already has a receipt (a retry) is
// not taken: the apply path replays the receipt at once.
func (g *grain) park(ctx actor.Context, p *pending) bool {
	recv := waitingReceive(p.req)
	if recv == nil {
		return false
	}
	replayed, err := g.replayed(p)
	if err == nil && replayed {
		return false
	}
	if err == nil {
		if err := g.applier.CheckWaiting(p.req.GetPrincipal(), p.req.GetBatch(), g.readTime()); err != nil {
			g.reply(ctx, p, errorReply(err))
			return true
		}
	}
	visible := false
	if err == nil {
		visible, err = g.visible(recv)
	}
	switch {
	case err != nil:
		g.reply(ctx, p, g.waitFailed(err))
	case visible:
		g.reply(ctx, p, &orreryv1.CommandReply{Visible: true})
	case len(g.waiters) >= g.cfg.MaxWaiters:
		g.reply(ctx, p, &orreryv1.CommandReply{Error: orrery.Errorf(orrery.CodeUnavailable,
			"partition %d has %d long-poll receives waiting, the limit is %d", g.partition, len(g.waiters), g.cfg.MaxWaiters).Proto()})
	default:
		wait := min(time.Duration(p.req.GetWaitMicros())*time.Microsecond, g.cfg.MaxWait)
		p.deadline = g.cfg.Clock.Now().Add(wait)
		g.waiters = append(g.waiters, p)
		g.armWaitTimer(ctx)
	}
	return true
}

// replayed reports whether a command id already has a receipt.
func (g *grain) replayed(p *pending) (bool, error) {
	found := false
	err := g.state.View(func(r kv.Reader) error {
		var err error
		_, found, err = r.Get(keys.InboxKey(p.req.GetPrincipal(), p.req.GetBatch().GetCommandId()))
		return err
	})
	return found, err
}

// visible reports whether a message of a waiting receive's queue is visible at the read time,
// in what the groups applied so far wrote.
func (g *grain) visible(recv *orreryv1.Receive) (bool, error) {
	visible := false
	err := g.state.View(func(r kv.Reader) error {
		var err error
		visible, err = queue.VisibleAt(g.readFloors.Reader(r), recv.GetNamespace(), recv.GetQueue(), g.readTime())
		return err
	})
	return visible, err
}

// waitFailed is the reply of a waiting receive whose check could not read the store.
func (g *grain) waitFailed(err error) *orreryv1.CommandReply {
	return &orreryv1.CommandReply{Error: orrery.Wrap(orrery.CodeUnavailable, err, "partition %d could not check a waiting receive", g.partition).Proto()}
}

// wakeWaiters answers every waiter whose queue has a visible message (visible) or whose wait
// ended (not visible), and re-arms the timer for the rest. It runs after every applied group
// and when the timer fires; answering writes nothing.
func (g *grain) wakeWaiters(ctx actor.Context) {
	if g.state == nil || len(g.waiters) == 0 {
		return
	}
	now := g.cfg.Clock.Now()
	kept := g.waiters[:0]
	for _, p := range g.waiters {
		visible, err := g.visible(waitingReceive(p.req))
		switch {
		case err != nil:
			g.reply(ctx, p, g.waitFailed(err))
		case visible:
			g.reply(ctx, p, &orreryv1.CommandReply{Visible: true})
		case !now.Before(p.deadline):
			g.reply(ctx, p, &orreryv1.CommandReply{})
		default:
			kept = append(kept, p)
		}
	}
	clear(g.waiters[len(kept):])
	g.waiters = kept
	g.armWaitTimer(ctx)
}

// armWaitTimer sets one timer at the earliest of the waiters' deadlines and their queues' next
// visible instants.
func (g *grain) armWaitTimer(ctx actor.Context) {
	if g.waitTimer != nil {
		g.waitTimer.Stop()
		g.waitTimer = nil
	}
	if len(g.waiters) == 0 {
		return
	}
	earliest := g.waiters[0].deadline
	for _, p := range g.waiters {
		if p.deadline.Before(earliest) {
			earliest = p.deadline
		}
	}
	// Only a message visible before the earliest deadline moves the timer: the index is read
	// up to there, not on to its first entry, past every entry deleted since its compaction.
	_ = g.state.View(func(r kv.Reader) error {
		r = g.readFloors.Reader(r)
		for _, p := range g.waiters {
			recv := waitingReceive(p.req)
			if at, found, err := queue.NextVisibleBefore(r, recv.GetNamespace(), recv.GetQueue(), earliest.UnixMicro()); err == nil && found {
				if t := time.UnixMicro(at); t.Before(earliest) {
					earliest = t
				}
			}
		}
		return nil
	})
	self, root := ctx.Self(), ctx.ActorSystem().Root
	g.waitTimer = g.cfg.Clock.AfterFunc(max(earliest.Sub(g.cfg.Clock.Now()), time.Millisecond), func() { root.Send(self, &wakeWaiter{}) })
}
