package schedule

import (
	"time"

	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// InspectFireTimes and InspectOutcomes bound what Inspect reports; InspectLookahead bounds
// the instants it looks at for the fire times (those calendars exclude are looked at and left
// out).
const (
	InspectFireTimes = 10
	InspectOutcomes  = 10
	InspectLookahead = 10_000
)

// Inspect reads what an operator sees of one schedule: its record, its next (at most 10)
// fire times, its last (at most 10) ledger outcomes, newest first, and why it is suspended.
// The fire times are the nominal instants ahead of the watermark that will fire, or be
// back-filled (the first may be overdue), so not those a resume left to be passed PAUSED;
// for a paused schedule, those a resume at loggedNow would start from; none while it is
// cancelled or suspended, when the generation pins a cron evaluator version this binary does
// not know (EvaluatorMismatch says so), or when the partition holds no rules of its zone (the
// next emit suspends it). ZoneRulesVersion names the release of those rules. It returns nil
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
	if insp.Generations, err = Generations(r, lane, scheduleID); err != nil {
		return nil, err
	}
	if rec.GetCancelled() || rec.GetSuspended() {
		return insp, nil
	}
	if insp.EvaluatorMismatch = unknownEvaluator(rec); insp.EvaluatorMismatch != "" {
		return insp, nil
	}
	location, version, blocked, err := recordZone(r, rec)
	if err != nil || blocked != "" {
		return insp, err
	}
	insp.ZoneRulesVersion = version
	excluded, err := loadExclusions(r, rec.GetDefinition())
	if err != nil {
		return nil, err
	}
	if insp.NextFireTimesUnixMicros, err = nextFireTimes(rec, location, excluded, loggedNowMicros); err != nil {
		return nil, err
	}
	insp.Backlog, insp.BacklogCapped, err = backlog(r, rec, loggedNowMicros)
	return insp, err
}

// nextFireTimes walks the series from the watermark on a copy of the record, giving the instant
// each ordinal fires (its nominal instant moved by the definition's jitter): from where a
// resume at loggedNow would start when paused, and past the instants a resume left to be
// passed PAUSED. Instants a calendar of the definition excludes are left out, looking at most
// InspectLookahead instants past the watermark for the fire times.
func nextFireTimes(rec *orreryv1.ScheduleRecord, location *time.Location, excluded exclusions, loggedNowMicros int64) ([]int64, error) {
	preview := proto.Clone(rec).(*orreryv1.ScheduleRecord)
	s, err := newSeries(preview, location)
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
	for looked, exists := 0, !preview.GetSeriesEnded(); exists && len(times) < InspectFireTimes && looked < InspectLookahead; looked++ {
		if excluded.excludes(at) == "" {
			times = append(times, fireAt(preview, ordinal, at))
		}
		ordinal++
		if at, exists, err = s.after(ordinal, at); err != nil {
			return nil, err
		}
	}
	return times, nil
}
