package schedule

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/retained"
)

// Load reads a schedule record; found is false when there is none.
func Load(v kv.Reader, lane *orreryv1.Lane, scheduleID string) (*orreryv1.ScheduleRecord, bool, error) {
	rec := &orreryv1.ScheduleRecord{}
	found, err := record.Load(v, keys.ScheduleKey(lane, scheduleID), rec)
	if err != nil || !found {
		return nil, false, err
	}
	upgradeLegacy(rec)
	return rec, true, nil
}

// upgradeLegacy fills the next nominal instant of a record stored before it was kept (At,
// After and Every only; cron came with it): an unset one is derived from the ordinal.
func upgradeLegacy(rec *orreryv1.ScheduleRecord) {
	if rec.GetSeriesEnded() || rec.GetNextNominalUnixMicros() != 0 || rec.GetDefinition().GetSpec().GetCron() != nil {
		return
	}
	if at, exists, err := DueAt(rec, rec.GetNextOrdinal()); err == nil {
		rec.NextNominalUnixMicros, rec.SeriesEnded = at, !exists
	}
}

// save writes rec (on the partition's retained-record account), moves its listing index
// entry from the stored record's state to its own, and moves its due entry from oldDueAt to
// rec.NextDueAt. When a bound of the definition has just ended rec's series, it records the
// instant withheld as ENDED in the ledger at loggedNow (callers that never end a series, a
// cancel or an ack, pass 0).
func save(v kv.View, lim input.Limits, rec *orreryv1.ScheduleRecord, oldDueAtMicros, loggedNowMicros int64) error {
	def := rec.GetDefinition()
	old, found, err := retained.Replace(v, lim, keys.ScheduleKey(def.GetLane(), def.GetScheduleId()), rec)
	if err != nil {
		return err
	}
	if err := reindex(v, rec, old, found); err != nil {
		return err
	}
	if err := ledgerEnded(v, rec, old, found, loggedNowMicros); err != nil {
		return err
	}
	return due.Move(v, oldDueAtMicros, &orreryv1.DueRef{
		Kind:            orreryv1.DueKind_DUE_KIND_SCHEDULE,
		Lane:            def.GetLane(),
		Id:              def.GetScheduleId(),
		Token:           rec.GetGeneration(),
		DueAtUnixMicros: rec.GetNextDueAtUnixMicros(),
	})
}

// loadExisting validates lane and id and loads the record, failing NotFound when absent (saying
// so when the id is a deleted schedule's, whose identity stays terminal).
func loadExisting(v kv.Reader, lane *orreryv1.Lane, scheduleID string) (*orreryv1.ScheduleRecord, error) {
	if err := input.Lane("lane", lane, false); err != nil {
		return nil, err
	}
	if err := input.UUID("schedule_id", scheduleID); err != nil {
		return nil, err
	}
	rec, found, err := Load(v, lane, scheduleID)
	if err != nil {
		return nil, err
	}
	if !found {
		if deleted, err := Deleted(v, lane, scheduleID); err != nil {
			return nil, err
		} else if deleted {
			return nil, orrery.FieldErrorf(orrery.CodeNotFound, "schedule_id", "schedule %s was deleted; %s", scheduleID, deletedStaysTerminal)
		}
		return nil, orrery.FieldErrorf(orrery.CodeNotFound, "schedule_id", "no schedule %s in this lane", scheduleID)
	}
	return rec, nil
}

// loadForAction is loadExisting for an operator action (cancel, delete, pause, resume): it
// also checks the revision form — the exact expected revision (RevisionConflict otherwise),
// or, with anyRevision, whatever the current revision is (expected must then be 0: both set
// is a Validation error on expected_revision, reported before the record is read).
func loadForAction(v kv.Reader, lane *orreryv1.Lane, scheduleID string, expected uint64, anyRevision bool) (*orreryv1.ScheduleRecord, error) {
	if anyRevision && expected != 0 {
		return nil, orrery.Invalid("expected_revision", "must be 0 when any_revision is set, got %d", expected)
	}
	rec, err := loadExisting(v, lane, scheduleID)
	if err != nil {
		return nil, err
	}
	if anyRevision {
		return rec, nil
	}
	if err := checkRevision(rec, expected); err != nil {
		return nil, err
	}
	return rec, nil
}

// checkRevision fails RevisionConflict unless rec is at the expected revision.
func checkRevision(rec *orreryv1.ScheduleRecord, expected uint64) error {
	if rec.GetRevision() != expected {
		return orrery.FieldErrorf(orrery.CodeRevisionConflict, "expected_revision", "schedule is at revision %d, expected %d", rec.GetRevision(), expected)
	}
	return nil
}

// result reports a record's state.
func result(rec *orreryv1.ScheduleRecord, enqueued []string) *orreryv1.ScheduleResult {
	return &orreryv1.ScheduleResult{
		Revision:            rec.GetRevision(),
		Generation:          rec.GetGeneration(),
		NextOrdinal:         rec.GetNextOrdinal(),
		NextDueAtUnixMicros: rec.GetNextDueAtUnixMicros(),
		EnqueuedIds:         enqueued,
		SuspendedReason:     rec.GetSuspendedReason(),
		Name:                rec.GetDefinition().GetName(),
	}
}

// canEmit reports whether the schedule may emit at all.
func canEmit(rec *orreryv1.ScheduleRecord) bool {
	return !rec.GetCancelled() && !rec.GetPaused() && !rec.GetSuspended()
}

// refreshNextDue sets NextDueAt, where the due index holds the schedule: the next nominal
// instant, or earlier when a buffered occurrence waits — at its own nominal instant once the
// slot is free, else at the in-flight occurrence's expiry, when the slot frees itself. It is
// zero when the schedule cannot emit or has nothing left.
func refreshNextDue(rec *orreryv1.ScheduleRecord) { rec.NextDueAtUnixMicros = nextDue(rec) }

// nextDue is where rec's due entry belongs (see refreshNextDue); 0: not in the due index.
func nextDue(rec *orreryv1.ScheduleRecord) int64 {
	if !canEmit(rec) {
		return 0
	}
	due, found := int64(0), false
	consider := func(at int64) {
		if !found || at < due {
			due, found = at, true
		}
	}
	switch {
	case holds(rec):
		// The series waits for its in-flight occurrence: due again when it expires, or at
		// once when its ack frees the slot (ReleaseSlot).
		if !rec.GetSeriesEnded() && rec.GetInFlightExpiresAtUnixMicros() > 0 {
			consider(max(nextFireAt(rec), rec.GetInFlightExpiresAtUnixMicros()))
		}
	case !rec.GetSeriesEnded():
		consider(nextFireAt(rec))
	}
	if hold := paceHold(rec); found && hold > due {
		due = hold // the pace window is full: nothing is enqueued before it ends
	}
	if b := rec.GetBuffered(); b != nil {
		switch {
		case rec.GetInFlightMessageId() == "":
			consider(b.GetNominalDueAtUnixMicros())
		case rec.GetInFlightExpiresAtUnixMicros() > 0:
			consider(rec.GetInFlightExpiresAtUnixMicros())
		}
	}
	return due
}

// ledgerEnded records as ENDED the instant a bound withheld when rec's series has just ended
// by it: the stored record (old, when found) of the same generation had not.
func ledgerEnded(v kv.View, rec *orreryv1.ScheduleRecord, old []byte, found bool, loggedNowMicros int64) error {
	if rec.GetSeriesEndReason() == "" {
		return nil
	}
	if found {
		prev, err := Decode(old)
		if err != nil {
			return err
		}
		if prev.GetGeneration() == rec.GetGeneration() && prev.GetSeriesEndReason() != "" {
			return nil
		}
	}
	entry := ledgerEntry(rec, rec.GetNextOrdinal(), rec.GetSeriesEndWithheldUnixMicros(), orreryv1.LedgerOutcome_LEDGER_OUTCOME_ENDED)
	entry.Reason = rec.GetSeriesEndReason()
	return writeLedger(v, rec.GetDefinition().GetLane(), entry, loggedNowMicros)
}
