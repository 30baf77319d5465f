package engine

import (
	"time"

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
func (e *Engine) park(now time.Time, p *pending) bool {
	recv := waitingReceive(p.req)
	if recv == nil {
		return false
	}
	replayed, err := e.replayed(p)
	if err == nil && replayed {
		return false
	}
	if err == nil {
		if refused := e.state.View(func(r kv.Reader) error {
			return e.cfg.Applier.CheckWaiting(r, p.req.GetPrincipal(), p.req.GetBatch(), e.readTime(now))
		}); refused != nil {
			e.reply(now, p, ErrorReply(refused))
			return true
		}
	}
	visible := false
	if err == nil {
		visible, err = e.visible(now, recv)
	}
	switch {
	case err != nil:
		e.reply(now, p, e.waitFailed(err))
	case visible:
		e.reply(now, p, &orreryv1.CommandReply{Visible: true})
	case len(e.waiters) >= e.cfg.MaxWaiters:
		e.reply(now, p, &orreryv1.CommandReply{Error: orrery.Errorf(orrery.CodeUnavailable,
			"partition %d has %d long-poll receives waiting, the limit is %d", e.cfg.Partition, len(e.waiters), e.cfg.MaxWaiters).Proto()})
	default:
		wait := min(time.Duration(p.req.GetWaitMicros())*time.Microsecond, e.cfg.MaxWait)
		p.deadline = now.Add(wait)
		e.waiters = append(e.waiters, p)
		e.armWaitTimer(now)
	}
	return true
}

// replayed reports whether a command id already has a receipt.
func (e *Engine) replayed(p *pending) (bool, error) {
	found := false
	err := e.state.View(func(r kv.Reader) error {
		var err error
		_, found, err = r.Get(keys.InboxKey(p.req.GetPrincipal(), p.req.GetBatch().GetCommandId()))
		return err
	})
	return found, err
}

// visible reports whether a message of a waiting receive's queue is visible at the read time,
// in what the entries applied so far wrote.
func (e *Engine) visible(now time.Time, recv *orreryv1.Receive) (bool, error) {
	visible := false
	err := e.state.View(func(r kv.Reader) error {
		var err error
		visible, err = queue.VisibleAt(e.readFloors.Reader(r), recv.GetNamespace(), recv.GetQueue(), e.readTime(now))
		return err
	})
	return visible, err
}

// waitFailed is the reply of a waiting receive whose check could not read the state.
func (e *Engine) waitFailed(err error) *orreryv1.CommandReply {
	return &orreryv1.CommandReply{Error: orrery.Wrap(orrery.CodeUnavailable, err, "partition %d could not check a waiting receive", e.cfg.Partition).Proto()}
}

// wakeWaiters answers every waiter whose queue has a visible message (visible) or whose wait
// ended (not visible), and re-arms the wait timer for the rest. It runs after every Applied
// event and when the timer fires; answering writes nothing.
func (e *Engine) wakeWaiters(now time.Time) {
	if e.stopped || len(e.waiters) == 0 {
		return
	}
	kept := e.waiters[:0]
	for _, p := range e.waiters {
		visible, err := e.visible(now, waitingReceive(p.req))
		switch {
		case err != nil:
			e.reply(now, p, e.waitFailed(err))
		case visible:
			e.reply(now, p, &orreryv1.CommandReply{Visible: true})
		case !now.Before(p.deadline):
			e.reply(now, p, &orreryv1.CommandReply{})
		default:
			kept = append(kept, p)
		}
	}
	clear(e.waiters[len(kept):])
	e.waiters = kept
	e.armWaitTimer(now)
}

// minWaitTimer is the shortest wait the timer is armed for, so a message visible in the past
// of the read time (a clock step) cannot spin it.
const minWaitTimer = time.Millisecond

// armWaitTimer sets the wait timer at the earliest of the waiters' deadlines and their queues'
// next visible instants, or disarms it when nobody waits.
func (e *Engine) armWaitTimer(now time.Time) {
	if len(e.waiters) == 0 {
		e.arm(WaitTimer, time.Time{})
		return
	}
	earliest := e.waiters[0].deadline
	for _, p := range e.waiters {
		if p.deadline.Before(earliest) {
			earliest = p.deadline
		}
	}
	// Only a message visible before the earliest deadline moves the timer: the index is read
	// up to there, not on to its first entry, past every entry deleted since its compaction.
	_ = e.state.View(func(r kv.Reader) error {
		r = e.readFloors.Reader(r)
		for _, p := range e.waiters {
			recv := waitingReceive(p.req)
			if at, found, err := queue.NextVisibleBefore(r, recv.GetNamespace(), recv.GetQueue(), earliest.UnixMicro()); err == nil && found {
				if t := time.UnixMicro(at); t.Before(earliest) {
					earliest = t
				}
			}
		}
		return nil
	})
	e.arm(WaitTimer, maxTime(earliest, now.Add(minWaitTimer)))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
