package schedule

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/schedule/cron"
)

// Interval bounds for Every, in microseconds.
const (
	MinIntervalMicros = input.Second
	MaxIntervalMicros = 365 * input.Day
)

// DueAt returns the nominal due instant of an ordinal of the record's current generation for
// the At, After and Every kinds. exists is false when the series has no such ordinal
// (one-shot specs past ordinal 0, or an Every series that would pass MaxInstantMicros).
// Arithmetic overflow is a Validation error naming the spec field, never a wrapped value.
// Cron instants follow the record's cursor, not the ordinal: see the record's
// next_nominal_unix_micros.
func DueAt(rec *orreryv1.ScheduleRecord, ordinal uint64) (dueAtMicros int64, exists bool, err error) {
	spec := rec.GetDefinition().GetSpec()
	switch kind := spec.GetKind().(type) {
	case *orreryv1.ScheduleSpec_At:
		if ordinal > 0 {
			return 0, false, nil
		}
		return kind.At.GetDueAtUnixMicros(), true, nil
	case *orreryv1.ScheduleSpec_After:
		if ordinal > 0 {
			return 0, false, nil
		}
		at, ok := input.AddMicros(rec.GetGenerationStartedAtUnixMicros(), kind.After.GetDelayMicros())
		if !ok {
			return 0, false, orrery.Invalid("definition.spec.after.delay_micros", "creation time plus delay is past 9999-12-31")
		}
		return at, true, nil
	case *orreryv1.ScheduleSpec_Every:
		return everyDueAt(kind.Every, ordinal)
	case *orreryv1.ScheduleSpec_Cron:
		return 0, false, orrery.Invalid("definition.spec.cron", "cron instants follow the schedule's cursor, not an ordinal")
	default:
		return 0, false, orrery.Invalid("definition.spec", "has no kind (at, after, every or cron)")
	}
}

// everyDueAt is FirstDueAt + ordinal × interval with checked arithmetic. An instant past
// MaxInstantMicros ends the series; a product that overflows 64 bits is a Validation error.
func everyDueAt(every *orreryv1.EverySpec, ordinal uint64) (int64, bool, error) {
	hi, offset := bits.Mul64(ordinal, uint64(every.GetIntervalMicros()))
	if hi != 0 || offset > uint64(1<<63-1) {
		return 0, false, orrery.Invalid("definition.spec.every", "ordinal %d × interval %s overflows", ordinal, duration(every.GetIntervalMicros()))
	}
	at, ok := input.AddMicros(every.GetFirstDueAtUnixMicros(), int64(offset))
	if !ok {
		return 0, false, nil
	}
	return at, true, nil
}

// series computes the nominal instants of a record's generation.
type series struct {
	rec  *orreryv1.ScheduleRecord
	cron *cron.Schedule // set for cron specs
}

// newSeries prepares the record's series; a cron expression is parsed in location, the
// zone's from the partition's rules (see evaluate).
func newSeries(rec *orreryv1.ScheduleRecord, location *time.Location) (series, error) {
	c := rec.GetDefinition().GetSpec().GetCron()
	if c == nil {
		return series{rec: rec}, nil
	}
	parsed, err := parseCron(c, rec.GetDefinition().GetScheduleId(), location)
	if err != nil {
		return series{}, orrery.AsError(err).InField("definition.spec.cron")
	}
	return series{rec: rec, cron: parsed}, nil
}

// after returns the nominal instant of ordinal, the successor of the instant (or cron
// cursor) previousMicros. exists is false when the series has no such instant, a bound of the
// definition (see bound) included.
func (s series) after(ordinal uint64, previousMicros int64) (int64, bool, error) {
	at, exists, err := s.unbounded(ordinal, previousMicros)
	if err != nil || !exists || s.bound(ordinal, at) != "" {
		return 0, false, err
	}
	return at, true, nil
}

// bound is why a bound of the definition withholds ordinal, whose instant is atMicros: its
// max_occurrences reached, or its end_at passed; "" when none does.
func (s series) bound(ordinal uint64, atMicros int64) string {
	def := s.rec.GetDefinition()
	if n := def.GetMaxOccurrences(); n > 0 && ordinal >= n {
		return fmt.Sprintf("max_occurrences %d reached", n)
	}
	if end := def.GetEndAtUnixMicros(); end > 0 && atMicros > end {
		return fmt.Sprintf("end_at %s passed", time.UnixMicro(end).UTC().Format(time.RFC3339Nano))
	}
	return ""
}

// unbounded is after without the definition's bounds.
func (s series) unbounded(ordinal uint64, previousMicros int64) (int64, bool, error) {
	if s.cron == nil {
		return DueAt(s.rec, ordinal)
	}
	next, ok := s.cron.Next(time.UnixMicro(previousMicros))
	if !ok || next.UnixMicro() > input.MaxInstantMicros {
		return 0, false, nil
	}
	return next.UnixMicro(), true, nil
}

// setNext stores the nominal instant of rec.NextOrdinal (after the cron cursor for cron), or
// that the series ended, and why when a bound ended it.
func (s series) setNext() error {
	ordinal := s.rec.GetNextOrdinal()
	at, exists, err := s.unbounded(ordinal, s.rec.GetCronCursorUnixMicros())
	if err != nil {
		return err
	}
	reason := ""
	if exists {
		reason = s.bound(ordinal, at)
	}
	s.rec.SeriesEnded, s.rec.SeriesEndReason, s.rec.SeriesEndWithheldUnixMicros = !exists || reason != "", reason, 0
	s.rec.NextNominalUnixMicros = at
	if reason != "" {
		s.rec.SeriesEndWithheldUnixMicros = at
	}
	if s.rec.SeriesEnded {
		s.rec.NextNominalUnixMicros = 0
	}
	return nil
}

// pass moves the watermark past ordinal, whose nominal instant is nominalMicros, and
// computes the next nominal instant.
func (s series) pass(ordinal uint64, nominalMicros int64) error {
	s.rec.NextOrdinal = ordinal + 1
	if s.cron != nil {
		s.rec.CronCursorUnixMicros = nominalMicros
	}
	return s.setNext()
}

// startAt moves the watermark to the first instant at or after floorMicros, never back: for
// cron by moving the cursor, for the other kinds by jumping the ordinal. It passes nothing
// and writes no ledger record, so it is only for previews (Inspect) on a copy of the record;
// a resume passes the instants before its floor one by one (passPaused).
func (s series) startAt(floorMicros int64) error {
	rec := s.rec
	if !rec.GetSeriesEnded() && rec.GetNextNominalUnixMicros() >= floorMicros {
		return nil
	}
	if s.cron != nil {
		if !rec.GetSeriesEnded() {
			rec.CronCursorUnixMicros = max(rec.GetCronCursorUnixMicros(), floorMicros-1)
		}
		return s.setNext()
	}
	next, exists, err := firstOrdinalAtOrAfter(rec, rec.GetNextOrdinal(), floorMicros)
	if err != nil {
		return err
	}
	if !exists {
		// The series has nothing left at or after the floor: park the ordinal past its end.
		next = lastOrdinalPlusOne(rec)
	}
	rec.NextOrdinal = next
	return s.setNext()
}

// firstOrdinalAtOrAfter returns the smallest ordinal ≥ from whose due instant is ≥ instant
// (not for cron). exists is false when no such ordinal remains.
func firstOrdinalAtOrAfter(rec *orreryv1.ScheduleRecord, from uint64, instantMicros int64) (uint64, bool, error) {
	if every := rec.GetDefinition().GetSpec().GetEvery(); every != nil && instantMicros > every.GetFirstDueAtUnixMicros() {
		gap := uint64(instantMicros - every.GetFirstDueAtUnixMicros())
		interval := uint64(every.GetIntervalMicros())
		ordinal := (gap + interval - 1) / interval
		from = max(from, ordinal)
	}
	for {
		at, exists, err := DueAt(rec, from)
		if err != nil || !exists {
			return 0, false, err
		}
		if at >= instantMicros {
			return from, true, nil
		}
		from++
	}
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
