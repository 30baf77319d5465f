package schedule

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/retained"
)

// ApplyCancel cancels the expected revision (or any, with any_revision): the schedule never
// emits again until a new ConfigureSchedule starts a new generation. State and watermark are
// retained. Cancelling a cancelled schedule changes nothing.
func ApplyCancel(v kv.View, lim input.Limits, m *orreryv1.CancelSchedule) (*orreryv1.ScheduleResult, error) {
	rec, err := loadForAction(v, m.GetLane(), m.GetScheduleId(), m.GetExpectedRevision(), m.GetAnyRevision())
	if err != nil {
		return nil, err
	}
	if rec.GetCancelled() {
		return result(rec, nil), nil
	}
	oldDueAt := rec.GetNextDueAtUnixMicros()
	rec.Cancelled = true
	rec.Revision++
	refreshNextDue(rec)
	if err := save(v, lim, rec, oldDueAt, 0); err != nil {
		return nil, err
	}
	return result(rec, nil), nil
}

// ApplyDelete removes the expected revision (or any, with any_revision) for good: a tombstone
// keeps the id from ever being configured again. Occurrences already enqueued stay in their
// queue; a buffered one is recorded DROPPED; the ledger stays until its retention passes.
func ApplyDelete(v kv.View, m *orreryv1.DeleteSchedule, loggedNowMicros int64, rules Rules) (*orreryv1.ScheduleResult, error) {
	rec, err := loadForAction(v, m.GetLane(), m.GetScheduleId(), m.GetExpectedRevision(), m.GetAnyRevision())
	if err != nil {
		return nil, err
	}
	lane, id := m.GetLane(), m.GetScheduleId()
	if err := dropBuffered(v, rec, "the schedule was deleted", loggedNowMicros); err != nil {
		return nil, err
	}
	if err := due.Remove(v, rec.GetNextDueAtUnixMicros(), orreryv1.DueKind_DUE_KIND_SCHEDULE, lane, id); err != nil {
		return nil, err
	}
	if err := retained.Delete(v, keys.ScheduleKey(lane, id)); err != nil {
		return nil, err
	}
	if rules.KeepsGenerations {
		if err := deleteGenerations(v, lane, id); err != nil {
			return nil, err
		}
	}
	if err := v.Delete(IndexKey(rec)); err != nil {
		return nil, err
	}
	if err := referenceCalendars(v, rec.GetDefinition(), nil); err != nil {
		return nil, err
	}
	tomb := &orreryv1.ScheduleTombstone{LastRevision: rec.GetRevision(), LastGeneration: rec.GetGeneration(), DeletedAtUnixMicros: loggedNowMicros}
	if _, err := record.Store(v, keys.ScheduleTombstoneKey(lane, id), tomb); err != nil {
		return nil, err
	}
	rec.Revision++
	rec.NextDueAtUnixMicros = 0
	return result(rec, nil), nil
}

// refused is the one error for a lifecycle action the schedule's state does not allow
// (pause or resume a cancelled schedule, pause a paused one, resume one that is not paused,
// trigger one that is paused, cancelled or suspended). Its code is Suspended, the closed set's
// code for "refused by the record's state", and its field names the record's state field that
// refuses it (ScheduleRecord.paused, cancelled or suspended; schedule_id for a resume of a
// schedule that is not paused), so a caller tells the states apart by code and field
// (client.ErrSchedulePaused, ErrScheduleCancelled, ErrScheduleSuspended), never by text. The
// message says the state and what to do about it.
func refused(rec *orreryv1.ScheduleRecord, action, field, state, remedy string) error {
	return orrery.FieldErrorf(orrery.CodeSuspended, field, "cannot %s schedule %s: it is %s; %s",
		action, rec.GetDefinition().GetScheduleId(), state, remedy)
}

// The remedies refused names.
const (
	resumeFirst    = "resume it first"
	configureAgain = "configure it again (a new definition) to start a new generation"
)

// ApplyPause stops emission durably; the watermark, the overlap slot and a buffered
// occurrence are kept. A schedule that is already paused, or cancelled, cannot be paused
// (Suspended).
func ApplyPause(v kv.View, lim input.Limits, m *orreryv1.PauseSchedule, loggedNowMicros int64) (*orreryv1.ScheduleResult, error) {
	rec, err := loadForAction(v, m.GetLane(), m.GetScheduleId(), m.GetExpectedRevision(), m.GetAnyRevision())
	if err != nil {
		return nil, err
	}
	switch {
	case rec.GetCancelled():
		return nil, refused(rec, "pause", "cancelled", "cancelled", configureAgain)
	case rec.GetPaused():
		return nil, refused(rec, "pause", "paused", "paused already", "resume it to run it again")
	}
	oldDueAt := rec.GetNextDueAtUnixMicros()
	rec.Paused = true
	rec.PausedAtUnixMicros = loggedNowMicros
	rec.Revision++
	refreshNextDue(rec)
	if err := save(v, lim, rec, oldDueAt, loggedNowMicros); err != nil {
		return nil, err
	}
	return result(rec, nil), nil
}

// ApplyResume restarts emission with the first occurrence due at or after the resume's
// logged time minus the definition's catch-up window (zero without one): the paused window
// is back-filled only as far as that window reaches, and what is back-filled follows the
// misfire policy at the next emit. The ordinals before that floor are passed PAUSED (one
// ledger record each, never enqueued; see passPaused): at most Limits.MaxPassedPerEmit by the
// resume, the rest by the emits that follow. A schedule that is not paused, or cancelled,
// cannot be resumed (Suspended). If this silo's cron evaluator or zone rules differ from the
// generation's, the schedule resumes suspended.
func ApplyResume(v kv.View, lim input.Limits, m *orreryv1.ResumeSchedule, loggedNowMicros int64) (*orreryv1.ScheduleResult, error) {
	rec, err := loadForAction(v, m.GetLane(), m.GetScheduleId(), m.GetExpectedRevision(), m.GetAnyRevision())
	if err != nil {
		return nil, err
	}
	switch {
	case rec.GetCancelled():
		return nil, refused(rec, "resume", "cancelled", "cancelled", configureAgain)
	case !rec.GetPaused():
		return nil, refused(rec, "resume", "schedule_id", "not paused", "there is nothing to resume")
	}
	oldDueAt := rec.GetNextDueAtUnixMicros()
	rec.Paused, rec.PausedReason = false, ""
	rec.PausedAtUnixMicros = 0
	rec.ResumeFloorUnixMicros = loggedNowMicros
	rec.Revision++
	var passed uint32
	s, reason, err := series{}, "", error(nil)
	if !rec.GetSuspended() {
		if s, reason, err = evaluate(v, rec); err != nil {
			return nil, err
		}
	}
	switch {
	case rec.GetSuspended(): // stays suspended: nothing to compute
	case reason != "":
		if passed, err = suspend(v, rec, reason, loggedNowMicros); err != nil {
			return nil, err
		}
	default:
		rec.PausedFloorUnixMicros = max(0, loggedNowMicros-rec.GetDefinition().GetCatchUpWindowMicros())
		if passed, err = passPaused(v, rec, s, maxPassedPerEmit(lim), loggedNowMicros); err != nil {
			return nil, err
		}
	}
	refreshNextDue(rec)
	if err := save(v, lim, rec, oldDueAt, loggedNowMicros); err != nil {
		return nil, err
	}
	res := result(rec, nil)
	res.PassedWithoutMessage = passed
	return res, nil
}

// ApplyTrigger enqueues one manual occurrence now, with its own id, and records it in the
// ledger (MANUAL). It is refused while the schedule is paused, cancelled or suspended
// (Suspended) and does not move the watermark or revision. It neither waits for nor takes
// the overlap slot. A second trigger at the same logged time is a no-op.
func ApplyTrigger(v kv.View, lim input.Limits, m *orreryv1.TriggerSchedule, loggedNowMicros int64) (*orreryv1.ScheduleResult, error) {
	rec, err := loadExisting(v, m.GetLane(), m.GetScheduleId())
	if err != nil {
		return nil, err
	}
	switch {
	case rec.GetCancelled(): // first: a cancelled schedule may be paused too, and resuming it would not help
		return nil, refused(rec, "trigger", "cancelled", "cancelled", configureAgain)
	case rec.GetPaused():
		return nil, refused(rec, "trigger", "paused", "paused", resumeFirst)
	case rec.GetSuspended():
		return nil, refused(rec, "trigger", "suspended", "suspended ("+rec.GetSuspendedReason()+")", "only a new definition releases it")
	}
	def := rec.GetDefinition()
	id := ManualID(def.GetScheduleId(), rec.GetGeneration(), loggedNowMicros)
	msg, err := message(def, lim, id, loggedNowMicros, loggedNowMicros)
	if err != nil {
		return nil, err
	}
	msg.Origin = &orreryv1.QueueMessage_Occurrence{Occurrence: &orreryv1.OccurrenceOrigin{
		ScheduleId:             def.GetScheduleId(),
		Generation:             rec.GetGeneration(),
		Manual:                 true,
		NominalDueAtUnixMicros: loggedNowMicros,
	}}
	created, err := queue.Put(v, lim, msg)
	if err != nil {
		return nil, err
	}
	if !created {
		return result(rec, nil), nil
	}
	entry := ledgerEntry(rec, 0, loggedNowMicros, orreryv1.LedgerOutcome_LEDGER_OUTCOME_MANUAL)
	entry.Manual, entry.MessageId = true, id
	if err := writeLedger(v, def.GetLane(), entry, loggedNowMicros); err != nil {
		return nil, err
	}
	res := result(rec, []string{id})
	res.EnqueuedNominalDueAtUnixMicros = []int64{loggedNowMicros}
	return res, nil
}
