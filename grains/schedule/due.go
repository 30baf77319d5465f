package schedule

import (
	"math/bits"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

// Interval bounds for Every, in microseconds.
const (
	MinIntervalMicros = input.Second
	MaxIntervalMicros = 365 * input.Day
)

// DueAt returns the nominal due instant of an ordinal of the record's current generation.
// exists is false when the series has no such ordinal (one-shot specs past ordinal 0, or an
// Every series that would pass MaxInstantMicros). Arithmetic overflow is a Validation error
// naming the spec field, never a wrapped value.
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
	default:
		return 0, false, orrery.Invalid("definition.spec", "has no kind (at, after or every)")
	}
}

// everyDueAt is FirstDueAt + ordinal × interval with checked arithmetic. An instant past
// MaxInstantMicros ends the series; a product that overflows 64 bits is a Validation error.
func everyDueAt(every *orreryv1.EverySpec, ordinal uint64) (int64, bool, error) {
	hi, offset := bits.Mul64(ordinal, uint64(every.GetIntervalMicros()))
	if hi != 0 || offset > uint64(1<<63-1) {
		return 0, false, orrery.Invalid("definition.spec.every", "ordinal %d × interval %d µs overflows", ordinal, every.GetIntervalMicros())
	}
	at, ok := input.AddMicros(every.GetFirstDueAtUnixMicros(), int64(offset))
	if !ok {
		return 0, false, nil
	}
	return at, true, nil
}

// firstOrdinalAtOrAfter returns the smallest ordinal ≥ from whose due instant is ≥ instant
// (for resume). exists is false when no such ordinal remains.
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
