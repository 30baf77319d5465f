package schedule

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// Bounds of a definition's catch_up_pace.
const (
	MaxPacePerWindow    = 1000
	MinPaceWindowMicros = input.Second
	MaxPaceWindowMicros = input.Day
)

// MaxBacklogCount bounds the backlog an inspection counts (ScheduleInspection.backlog).
const MaxBacklogCount = 10_000

// HasPace reports whether def sets a catch-up pace: a behaviour of apply version 11.
func HasPace(def *orreryv1.ScheduleDefinition) bool { return def.GetCatchUpPace() != nil }

// validatePace checks a catch-up pace: 1..MaxPacePerWindow occurrences per a window of
// MinPaceWindowMicros..MaxPaceWindowMicros.
func validatePace(def *orreryv1.ScheduleDefinition) *orrery.Error {
	p := def.GetCatchUpPace()
	if p == nil {
		return nil
	}
	if n := p.GetMaxPerWindow(); n < 1 || n > MaxPacePerWindow {
		return orrery.Invalid("catch_up_pace.max_per_window", "must be 1..%d, got %d", MaxPacePerWindow, n)
	}
	return orrery.AsError(input.Duration("catch_up_pace.window_micros", p.GetWindowMicros(), MinPaceWindowMicros, MaxPaceWindowMicros))
}

// paceAllows reports whether the record's pace lets another occurrence be enqueued at logged
// time now, opening a new window when the last one has ended.
func paceAllows(rec *orreryv1.ScheduleRecord, nowMicros int64) bool {
	p := rec.GetDefinition().GetCatchUpPace()
	if p == nil {
		return true
	}
	if rec.GetPaceWindowEnqueued() == 0 || nowMicros >= rec.GetPaceWindowStartUnixMicros()+p.GetWindowMicros() {
		rec.PaceWindowStartUnixMicros, rec.PaceWindowEnqueued = nowMicros, 0
	}
	return rec.GetPaceWindowEnqueued() < p.GetMaxPerWindow()
}

// paceSpent counts one occurrence enqueued in the record's pace window.
func paceSpent(rec *orreryv1.ScheduleRecord) {
	if rec.GetDefinition().GetCatchUpPace() != nil {
		rec.PaceWindowEnqueued++
	}
}

// paceHold is the instant the record's pace lets it enqueue again when its window is full
// (0: it is not).
func paceHold(rec *orreryv1.ScheduleRecord) int64 {
	p := rec.GetDefinition().GetCatchUpPace()
	if p == nil || rec.GetPaceWindowEnqueued() < p.GetMaxPerWindow() {
		return 0
	}
	return rec.GetPaceWindowStartUnixMicros() + p.GetWindowMicros()
}

// backlog counts the series' instants due at logged time now from the watermark on, at most
// MaxBacklogCount (capped when more remain).
func backlog(r kv.Reader, rec *orreryv1.ScheduleRecord, nowMicros int64) (count uint64, capped bool, err error) {
	if !canEmit(rec) || rec.GetSeriesEnded() {
		return 0, false, nil
	}
	s, blocked, err := evaluate(r, rec)
	if err != nil || blocked != "" {
		return 0, false, err
	}
	ordinal, at, exists := rec.GetNextOrdinal(), rec.GetNextNominalUnixMicros(), true
	for exists && fireAt(rec, ordinal, at) <= nowMicros {
		if count == MaxBacklogCount {
			return count, true, nil
		}
		count++
		ordinal++
		if at, exists, err = s.after(ordinal, at); err != nil {
			return count, false, err
		}
	}
	return count, false, nil
}
