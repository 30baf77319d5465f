package schedule

import (
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/kv"
)

// pausedBacklog reports whether the watermark lies before the record's paused floor: the
// next nominal instant fell due while the schedule was paused, and is still to be passed
// PAUSED.
func pausedBacklog(rec *orreryv1.ScheduleRecord) bool {
	return !rec.GetSeriesEnded() && rec.GetNextNominalUnixMicros() < rec.GetPausedFloorUnixMicros()
}

// passPaused passes, oldest first and at most maxPassed, the ordinals whose nominal instants
// lie before the record's paused floor (set by the resume), recording each PAUSED in the
// ledger and enqueuing none; it returns how many it passed. The watermark moves with them, so
// the ordinals keep counting every nominal instant, and the first ordinal at or after the
// floor is where the series goes on (back-filled per the misfire policy when the catch-up
// window reaches before the resume). Ordinals it leaves are passed by the next commands: the
// schedule stays due at the first of them.
func passPaused(v kv.View, rec *orreryv1.ScheduleRecord, s series, maxPassed uint32, loggedNowMicros int64) (uint32, error) {
	lane := rec.GetDefinition().GetLane()
	var passed uint32
	for passed < maxPassed && pausedBacklog(rec) {
		ordinal, nominal := rec.GetNextOrdinal(), rec.GetNextNominalUnixMicros()
		entry := ledgerEntry(rec, ordinal, nominal, orreryv1.LedgerOutcome_LEDGER_OUTCOME_PAUSED)
		if err := writeFreshLedger(v, lane, entry, loggedNowMicros); err != nil {
			return passed, err
		}
		passed++
		if err := s.pass(ordinal, nominal); err != nil {
			return passed, err
		}
	}
	return passed, nil
}
