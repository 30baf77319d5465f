package engine

import (
	"maps"
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
// wait ends. A waiting receive is proposed as it is (lease) once its queue has a visible
// message, and answered with its receipt when it applies; a wait that ends first is answered
// with neither receipt nor error, having written nothing. park reports whether it took the
// command. A command whose id already has a receipt (a retry), or whose waiting receive is
// being proposed, is not taken: the apply path replays the receipt. One that its caller
// abandoned (abandon) is answered at once, leasing nothing.
func (e *Engine) park(now time.Time, p *pending) bool {
	recv := waitingReceive(p.req)
	if recv == nil {
		return false
	}
	key := waitKey(p.req)
	if e.leasing[key] > 0 {
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
		if e.abandonedAt(now, key) {
			e.reply(now, p, &orreryv1.CommandReply{})
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
		e.lease(now, p)
	case len(e.waiters) >= e.cfg.MaxWaiters:
		e.reply(now, p, &orreryv1.CommandReply{Error: orrery.Errorf(orrery.CodeUnavailable,
			"partition %d has %d long-poll receives waiting, the limit is %d", e.cfg.Partition, len(e.waiters), e.cfg.MaxWaiters).Proto()})
	default:
		wait := min(time.Duration(p.req.GetWaitMicros())*time.Microsecond, e.cfg.MaxWait)
		p.deadline = now.Add(wait)
		p.queue = string(keys.QueuePrefix(recv.GetNamespace(), recv.GetQueue()))
		e.waiters = append(e.waiters, p)
		e.armWaitTimer(now)
	}
	return true
}

// waitKey names a waiting receive by its principal and command id: what an abandon matches.
func waitKey(req *orreryv1.CommandRequest) string {
	return req.GetPrincipal() + "\x00" + req.GetBatch().GetCommandId()
}

// lease proposes a waiting receive whose queue has a visible message: its entry leases, and
// its receipt answers the caller. Until it is answered, a retry of the same command is
// proposed too (the inbox replays the receipt) instead of parked.
func (e *Engine) lease(now time.Time, p *pending) {
	p.leasing, p.woken = true, now
	e.leasing[waitKey(p.req)]++
	e.propose(now, p)
}

// leased forgets a proposed waiting receive once it is answered.
func (e *Engine) leased(p *pending) {
	key := waitKey(p.req)
	if e.leasing[key] <= 1 {
		delete(e.leasing, key)
		return
	}
	e.leasing[key]--
}

// abandon takes a caller's abandon of its waiting receive (CommandRequest.abandon): the parked
// receives of the same principal and command id are dropped and answered with nothing, and a
// waiting request with them that arrives within MaxWait (one still in transit) is answered
// with nothing, not parked. When the receive is being proposed or has applied, the abandon
// itself is proposed, so that the inbox answers it with the receipt and the caller releases
// what it leased; otherwise it is answered with neither receipt nor error.
func (e *Engine) abandon(now time.Time, p *pending) {
	if waitingReceive(&orreryv1.CommandRequest{WaitMicros: 1, Batch: p.req.GetBatch()}) == nil {
		e.reply(now, p, ErrorReply(orrery.Invalid("abandon", "is only for a batch whose only mutation is a Receive")))
		return
	}
	key := waitKey(p.req)
	e.rememberAbandoned(now, key)
	kept := e.waiters[:0]
	for _, w := range e.waiters {
		if waitKey(w.req) == key {
			e.reply(now, w, &orreryv1.CommandReply{})
			continue
		}
		kept = append(kept, w)
	}
	clear(e.waiters[len(kept):])
	e.waiters = kept
	e.armWaitTimer(now)
	replayed, err := e.replayed(p)
	switch {
	case err != nil:
		e.reply(now, p, e.waitFailed(err))
	case e.leasing[key] > 0 || replayed:
		e.propose(now, p)
	default:
		e.reply(now, p, &orreryv1.CommandReply{})
	}
}

// rememberAbandoned keeps key among the abandoned waiting receives until MaxWait from now,
// at most MaxWaiters of them: beyond it the one that ends first is forgotten.
func (e *Engine) rememberAbandoned(now time.Time, key string) {
	if len(e.abandoned) >= e.cfg.MaxWaiters {
		first, firstEnd := "", time.Time{}
		for k, end := range e.abandoned {
			if !now.Before(end) {
				delete(e.abandoned, k)
				continue
			}
			if first == "" || end.Before(firstEnd) {
				first, firstEnd = k, end
			}
		}
		if len(e.abandoned) >= e.cfg.MaxWaiters {
			delete(e.abandoned, first)
		}
	}
	e.abandoned[key] = now.Add(e.cfg.MaxWait)
}

// abandonedAt reports whether key's waiting receive was abandoned less than MaxWait ago.
func (e *Engine) abandonedAt(now time.Time, key string) bool {
	end, ok := e.abandoned[key]
	if ok && !now.Before(end) {
		delete(e.abandoned, key)
		return false
	}
	return ok
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

// wakeWaiters proposes every waiter whose queue has a visible message (lease), answers those
// whose wait ended, and re-arms the wait timer for the rest. It runs after every Applied event
// and when the timer fires. A waiter whose queue's hint says nothing is visible yet is not
// read for.
func (e *Engine) wakeWaiters(now time.Time) {
	if e.stopped || len(e.waiters) == 0 {
		return
	}
	read := e.readTime(now)
	kept := e.waiters[:0]
	for _, p := range e.waiters {
		recv := waitingReceive(p.req)
		visible, err := false, error(nil)
		if h, ok := e.nextVisible[p.queue]; !ok || h.visibleBy(read) {
			visible, err = e.visible(now, recv)
		}
		switch {
		case err != nil:
			e.reply(now, p, e.waitFailed(err))
		case visible:
			e.lease(now, p)
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

// visibleHint is what the engine knows of when a waited queue next has a visible message: its
// first visibility-index entry is at at (found), or it has none before bound. An apply that
// sets an earlier entry lowers it (visibleSet); one that deletes the entry (a lease, an ack)
// leaves it early, never late, and once its instant passes the queue is read again.
type visibleHint struct {
	at    int64
	found bool
	bound int64
}

// visibleBy reports whether the hint allows a message visible at read: it must be read for.
func (h visibleHint) visibleBy(read int64) bool {
	if h.found {
		return h.at <= read
	}
	return h.bound <= read
}

// visibleSet lowers the hint of a waited queue to a visibility entry an apply set.
func (e *Engine) visibleSet(v VisibleSet) {
	h, ok := e.nextVisible[v.Queue]
	switch {
	case !ok:
	case h.found && v.AtMicros < h.at, !h.found && v.AtMicros < h.bound:
		e.nextVisible[v.Queue] = visibleHint{at: v.AtMicros, found: true, bound: h.bound}
	}
}

// minWaitTimer is the shortest wait the timer is armed for, so a message visible in the past
// of the read time (a clock step) cannot spin it.
const minWaitTimer = time.Millisecond

// armWaitTimer sets the wait timer at the earliest of the waiters' deadlines and their queues'
// next visible instants, or disarms it when nobody waits. A queue's next visible instant comes
// from its hint; the visibility index is read only for a queue without one, or whose hinted
// instant has passed, or whose hint does not reach the earliest deadline.
func (e *Engine) armWaitTimer(now time.Time) {
	if len(e.waiters) == 0 {
		clear(e.nextVisible)
		e.arm(WaitTimer, time.Time{})
		return
	}
	earliest := e.waiters[0].deadline
	for _, p := range e.waiters {
		if p.deadline.Before(earliest) {
			earliest = p.deadline
		}
	}
	if len(e.nextVisible) > len(e.waiters) { // hints of queues nobody waits on any more
		waited := make(map[string]bool, len(e.waiters))
		for _, p := range e.waiters {
			waited[p.queue] = true
		}
		maps.DeleteFunc(e.nextVisible, func(q string, _ visibleHint) bool { return !waited[q] })
	}
	read, limit := e.readTime(now), earliest.UnixMicro()
	stale := func(h visibleHint, ok bool) bool {
		return !ok || (h.found && h.at <= read) || (!h.found && h.bound < limit)
	}
	for _, p := range e.waiters {
		if h, ok := e.nextVisible[p.queue]; stale(h, ok) {
			// Only a message visible before the earliest deadline moves the timer: the index is
			// read up to there, not on to its first entry, past every entry deleted since its
			// compaction.
			_ = e.state.View(func(r kv.Reader) error {
				e.readHints(e.readFloors.Reader(r), limit, stale)
				return nil
			})
			break
		}
	}
	for _, p := range e.waiters {
		h := e.nextVisible[p.queue]
		if t := time.UnixMicro(h.at); h.found && t.Before(earliest) {
			earliest = t
		}
	}
	e.arm(WaitTimer, maxTime(earliest, now.Add(minWaitTimer)))
}

// readHints reads the visibility index of every waited queue whose hint is stale, up to
// limit, into its hint (a queue whose read fails is left without one).
func (e *Engine) readHints(r kv.Reader, limit int64, stale func(visibleHint, bool) bool) {
	for _, p := range e.waiters {
		recv, q := waitingReceive(p.req), p.queue
		if h, ok := e.nextVisible[q]; !stale(h, ok) {
			continue
		}
		at, found, err := queue.NextVisibleBefore(r, recv.GetNamespace(), recv.GetQueue(), limit)
		if err != nil {
			delete(e.nextVisible, q)
			continue
		}
		e.nextVisible[q] = visibleHint{at: at, found: found, bound: limit}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
