package engine

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/schedule"
)

// admit proposes a command or parks a long-poll receive, answering at once when the engine
// stopped, the pending bound is reached or the command is on the wrong path (checkPath).
func (e *Engine) admit(now time.Time, c Command) {
	p := &pending{req: c.Request, from: c.From, admitted: now}
	if e.stopped {
		e.reply(now, p, &orreryv1.CommandReply{Error: orrery.Errorf(orrery.CodeUnavailable, "partition %d is stopping", e.cfg.Partition).Proto()})
		return
	}
	if e.Queued() >= e.cfg.MaxPending {
		e.reply(now, p, &orreryv1.CommandReply{Error: orrery.Errorf(orrery.CodeUnavailable,
			"partition %d has %d commands pending, the limit is %d", e.cfg.Partition, e.Queued(), e.cfg.MaxPending).Proto()})
		return
	}
	if err := checkPath(c.Request); err != nil {
		e.reply(now, p, ErrorReply(err))
		return
	}
	if c.Request.GetAbandon() {
		e.abandon(now, p)
		return
	}
	if e.park(now, p) {
		return
	}
	e.propose(now, p)
}

// checkPath keeps the due path to the due coordinators: a due command (CommandRequest.due) is
// accepted only from their principal (input.CoordinatorPrincipal) and may not wait or abandon,
// and an ordinary command may not hold ExpireSaga, which only a due command carries; an
// abandon may not wait. An ordinary command may hold EmitOccurrences (client.ProcessDue): its
// apply authorizes the caller (batch.ApplyVersionManualEmit). The check is the engine's, before anything is proposed, so what the log
// holds and how it applies stay as they were.
func checkPath(req *orreryv1.CommandRequest) error {
	if req.GetAbandon() && req.GetWaitMicros() != 0 {
		return orrery.Invalid("wait_micros", "must be 0 with abandon")
	}
	if !req.GetDue() {
		for i, m := range req.GetBatch().GetMutations() {
			if m.GetExpireSaga() != nil {
				return orrery.Invalid(fmt.Sprintf("batch.mutations[%d].expire_saga", i), "is sent only by the due coordinators, in a due command")
			}
		}
		return nil
	}
	if req.GetPrincipal() != input.CoordinatorPrincipal {
		return orrery.Invalid("due", "is for Orrery's due coordinators (principal %q), not for %q", input.CoordinatorPrincipal, req.GetPrincipal())
	}
	if req.GetWaitMicros() != 0 {
		return orrery.Invalid("wait_micros", "must be 0 in a due command")
	}
	if req.GetAbandon() {
		return orrery.Invalid("abandon", "must be false in a due command")
	}
	return nil
}

// propose hands p's entry out in Ready.Propose; its Proposed event says where it went.
func (e *Engine) propose(now time.Time, p *pending) {
	// The leader decides what may differ between silos and carries it: the zone rules of the
	// cron schedules the batch configures (from this binary, never from the replicas' own).
	command := &orreryv1.PartitionCommand{
		Batch: p.req.GetBatch(), Due: p.req.GetDue(), ZoneRules: schedule.ZoneRulesFor(p.req.GetBatch().GetMutations()),
	}
	e.carry(now, p, command)
	cmd, err := proto.MarshalOptions{Deterministic: true}.Marshal(command)
	if err != nil {
		e.uncarry(now, p, false)
		e.reply(now, p, ErrorReply(orrery.Wrap(orrery.CodeInternal, err, "partition %d: encode a command", e.cfg.Partition)))
		return
	}
	e.nextRef++
	e.proposing[e.nextRef] = p
	e.ready.Propose = append(e.ready.Propose, Propose{Ref: e.nextRef, Principal: p.req.GetPrincipal(), Command: cmd, Drains: Drains(p.req)})
}

// Drains reports whether req only consumes, settles or stops work: an ordinary command (not a
// due command) whose mutations are all receives, acks, releases, lease extensions,
// housekeeping, pauses, cancels and deletes of schedules, pauses and resumes of queues, or
// cancels of messages, or deletes of calendars, or queues' retry policies, or shares of capped
// queues. None of them adds a message, a schedule or an occurrence.
func Drains(req *orreryv1.CommandRequest) bool {
	muts := req.GetBatch().GetMutations()
	if req.GetDue() || len(muts) == 0 {
		return false
	}
	for _, m := range muts {
		switch m.GetKind().(type) {
		case *orreryv1.Mutation_Receive, *orreryv1.Mutation_Ack, *orreryv1.Mutation_Release, *orreryv1.Mutation_ExtendLease,
			*orreryv1.Mutation_Housekeep, *orreryv1.Mutation_PauseSchedule, *orreryv1.Mutation_CancelSchedule, *orreryv1.Mutation_DeleteSchedule,
			*orreryv1.Mutation_PauseQueue, *orreryv1.Mutation_ResumeQueue, *orreryv1.Mutation_CancelMessage, *orreryv1.Mutation_SetQueueShare,
			*orreryv1.Mutation_DeleteCalendar, *orreryv1.Mutation_SetQueueRetryPolicy:
		default:
			return false
		}
	}
	return true
}

// proposed takes a proposal's outcome: a refusal is answered (the caller retries with the same
// command id), an accepted proposal waits for its entry to apply.
func (e *Engine) proposed(now time.Time, ev Proposed) {
	p := e.proposing[ev.Ref]
	if p == nil {
		return
	}
	delete(e.proposing, ev.Ref)
	if ev.Err != nil {
		e.uncarry(now, p, false) // refused: its entry is not in the log
		e.reply(now, p, ErrorReply(ev.Err))
		return
	}
	if e.stopped { // stopped meanwhile: its entry may still apply, nobody here will see it
		e.replyCarrying(now, p, e.stoppedReply())
		return
	}
	p.index, p.term, p.proposedAt = ev.Index, ev.Term, now
	for _, w := range p.attached {
		w.proposedAt = now
	}
	e.inflight[ev.Index] = p
}

// applied takes a round of applied entries: the due head, floor and coordinator learn their
// due-index writes, the commands this engine proposed are answered, and parked receives whose
// queue they made visible are proposed (lease). Entries nobody here proposed (replayed after a
// restart, or proposed by an earlier activation) only update what the engine keeps.
func (e *Engine) applied(now time.Time, ev *Applied) {
	if e.stopped {
		return
	}
	for _, w := range ev.DueWrites {
		if w.Value == nil {
			e.head.Delete(w.Key)
		} else {
			e.head.Set(w.Key, w.Value)
		}
	}
	for _, f := range ev.Floors {
		e.readFloors.Adopt(f)
	}
	for _, v := range ev.Visible {
		e.visibleSet(v)
	}
	for _, r := range ev.Results {
		p := e.inflight[r.Index]
		if p == nil || p.term != r.Term {
			continue
		}
		delete(e.inflight, r.Index)
		if !p.housekeep && !p.check && !p.limits && !p.zones && !p.version {
			e.ready.AnsweredApplied = true
			e.timeStages(now, p)
		}
		e.reply(now, p, r.Reply)
		e.carried -= len(p.attached)
		for i, w := range p.attached {
			if i < len(r.Waiting) && r.Waiting[i] != nil {
				e.ready.AnsweredApplied = true
				e.timeStages(now, w)
				e.reply(now, w, r.Waiting[i])
				continue
			}
			// It wrote nothing: parked again, or never carried again when the whole entry
			// failed without applying it (too big for one transaction, say).
			e.repark(now, w, len(r.Waiting) == 0)
		}
		p.attached = nil
	}
	e.lowerDueFloor(ev.MinDueWritten)
	e.noticeDueWritten(ev.MinDueWritten)
	e.wakeWaiters(now)
}

// timeStages records the stages of p, answered now after its entry applied.
func (e *Engine) timeStages(now time.Time, p *pending) {
	first := StageTiming{Stage: StageCommand, Took: now.Sub(p.admitted)}
	switch {
	case p.leasing:
		first = StageTiming{Stage: StageLease, Took: now.Sub(p.woken)}
	case p.req.GetDue():
		first.Stage = StageDue
	}
	e.ready.Stages = append(e.ready.Stages, first, StageTiming{Stage: StageApply, Took: now.Sub(p.proposedAt)})
}

// lost answers the commands whose proposals will not apply in their term with Unavailable.
func (e *Engine) lost(now time.Time, ev Lost) {
	for _, lost := range ev.Proposals {
		p := e.inflight[lost.Index]
		if p == nil || p.term != lost.Term {
			continue
		}
		delete(e.inflight, lost.Index)
		e.replyCarrying(now, p, &orreryv1.CommandReply{Error: orrery.Errorf(orrery.CodeUnavailable,
			"partition %d: the proposal of command %s lost its leader's term; retry it with the same command id", e.cfg.Partition, describe(p)).Proto()})
	}
}

// hostFailed answers every command in flight Unavailable: the host failed, and none of them
// will be answered (the silo stops; callers retry with the same command ids).
func (e *Engine) hostFailed(now time.Time, err error) {
	e.failed = err
	unavailable := orrery.Wrap(orrery.CodeUnavailable, err, "partition %d: the silo's replicas failed", e.cfg.Partition).Proto()
	for _, index := range sortedKeys(e.inflight) {
		p := e.inflight[index]
		delete(e.inflight, index)
		e.replyCarrying(now, p, &orreryv1.CommandReply{Error: unavailable})
	}
}

// stop answers what is in flight Unavailable (their entries may still apply; callers retry
// with the same command ids and get the receipt) and parked receives not visible.
func (e *Engine) stop(now time.Time) {
	e.stopped = true
	e.arm(WaitTimer, time.Time{})
	e.arm(HousekeepTimer, time.Time{})
	e.arm(CheckTimer, time.Time{})
	for _, index := range sortedKeys(e.inflight) {
		e.replyCarrying(now, e.inflight[index], e.stoppedReply())
	}
	for _, p := range e.waiters {
		e.reply(now, p, &orreryv1.CommandReply{})
	}
	e.inflight, e.waiters = map[uint64]*pending{}, nil
}

// stoppedReply answers a command in flight when the engine stops.
func (e *Engine) stoppedReply() *orreryv1.CommandReply {
	return &orreryv1.CommandReply{Error: orrery.Errorf(orrery.CodeUnavailable,
		"partition %d stopped before its command applied; retry it with the same command id", e.cfg.Partition).Proto()}
}

func describe(p *pending) string {
	return p.req.GetPrincipal() + "/" + p.req.GetBatch().GetCommandId()
}

// sortedKeys returns m's keys in order, so replies go out in log order.
func sortedKeys(m map[uint64]*pending) []uint64 { return slices.Sorted(maps.Keys(m)) }
