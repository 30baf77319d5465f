package schedule

import (
	"testing"

	"pgregory.net/rapid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// oracleDue lists a definition's due instants up to now by brute force: repeated addition
// from the first instant for Every, the one instant for At and After. It shares nothing with
// DueAt's multiplication.
func oracleDue(spec *orreryv1.ScheduleSpec, createdAt, now int64) []int64 {
	var out []int64
	switch k := spec.GetKind().(type) {
	case *orreryv1.ScheduleSpec_At:
		if k.At.GetDueAtUnixMicros() <= now {
			out = append(out, k.At.GetDueAtUnixMicros())
		}
	case *orreryv1.ScheduleSpec_After:
		if at := createdAt + k.After.GetDelayMicros(); at <= now {
			out = append(out, at)
		}
	case *orreryv1.ScheduleSpec_Every:
		for at := k.Every.GetFirstDueAtUnixMicros(); at <= now; at += k.Every.GetIntervalMicros() {
			out = append(out, at)
		}
	}
	return out
}

// oracleNext is the instant after the ones already due: one more addition for Every, the one
// instant for At and After if it has not fired, zero when the series is over.
func oracleNext(spec *orreryv1.ScheduleSpec, createdAt int64, fired []int64) int64 {
	switch k := spec.GetKind().(type) {
	case *orreryv1.ScheduleSpec_Every:
		next := k.Every.GetFirstDueAtUnixMicros()
		if len(fired) > 0 {
			next = fired[len(fired)-1] + k.Every.GetIntervalMicros()
		}
		if next > input.MaxInstantMicros {
			return 0
		}
		return next
	default:
		if len(fired) > 0 {
			return 0
		}
		return oracleDue(spec, createdAt, input.MaxInstantMicros)[0]
	}
}

// oracleBounded keeps the instants of due that def's bounds let fire: none after its end, at
// most its maximum count, by filtering the brute-force list.
func oracleBounded(def *orreryv1.ScheduleDefinition, due []int64) []int64 {
	var out []int64
	for _, at := range due {
		if end := def.GetEndAtUnixMicros(); end > 0 && at > end {
			break
		}
		if n := def.GetMaxOccurrences(); n > 0 && uint64(len(out)) >= n {
			break
		}
		out = append(out, at)
	}
	return out
}

// oracleFired keeps the leading instants of bounded (the nominal instants, in order) that have
// fired by now under def's jitter: an instant fires at its nominal instant plus its offset,
// and not before every earlier one has fired. It returns them and the fire instant of the first
// one left (0: none left).
func oracleFired(def *orreryv1.ScheduleDefinition, bounded []int64, now int64) (fired []int64, next int64) {
	for k, at := range bounded {
		fire := min(max(at+JitterOffsetMicros(def, 1, uint64(k)), 0), input.MaxInstantMicros)
		if fire > now {
			return fired, fire
		}
		fired = append(fired, at)
	}
	return fired, 0
}

func genSpec(t *rapid.T) *orreryv1.ScheduleSpec {
	switch rapid.IntRange(0, 2).Draw(t, "kind") {
	case 0:
		return at(t0 + rapid.Int64Range(-10*input.Day, 10*input.Day).Draw(t, "at"))
	case 1:
		return after(rapid.Int64Range(0, 10*input.Day).Draw(t, "delay"))
	default:
		// Log-uniform interval between 1 s and 365 days, plus sub-second jitter.
		scale := []int64{sec, 7 * sec, input.Minute, 13 * input.Minute, hour, input.Day, 30 * input.Day, 365 * input.Day}
		interval := rapid.SampledFrom(scale).Draw(t, "interval") + rapid.Int64Range(0, sec-1).Draw(t, "jitter")
		interval = min(interval, MaxIntervalMicros)
		first := max(1, t0+rapid.Int64Range(-300, 300).Draw(t, "firstOffset")*interval/4)
		return every(first, interval)
	}
}

// TestDueTimesMatchBruteForceOracle configures random definitions, with random bounds (an end,
// a maximum count) half the time and a random jitter (late only, or either side) a third of
// the time, emits with random batch sizes at random advancing logged times, and checks the
// emitted ordinals and nominal instants are exactly the oracle's instants fired by each logged
// time, within the bounds, in order, with none before its (jittered) instant.
func TestDueTimesMatchBruteForceOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := genSpec(t)
		createdAt := t0 + rapid.Int64Range(-input.Day, input.Day).Draw(t, "createdAt")
		v := kv.NewMemory()
		def := definition(spec)
		unit := input.Day
		if e := spec.GetEvery(); e != nil {
			unit = e.GetIntervalMicros()
		}
		// Bounds, half the time: an end within about 100 units of the creation, a maximum count.
		switch rapid.IntRange(0, 5).Draw(t, "bounds") {
		case 3:
			def.EndAtUnixMicros = max(1, createdAt+rapid.Int64Range(-10, 100).Draw(t, "endUnits")*unit+rapid.Int64Range(0, unit).Draw(t, "endPhase"))
		case 4:
			def.MaxOccurrences = rapid.Uint64Range(1, 60).Draw(t, "max")
		case 5:
			def.EndAtUnixMicros = max(1, createdAt+rapid.Int64Range(-10, 100).Draw(t, "endUnits")*unit)
			def.MaxOccurrences = rapid.Uint64Range(1, 60).Draw(t, "max")
		}
		if rapid.IntRange(0, 2).Draw(t, "jittered") == 0 {
			def.JitterMicros = rapid.Int64Range(MinJitterMicros, min(MaxJitterMicros, 3*unit)).Draw(t, "jitter")
			def.JitterAllowEarly = rapid.Bool().Draw(t, "early")
		}
		if _, err := applyConfigure(v, input.DefaultLimits(), "alice", &orreryv1.ConfigureSchedule{Definition: def}, createdAt); err != nil {
			t.Fatalf("configure: %v", err)
		}
		var emitted []int64
		now := createdAt
		for step := range rapid.IntRange(1, 8).Draw(t, "steps") {
			// Advance by up to 80 units (intervals for Every), at any sub-unit phase.
			now += rapid.Int64Range(0, 80).Draw(t, "units")*unit + rapid.Int64Range(0, unit).Draw(t, "phase")
			horizon := min(now+def.GetJitterMicros(), input.MaxInstantMicros)
			want, wantNext := oracleFired(def, oracleBounded(def, oracleDue(spec, createdAt, horizon)), now)
			for {
				res, err := ApplyEmit(v, input.DefaultLimits(), &orreryv1.EmitOccurrences{
					Lane: lane, ScheduleId: scheduleID, ExpectedGeneration: 1, Max: uint32(rapid.IntRange(1, 32).Draw(t, "max")),
				}, now)
				if err != nil {
					t.Fatalf("step %d emit: %v", step, err)
				}
				if len(res.GetEnqueuedIds()) == 0 {
					break
				}
				for _, id := range res.GetEnqueuedIds() {
					o := enqueued(t, v, id).GetOccurrence()
					if o.GetOrdinal() != uint64(len(emitted)) {
						t.Fatalf("ordinal %d emitted after %d occurrences", o.GetOrdinal(), len(emitted))
					}
					if fire := o.GetNominalDueAtUnixMicros() + JitterOffsetMicros(def, 1, o.GetOrdinal()); fire > now {
						t.Fatalf("occurrence due %d (fires at %d) emitted early at %d", o.GetNominalDueAtUnixMicros(), fire, now)
					}
					emitted = append(emitted, o.GetNominalDueAtUnixMicros())
				}
			}
			if len(emitted) != len(want) {
				t.Fatalf("at %d: emitted %d occurrences, oracle %d", now, len(emitted), len(want))
			}
			for i := range want {
				if emitted[i] != want[i] {
					t.Fatalf("ordinal %d due %d, oracle %d", i, emitted[i], want[i])
				}
			}
			// The record's next due is the oracle's next fire instant.
			rec, _, _ := Load(v, lane, scheduleID)
			if wantNext == 0 { // every instant up to the horizon fired: the one after them
				n := oracleNext(spec, createdAt, want)
				if end := def.GetEndAtUnixMicros(); (end > 0 && n > end) || (def.GetMaxOccurrences() > 0 && uint64(len(want)) >= def.GetMaxOccurrences()) {
					n = 0 // a bound ended the series
				}
				if n != 0 {
					n = min(max(n+JitterOffsetMicros(def, 1, uint64(len(want))), 0), input.MaxInstantMicros)
				}
				wantNext = n
			}
			if rec.GetNextDueAtUnixMicros() != wantNext {
				t.Fatalf("next due %d, oracle %d", rec.GetNextDueAtUnixMicros(), wantNext)
			}
		}
	})
}

// TestEveryDueAtMatchesRepeatedAddition checks DueAt against repeated addition for random
// ordinals (the oracle walks; DueAt multiplies).
func TestEveryDueAtMatchesRepeatedAddition(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		interval := rapid.Int64Range(MinIntervalMicros, MaxIntervalMicros).Draw(t, "interval")
		first := rapid.Int64Range(0, 4*t0).Draw(t, "first")
		ordinal := rapid.Uint64Range(0, 5000).Draw(t, "ordinal")
		rec := &orreryv1.ScheduleRecord{Definition: definition(every(first, interval))}
		got, exists, err := DueAt(rec, ordinal)
		if err != nil {
			t.Fatal(err)
		}
		walk := first
		overflow := false
		for range ordinal {
			walk += interval
			if walk > input.MaxInstantMicros {
				overflow = true
				break
			}
		}
		if exists == overflow || (exists && got != walk) {
			t.Fatalf("DueAt(%d)=%d exists=%v; walk=%d past-end=%v", ordinal, got, exists, walk, overflow)
		}
	})
}

// enqueued loads one message of the test lane by id. (Scanning every message after each
// emit made a backlog of tens of thousands of one-second occurrences quadratic: the property
// occasionally ran for minutes.)
func enqueued(t *rapid.T, v kv.Reader, id string) *orreryv1.QueueMessage {
	m := &orreryv1.QueueMessage{}
	found, err := record.Load(v, keys.MessageKey(lane, id), m)
	if err != nil || !found {
		t.Fatalf("enqueued message %s: found=%v err=%v", id, found, err)
	}
	return m
}
