package schedule

import (
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// StateOf is the state rec is listed under: the first of cancelled, suspended, paused and
// completed (series ended, nothing buffered) that holds, else active.
func StateOf(rec *orreryv1.ScheduleRecord) orreryv1.ScheduleState {
	switch {
	case rec.GetCancelled():
		return orreryv1.ScheduleState_SCHEDULE_STATE_CANCELLED
	case rec.GetSuspended():
		return orreryv1.ScheduleState_SCHEDULE_STATE_SUSPENDED
	case rec.GetPaused():
		return orreryv1.ScheduleState_SCHEDULE_STATE_PAUSED
	case rec.GetSeriesEnded() && rec.GetBuffered() == nil:
		return orreryv1.ScheduleState_SCHEDULE_STATE_COMPLETED
	default:
		return orreryv1.ScheduleState_SCHEDULE_STATE_ACTIVE
	}
}

// IndexKey is rec's entry in the schedule listing index (keys.ScheduleIndex).
func IndexKey(rec *orreryv1.ScheduleRecord) []byte {
	def := rec.GetDefinition()
	return keys.IndexEntryKey(keys.ScheduleIndex, def.GetLane(), def.GetScheduleId(), byte(StateOf(rec)))
}

// Decode decodes a stored schedule record as Load does.
func Decode(encoded []byte) (*orreryv1.ScheduleRecord, error) {
	rec := &orreryv1.ScheduleRecord{}
	if err := record.Unmarshal(encoded, rec); err != nil {
		return nil, err
	}
	upgradeLegacy(rec)
	return rec, nil
}

// reindex moves rec's listing index entry from the one of the record it replaced (its
// stored encoding old, when found) to its own.
func reindex(v kv.View, rec *orreryv1.ScheduleRecord, old []byte, found bool) error {
	entry := IndexKey(rec)
	if found {
		prev, err := Decode(old)
		if err != nil {
			return err
		}
		prevEntry := IndexKey(prev)
		if string(prevEntry) == string(entry) {
			return nil
		}
		if err := v.Delete(prevEntry); err != nil {
			return err
		}
	}
	return v.Set(entry, nil)
}
