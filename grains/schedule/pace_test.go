package schedule

import (
	"testing"

	"pgregory.net/rapid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// TestAPacedCatchUpDrainsAtItsPace: a schedule configured an hour after its first instant, paced
// at 5 occurrences per 10 minutes, enqueues the 5 oldest at once, holds its due entry at the
// window's end, enqueues nothing before it, and the next 5 then; describe counts the backlog.
func TestAPacedCatchUpDrainsAtItsPace(t *testing.T) {
	v := kv.NewMemory()
	def := definition(every(t0, minute))
	def.CatchUpPace = &orreryv1.CatchUpPace{MaxPerWindow: 5, WindowMicros: 10 * minute}
	now := t0 + hour
	configure(t, v, def, 0, now)
	if insp, err := Inspect(v, lane, scheduleID, now); err != nil || insp.GetBacklog() != 61 || insp.GetBacklogCapped() {
		t.Fatalf("backlog %d capped %v (%v), want 61", insp.GetBacklog(), insp.GetBacklogCapped(), err)
	}
	ids := drain(t, v, 1, now)
	if len(ids) != 5 || ids[0] != OccurrenceID(scheduleID, 1, 0) {
		t.Fatalf("first window enqueued %v, want ordinals 0..4", ids)
	}
	if due := mustLoad(t, v).GetNextDueAtUnixMicros(); due != now+10*minute {
		t.Fatalf("due at %d, want the window's end %d", due, now+10*minute)
	}
	if ids := drain(t, v, 1, now+9*minute); len(ids) != 0 {
		t.Fatalf("enqueued %v inside the full window", ids)
	}
	if ids := drain(t, v, 1, now+10*minute); len(ids) != 5 || ids[0] != OccurrenceID(scheduleID, 1, 5) {
		t.Fatalf("second window enqueued %v, want ordinals 5..9", ids)
	}
	if insp, err := Inspect(v, lane, scheduleID, now+10*minute); err != nil || insp.GetBacklog() != 61+10-10 {
		t.Fatalf("backlog %d (%v), want 61", insp.GetBacklog(), err)
	}
}

// TestThePaceIsValidated: a pace of 0 or more than 1000 per window, or a window outside 1 s..1
// day, is refused naming the field.
func TestThePaceIsValidated(t *testing.T) {
	for _, c := range []struct {
		pace  *orreryv1.CatchUpPace
		field string
	}{
		{&orreryv1.CatchUpPace{MaxPerWindow: 0, WindowMicros: minute}, "catch_up_pace.max_per_window"},
		{&orreryv1.CatchUpPace{MaxPerWindow: 1001, WindowMicros: minute}, "catch_up_pace.max_per_window"},
		{&orreryv1.CatchUpPace{MaxPerWindow: 1, WindowMicros: sec / 2}, "catch_up_pace.window_micros"},
		{&orreryv1.CatchUpPace{MaxPerWindow: 1, WindowMicros: 2 * input.Day}, "catch_up_pace.window_micros"},
	} {
		def := definition(every(t0, minute))
		def.CatchUpPace = c.pace
		if err := ValidateDefinition(def, input.DefaultLimits()); err == nil || err.Field != c.field {
			t.Fatalf("pace %v: %v, want Validation on %s", c.pace, err, c.field)
		}
	}
}

// TestPacedEmissionMatchesBruteForceOracle: for random Every schedules and paces, emits at
// random advancing times enqueue a prefix of the brute-force instants, in order; replayed from
// the enqueue log, no pace window ever holds more than its maximum; and the instants due at a
// moment are all enqueued within as many windows as the pace needs for them.
func TestPacedEmissionMatchesBruteForceOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		interval := rapid.SampledFrom([]int64{sec, 7 * sec, minute, hour}).Draw(t, "interval")
		first := t0 - rapid.Int64Range(0, 200).Draw(t, "backlog")*interval
		window := rapid.SampledFrom([]int64{sec, 10 * sec, minute, 10 * minute}).Draw(t, "window")
		per := rapid.Uint32Range(1, 20).Draw(t, "per")
		def := definition(every(first, interval))
		def.CatchUpPace = &orreryv1.CatchUpPace{MaxPerWindow: per, WindowMicros: window}
		v := kv.NewMemory()
		if _, err := applyConfigure(v, input.DefaultLimits(), "alice", &orreryv1.ConfigureSchedule{Definition: def}, t0); err != nil {
			t.Fatalf("configure: %v", err)
		}
		var times, nominals []int64
		now := t0
		emitAll := func() {
			for {
				res, err := ApplyEmit(v, input.DefaultLimits(), &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: scheduleID, ExpectedGeneration: 1,
					Max: uint32(rapid.IntRange(1, 32).Draw(t, "max"))}, now)
				if err != nil {
					t.Fatalf("emit: %v", err)
				}
				if len(res.GetEnqueuedIds()) == 0 {
					return
				}
				for _, n := range res.GetEnqueuedNominalDueAtUnixMicros() {
					times, nominals = append(times, now), append(nominals, n)
				}
			}
		}
		for range rapid.IntRange(1, 30).Draw(t, "steps") {
			now += rapid.Int64Range(0, 2*window).Draw(t, "advance")
			emitAll()
		}
		// Prefix of the oracle's instants, in order.
		want := oracleDue(def.GetSpec(), t0, now)
		if len(nominals) > len(want) {
			t.Fatalf("enqueued %d instants, only %d due", len(nominals), len(want))
		}
		for i := range nominals {
			if nominals[i] != want[i] {
				t.Fatalf("occurrence %d is due %d, oracle %d", i, nominals[i], want[i])
			}
		}
		// No window over its maximum: windows open at the first enqueue after the last ended.
		start, in := int64(0), uint32(0)
		for i, at := range times {
			if i == 0 || at >= start+window {
				start, in = at, 0
			}
			if in++; in > per {
				t.Fatalf("enqueue %d at %d is the %d-th of the window from %d (max %d)", i, at, in, start, per)
			}
		}
		// Oldest first: within as many windows as they need, every instant due by now is
		// enqueued, however many fall due meanwhile.
		due := len(oracleDue(def.GetSpec(), t0, now))
		for range due/int(per) + 2 {
			if len(nominals) >= due {
				return
			}
			now += window
			emitAll()
		}
		if len(nominals) < due {
			t.Fatalf("after %d windows %d of the %d instants due before them are enqueued", due/int(per)+2, len(nominals), due)
		}
	})
}
