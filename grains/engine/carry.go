package engine

import (
	"google.golang.org/protobuf/proto"

	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/keys"
)

// MaxWaitingPerEntry bounds the parked receives one entry carries (PartitionCommand.waiting),
// so that what they lease stays a small part of one apply transaction.
const MaxWaitingPerEntry = 4

// carry moves up to MaxWaitingPerEntry parked receives into the entry of p when it may make
// a message of their queues visible (fedQueues), from apply version
// batch.ApplyVersionWaitingInEntry: the entry applies each after its batch, leasing when its
// queue then has a visible message (ApplyEntry), so such a message is leased one entry
// sooner than when the Applied event wakes the receive and proposes it. A carried receive
// counts as leasing (a retry of it is proposed, not parked) until its entry answers it or
// parks it again. Receives whose wait has ended, or marked solo, stay parked.
func (e *Engine) carry(now time.Time, p *pending, cmd *orreryv1.PartitionCommand) {
	if len(e.waiters) == 0 || e.applyVersion < batch.ApplyVersionWaitingInEntry || p.leasing {
		return
	}
	anyQueue, queues := fedQueues(p.req)
	if !anyQueue && len(queues) == 0 {
		return
	}
	kept := e.waiters[:0]
	for _, w := range e.waiters {
		if len(p.attached) == MaxWaitingPerEntry || w.solo || !now.Before(w.deadline) || (!anyQueue && !queues[w.queue]) {
			kept = append(kept, w)
			continue
		}
		w.leasing, w.woken = true, now
		e.leasing[waitKey(w.req)]++
		p.attached = append(p.attached, w)
		cmd.Waiting = append(cmd.Waiting, &orreryv1.WaitingReceive{Principal: w.req.GetPrincipal(), Batch: w.req.GetBatch()})
	}
	clear(e.waiters[len(kept):])
	e.waiters = kept
	e.carried += len(p.attached)
	if len(p.attached) > 0 {
		e.armWaitTimer(now)
	}
}

// fedQueues names the queues (by keys.QueuePrefix) whose messages the entry of req may make
// visible: its enqueues' and releases' queues, or any queue (anyQueue) for a due command or an
// EmitOccurrences, whose queues are in the schedules it emits.
func fedQueues(req *orreryv1.CommandRequest) (anyQueue bool, queues map[string]bool) {
	if req.GetDue() {
		return true, nil
	}
	for _, m := range req.GetBatch().GetMutations() {
		var lane *orreryv1.Lane
		switch k := m.GetKind().(type) {
		case *orreryv1.Mutation_EmitOccurrences:
			return true, nil
		case *orreryv1.Mutation_Enqueue:
			lane = k.Enqueue.GetLane()
		case *orreryv1.Mutation_Release:
			lane = k.Release.GetLane()
		default:
			continue
		}
		if queues == nil {
			queues = map[string]bool{}
		}
		queues[string(keys.QueuePrefix(lane.GetNamespace(), lane.GetQueue()))] = true
	}
	return false, queues
}

// uncarry parks again the receives p's entry was to carry, when that entry is not in the log
// (its proposal was refused, or did not encode). solo marks them never to be carried again.
func (e *Engine) uncarry(now time.Time, p *pending, solo bool) {
	e.carried -= len(p.attached)
	for _, w := range p.attached {
		e.repark(now, w, solo)
	}
	p.attached = nil
}

// repark parks a carried receive again that its entry did not apply, unless its caller
// abandoned it meanwhile (answered with nothing). The Applied event or the wait timer that
// follows judges it as any parked receive: visible, or its wait ended.
func (e *Engine) repark(now time.Time, w *pending, solo bool) {
	e.leased(w)
	w.leasing, w.solo = false, w.solo || solo
	if e.abandonedAt(now, waitKey(w.req)) {
		e.reply(now, w, &orreryv1.CommandReply{})
		return
	}
	e.waiters = append(e.waiters, w)
}

// replyCarrying answers p and the receives its entry carries with r: its entry's outcome is
// unknown to the engine (lost, stopped, failed), so each caller retries with its command id
// and gets the receipt if the entry did apply.
func (e *Engine) replyCarrying(now time.Time, p *pending, r *orreryv1.CommandReply) {
	e.carried -= len(p.attached)
	for _, w := range p.attached {
		e.reply(now, w, proto.CloneOf(r))
	}
	p.attached = nil
	e.reply(now, p, r)
}
