package chaos

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// scheduleCallTimeout bounds each schedule compare-and-set of the workload (the client
// retries within it): like sagaCallTimeout, about the failure detection on loopback, so that a
// call caught by a fault may end without an answer while its command may still apply.
const scheduleCallTimeout = 2 * time.Second

// create configures def, absent until then (expected revision 0), under one command id,
// each attempt retried until one succeeds within a minute, and records it as one create
// spanning every attempt: the attempts are one command, which the partition applies once.
func (w *workload) create(ctx context.Context, def *orreryv1.ScheduleDefinition) error {
	op := scheduleOp{scheduleID: def.GetScheduleId(), key: def.GetLane().GetKey(), kind: scheduleCreate, call: time.Now()}
	var res *orreryv1.ScheduleResult
	err := w.untilDone(ctx, time.Minute, func(ctx context.Context) error {
		var err error
		res, err = w.c.ConfigureSchedule(ctx, def, 0, client.WithCommandID("configure-"+def.GetScheduleId()))
		return err
	})
	op.classify(err, false)
	op.revision = res.GetRevision()
	w.scheduleCalls.add(op)
	return err
}

// readSchedule reads s (InspectSchedule) within callTimeout and records the read: its
// revision, and whether it is paused or cancelled. The record is nil unless the read
// succeeded.
func (w *workload) readSchedule(ctx context.Context, s tickSchedule) (scheduleOp, *orreryv1.ScheduleRecord) {
	op := scheduleOp{scheduleID: s.id, key: s.lane.GetKey(), kind: scheduleRead, call: time.Now()}
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	r, err := w.c.InspectSchedule(callCtx, s.lane, s.id)
	cancel()
	op.classify(err, orrery.CodeOf(err) == orrery.CodeNotFound) // NotFound is the partition's answer
	w.countOp(err)
	if err == nil {
		op.revision, op.paused, op.cancelled = r.GetRevision(), r.GetPaused(), r.GetCancelled()
	}
	w.scheduleCalls.add(op)
	return op, r
}

// setSchedule sends one pause, resume or cancel of s at the expected revision (never
// any_revision), within scheduleCallTimeout, under a fresh command id, and records it.
func (w *workload) setSchedule(ctx context.Context, s tickSchedule, kind scheduleOpKind, expected uint64) scheduleOp {
	op := scheduleOp{scheduleID: s.id, key: s.lane.GetKey(), kind: kind, expected: expected, call: time.Now()}
	var receipt client.Receipt
	callCtx, cancel := context.WithTimeout(ctx, scheduleCallTimeout)
	var r *orreryv1.ScheduleResult
	var err error
	switch kind {
	case schedulePause:
		r, err = w.c.PauseSchedule(callCtx, &orreryv1.PauseSchedule{Lane: s.lane, ScheduleId: s.id, ExpectedRevision: expected}, client.WithReceipt(&receipt))
	case scheduleResume:
		r, err = w.c.ResumeSchedule(callCtx, &orreryv1.ResumeSchedule{Lane: s.lane, ScheduleId: s.id, ExpectedRevision: expected}, client.WithReceipt(&receipt))
	case scheduleCancel:
		r, err = w.c.CancelSchedule(callCtx, &orreryv1.CancelSchedule{Lane: s.lane, ScheduleId: s.id, ExpectedRevision: expected}, client.WithReceipt(&receipt))
	default:
		panic("setSchedule: not a compare-and-set: " + string(kind))
	}
	cancel()
	op.classify(err, receipt.Bytes != nil)
	op.revision = r.GetRevision()
	w.countOp(err)
	w.scheduleCalls.add(op)
	return op
}

// runPauses, every 0.5–2 s, pauses or resumes one of the churn schedules at the revision it
// reads (pauseOrResume), alongside runChurn's, so that compare-and-sets of one schedule from
// two goroutines race each other, the schedule's emits and the faults.
func (w *workload) runPauses(ctx context.Context, rng *rand.Rand) {
	var churn []tickSchedule
	for _, s := range w.schedules {
		if w.churn[s.lane.GetKey()] {
			churn = append(churn, s)
		}
	}
	for len(churn) > 0 && sleep(ctx, between(rng, 500*time.Millisecond, 2*time.Second)) {
		w.pauseOrResume(ctx, rng, churn[rng.IntN(len(churn))])
	}
}

// pauseOrResume reads s and, unless it is cancelled, pauses it when it runs or resumes it when
// paused, at the revision read (an emit between the read and the call makes it a revision
// conflict); one time in three it sends two from that revision at once, of which at most one
// may win.
func (w *workload) pauseOrResume(ctx context.Context, rng *rand.Rand, s tickSchedule) {
	read, rec := w.readSchedule(ctx, s)
	if read.outcome != outcomeOK || rec.GetCancelled() {
		return
	}
	kind := scheduleResume
	if !rec.GetPaused() {
		kind = schedulePause
		w.mu.Lock()
		w.pausedEver[s.lane.GetKey()] = true
		w.mu.Unlock()
	}
	if rng.IntN(3) != 0 {
		w.setSchedule(ctx, s, kind, read.revision)
		return
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { w.setSchedule(ctx, s, kind, read.revision) })
	}
	wg.Wait()
}

// untilRead reads s, and while it reads s in a state that is not done, sends act at the
// revision read, until a read finds it done or within has passed (each failed read retried
// after 250 ms). It returns the record of the read that found it done, or nil.
func (w *workload) untilRead(ctx context.Context, s tickSchedule, within time.Duration, done func(*orreryv1.ScheduleRecord) bool, act scheduleOpKind) *orreryv1.ScheduleRecord {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		read, rec := w.readSchedule(ctx, s)
		switch {
		case read.outcome == outcomeOK && done(rec):
			return rec
		case read.outcome == outcomeOK:
			w.setSchedule(ctx, s, act, read.revision) // then read it back: done, or moved on (an emit raced it)
		default:
			sleep(ctx, 250*time.Millisecond)
		}
	}
	return nil
}
