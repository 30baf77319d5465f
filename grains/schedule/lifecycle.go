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

// ApplyCancel cancels the expected revision: the schedule never emits again until a new
// ConfigureSchedule starts a new generation. State and watermark are retained. Cancelling a
// cancelled schedule changes nothing.
func ApplyCancel(v kv.View, lim input.Limits, m *orreryv1.CancelSchedule) (*orreryv1.ScheduleResult, error) {
	rec, err := loadExisting(v, m.GetLane(), m.GetScheduleId())
	if err != nil {
		return nil, err
	}
	if err := checkRevision(rec, m.GetExpectedRevision()); err != nil {
		return nil, err
	}
	if rec.GetCancelled() {
		return result(rec, nil), nil
	}
	oldDueAt := rec.GetNextDueAtUnixMicros()
	rec.Cancelled = true
	rec.Revision++
	if err := refreshNextDue(rec); err != nil {
		return nil, err
	}
	if err := save(v, lim, rec, oldDueAt); err != nil {
		return nil, err
	}
	return result(rec, nil), nil
}

// ApplyDelete removes the expected revision for good: a tombstone keeps the id from ever being
// configured again. Occurrences already enqueued stay in their queue.
func ApplyDelete(v kv.View, m *orreryv1.DeleteSchedule, loggedNowMicros int64) (*orreryv1.ScheduleResult, error) {
	rec, err := loadExisting(v, m.GetLane(), m.GetScheduleId())
	if err != nil {
		return nil, err
	}
	if err := checkRevision(rec, m.GetExpectedRevision()); err != nil {
		return nil, err
	}
	lane, id := m.GetLane(), m.GetScheduleId()
	if err := due.Remove(v, rec.GetNextDueAtUnixMicros(), orreryv1.DueKind_DUE_KIND_SCHEDULE, lane, id); err != nil {
		return nil, err
	}
	if err := retained.Delete(v, keys.ScheduleKey(lane, id)); err != nil {
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

// ApplyPause stops emission durably. Pausing a paused schedule changes nothing; a cancelled
// schedule cannot be paused (Suspended).
func ApplyPause(v kv.View, lim input.Limits, m *orreryv1.PauseSchedule, loggedNowMicros int64) (*orreryv1.ScheduleResult, error) {
	rec, err := loadExisting(v, m.GetLane(), m.GetScheduleId())
	if err != nil {
		return nil, err
	}
	if err := checkRevision(rec, m.GetExpectedRevision()); err != nil {
		return nil, err
	}
	if rec.GetCancelled() {
		return nil, orrery.FieldErrorf(orrery.CodeSuspended, "schedule_id", "schedule is cancelled")
	}
	if rec.GetPaused() {
		return result(rec, nil), nil
	}
	oldDueAt := rec.GetNextDueAtUnixMicros()
	rec.Paused = true
	rec.PausedAtUnixMicros = loggedNowMicros
	rec.Revision++
	if err := refreshNextDue(rec); err != nil {
		return nil, err
	}
	if err := save(v, lim, rec, oldDueAt); err != nil {
		return nil, err
	}
	return result(rec, nil), nil
}

// ApplyResume restarts emission with the first occurrence due at or after the resume's logged
// time; occurrences that fell due before it and were not emitted are not back-filled.
// Resuming a schedule that is not paused changes nothing.
func ApplyResume(v kv.View, lim input.Limits, m *orreryv1.ResumeSchedule, loggedNowMicros int64) (*orreryv1.ScheduleResult, error) {
	rec, err := loadExisting(v, m.GetLane(), m.GetScheduleId())
	if err != nil {
		return nil, err
	}
	if err := checkRevision(rec, m.GetExpectedRevision()); err != nil {
		return nil, err
	}
	if !rec.GetPaused() {
		return result(rec, nil), nil
	}
	oldDueAt := rec.GetNextDueAtUnixMicros()
	next, exists, err := firstOrdinalAtOrAfter(rec, rec.GetNextOrdinal(), loggedNowMicros)
	if err != nil {
		return nil, err
	}
	if !exists {
		// The series has nothing left at or after the resume: park the ordinal past its end.
		next = lastOrdinalPlusOne(rec)
	}
	rec.Paused = false
	rec.PausedAtUnixMicros = 0
	rec.ResumeFloorUnixMicros = loggedNowMicros
	rec.NextOrdinal = next
	rec.Revision++
	if err := refreshNextDue(rec); err != nil {
		return nil, err
	}
	if err := save(v, lim, rec, oldDueAt); err != nil {
		return nil, err
	}
	return result(rec, nil), nil
}

// lastOrdinalPlusOne returns an ordinal with no due instant: 1 for one-shot specs, and the
// ordinal past the series' end for Every.
func lastOrdinalPlusOne(rec *orreryv1.ScheduleRecord) uint64 {
	every := rec.GetDefinition().GetSpec().GetEvery()
	if every == nil {
		return 1
	}
	span := uint64(input.MaxInstantMicros - every.GetFirstDueAtUnixMicros())
	return span/uint64(every.GetIntervalMicros()) + 1
}

// ApplyTrigger enqueues one manual occurrence now, with its own id. It is refused while the
// schedule is paused or cancelled (Suspended) and does not move the watermark or revision.
func ApplyTrigger(v kv.View, lim input.Limits, m *orreryv1.TriggerSchedule, loggedNowMicros int64) (*orreryv1.ScheduleResult, error) {
	rec, err := loadExisting(v, m.GetLane(), m.GetScheduleId())
	if err != nil {
		return nil, err
	}
	switch {
	case rec.GetPaused():
		return nil, orrery.FieldErrorf(orrery.CodeSuspended, "schedule_id", "schedule is paused")
	case rec.GetCancelled():
		return nil, orrery.FieldErrorf(orrery.CodeSuspended, "schedule_id", "schedule is cancelled")
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
	var enqueued []string
	if created {
		enqueued = []string{id}
	}
	return result(rec, enqueued), nil
}
