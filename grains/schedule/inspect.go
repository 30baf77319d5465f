package schedule

import (
	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// InspectFireTimes and InspectOutcomes bound what Inspect reports.
const (
	InspectFireTimes = 10
	InspectOutcomes  = 10
)

// Inspect reads what an operator sees of one schedule: its record, its next (at most 10)
// fire times, its last (at most 10) ledger outcomes, newest first, and why it is suspended.
// The fire times are the nominal instants ahead of the watermark that will fire, or be
// back-filled (the first may be overdue), so not those a resume left to be passed PAUSED;
// for a paused schedule, those a resume at loggedNow would start from; none while it is
// cancelled or suspended, or when this silo's evaluator or zone rules differ from the
// generation's (EvaluatorMismatch says so: the next emit will suspend it). It returns nil
// when there is no such schedule. It only reads, within a fixed bound.
func Inspect(r kv.Reader, lane *orreryv1.Lane, scheduleID string, loggedNowMicros int64) (*orreryv1.ScheduleInspection, error) {
	if err := input.Lane("lane", lane, false); err != nil {
		return nil, err
	}
	if err := input.UUID("schedule_id", scheduleID); err != nil {
		return nil, err
	}
	rec, found, err := Load(r, lane, scheduleID)
	if err != nil || !found {
		return nil, err
	}
	insp := &orreryv1.ScheduleInspection{Record: rec, SuspendedReason: rec.GetSuspendedReason()}
	outcomes, _, err := ReadLedger(r, lane, scheduleID, LedgerQuery{FromMicros: 0, ToMicros: input.MaxInstantMicros, MaxRecords: InspectOutcomes})
	if err != nil {
		return nil, err
	}
	insp.LastOutcomes = outcomes
	if rec.GetCancelled() || rec.GetSuspended() {
		return insp, nil
	}
	if insp.EvaluatorMismatch = evaluatorMismatch(rec); insp.EvaluatorMismatch != "" {
		return insp, nil
	}
	insp.NextFireTimesUnixMicros, err = nextFireTimes(rec, loggedNowMicros)
	return insp, err
}

// nextFireTimes walks the series from the watermark on a copy of the record: from where a
// resume at loggedNow would start when paused, and past the instants a resume left to be
// passed PAUSED.
func nextFireTimes(rec *orreryv1.ScheduleRecord, loggedNowMicros int64) ([]int64, error) {
	preview := proto.Clone(rec).(*orreryv1.ScheduleRecord)
	s, err := newSeries(preview)
	if err != nil {
		return nil, err
	}
	switch {
	case preview.GetPaused():
		err = s.startAt(max(0, loggedNowMicros-preview.GetDefinition().GetCatchUpWindowMicros()))
	case pausedBacklog(preview):
		err = s.startAt(preview.GetPausedFloorUnixMicros())
	}
	if err != nil {
		return nil, err
	}
	var times []int64
	ordinal, at := preview.GetNextOrdinal(), preview.GetNextNominalUnixMicros()
	for exists := !preview.GetSeriesEnded(); exists && len(times) < InspectFireTimes; {
		times = append(times, at)
		ordinal++
		if at, exists, err = s.after(ordinal, at); err != nil {
			return nil, err
		}
	}
	return times, nil
}
