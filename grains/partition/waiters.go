package partition

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

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

// park holds a long-poll receive until a message of its queue is visible or its wait ends,
// instead of applying it now. It reports whether the command was parked. A command whose id
// is already in the inbox (a retry) is never parked: its receipt is replayed at once.
func (g *grain) park(ctx actor.Context, p *pending) bool {
	recv := waitingReceive(p.req)
	if recv == nil || len(g.waiters)+g.offered >= g.cfg.MaxWaiters {
		return false
	}
	ready, err := g.receivable(p, recv)
	if err != nil || ready {
		return false // let the apply path report errors and deliver what is visible
	}
	wait := min(time.Duration(p.req.GetWaitMicros())*time.Microsecond, g.cfg.MaxWait)
	p.deadline = g.cfg.Now().Add(wait)
	g.waiters = append(g.waiters, p)
	g.armWaitTimer(ctx)
	return true
}

// receivable reports whether a waiting receive should apply now: a message of its queue is
// visible at the read time, or its command id already has a receipt.
func (g *grain) receivable(p *pending, recv *orreryv1.Receive) (bool, error) {
	now := g.readTime()
	ready := false
	err := g.store.ViewApplied(func(r kv.Reader) error {
		if _, found, err := r.Get(keys.InboxKey(p.req.GetPrincipal(), p.req.GetBatch().GetCommandId())); err != nil || found {
			ready = found
			return err
		}
		visible, err := queue.VisibleAt(g.readFloors.Reader(r), recv.GetNamespace(), recv.GetQueue(), now)
		ready = visible
		return err
	})
	return ready, err
}

// wakeWaiters moves every waiter whose queue has a visible message, or whose wait ended, to
// the pending queue, and re-arms the timer for the rest.
func (g *grain) wakeWaiters(ctx actor.Context) {
	if g.store == nil || len(g.waiters) == 0 {
		return
	}
	now := g.cfg.Now()
	kept := g.waiters[:0]
	woke := false
	for _, p := range g.waiters {
		ready, err := g.receivable(p, waitingReceive(p.req))
		if err != nil || ready || !now.Before(p.deadline) {
			g.pending = append(g.pending, p)
			woke = true
			continue
		}
		kept = append(kept, p)
	}
	clear(g.waiters[len(kept):])
	g.waiters = kept
	g.armWaitTimer(ctx)
	if woke {
		g.startCommit(ctx)
	}
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
	_ = g.store.ViewApplied(func(r kv.Reader) error {
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
	g.waitTimer = time.AfterFunc(max(time.Until(earliest), time.Millisecond), func() { root.Send(self, &wakeWaiter{}) })
}
