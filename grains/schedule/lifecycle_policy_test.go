package schedule

import (
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

func pause(t *testing.T, v kv.View, now int64) *orreryv1.ScheduleResult {
	t.Helper()
	res, err := ApplyPause(v, input.DefaultLimits(), &orreryv1.PauseSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: mustLoad(t, v).GetRevision()}, now)
	if err != nil {
		t.Fatalf("pause: %v", err)
	}
	return res
}

func resume(t *testing.T, v kv.View, now int64) *orreryv1.ScheduleResult {
	t.Helper()
	res, err := ApplyResume(v, input.DefaultLimits(), &orreryv1.ResumeSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: mustLoad(t, v).GetRevision()}, now)
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	return res
}

func trigger(v kv.View, now int64) (*orreryv1.ScheduleResult, error) {
	return ApplyTrigger(v, input.DefaultLimits(), &orreryv1.TriggerSchedule{Lane: lane, ScheduleId: scheduleID}, now)
}

// TestPauseResumeByMisfirePolicy: an Every-minute schedule emits ordinal 0 at t0, is paused
// at t0+30s and resumed at t0+10m30s. Without a catch-up window nothing of the paused window
// is back-filled; with one of 3 minutes its last three instants follow the misfire policy.
func TestPauseResumeByMisfirePolicy(t *testing.T) {
	cases := []struct {
		name       string
		spec       *orreryv1.ScheduleSpec
		misfire    orreryv1.MisfirePolicy
		window     int64
		nextAfter  int64  // NextDueAt after the resume
		ordinal    uint64 // NextOrdinal after the resume
		messages   int    // after draining at the resume's logged time (ordinal 0 included)
		lastCount  uint64 // coalesced count of the last message
		firstAfter uint64 // ordinal of the first occurrence after the resume
	}{
		{"catch-up, no window: first instant after the resume", every(t0, minute), catchUp, 0, t0 + 11*minute, 11, 1, 0, 11},
		{"catch-up window back-fills its span", every(t0, minute), catchUp, 3 * minute, t0 + 8*minute, 8, 4, 0, 8},
		{"skip window: only the most recent", every(t0, minute), skipMis, 3 * minute, t0 + 8*minute, 8, 2, 0, 10},
		{"coalesce window: one for the span", every(t0, minute), coalesce, 3 * minute, t0 + 8*minute, 8, 2, 3, 10},
		// Cron ordinals count the paused instants too: each is passed PAUSED.
		{"cron, no window", cronSpec("* * * * *", ""), catchUp, 0, t0 + 11*minute, 11, 1, 0, 11},
		{"cron, catch-up window", cronSpec("* * * * *", ""), catchUp, 3 * minute, t0 + 8*minute, 8, 4, 0, 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := kv.NewMemory()
			def := policies(c.spec, c.misfire, allowAll)
			def.CatchUpWindowMicros = c.window
			configure(t, v, def, 0, t0)
			mustEmit(t, v, 1, t0)
			if res := pause(t, v, t0+30*sec); res.GetNextDueAtUnixMicros() != 0 {
				t.Fatalf("paused schedule is due at %d", res.GetNextDueAtUnixMicros())
			}
			wantDue(t, v, 0, 0)
			before := v.Clone()
			if res := mustEmit(t, v, 1, t0+5*minute); len(res.GetEnqueuedIds()) != 0 || !v.Equal(before) {
				t.Fatalf("emit while paused wrote: %v", res)
			}
			_, err := trigger(v, t0+5*minute)
			wantCode(t, err, orrery.ErrSuspended, "paused")

			res := resume(t, v, t0+10*minute+30*sec)
			if res.GetNextDueAtUnixMicros() != c.nextAfter || res.GetNextOrdinal() != c.ordinal {
				t.Fatalf("resume: next due %d ordinal %d, want %d and %d", res.GetNextDueAtUnixMicros(), res.GetNextOrdinal(), c.nextAfter, c.ordinal)
			}
			wantDue(t, v, c.nextAfter, 1)
			ids := drain(t, v, 1, t0+10*minute+30*sec)
			if got := len(messages(t, v)); got != c.messages {
				t.Fatalf("%d messages after the resume (%v), want %d", got, ids, c.messages)
			}
			if len(ids) > 0 {
				last := messages(t, v)[ids[len(ids)-1]].GetOccurrence()
				if last.GetCoalescedCount() != c.lastCount {
					t.Fatalf("last occurrence %v", last)
				}
			}
			if len(ids) == 0 {
				ids = drain(t, v, 1, c.nextAfter)
			}
			if len(ids) == 0 || messages(t, v)[ids[0]].GetOccurrence().GetOrdinal() != c.firstAfter {
				t.Fatalf("first occurrence after the resume %v, want ordinal %d", ids, c.firstAfter)
			}
			// Each instant the resume passed over (after ordinal 0, before the resume's logged
			// time minus the window) has one PAUSED record, and none of them was enqueued.
			floor := t0 + 10*minute + 30*sec - c.window
			paused := 0
			for _, e := range ledgerOf(t, v) {
				inWindow := e.GetNominalDueAtUnixMicros() > t0 && e.GetNominalDueAtUnixMicros() < floor
				if inWindow != (e.GetOutcome() == outPaused) {
					t.Fatalf("ledger record %v (paused window before %d)", e, floor)
				}
				if inWindow {
					paused++
				}
			}
			if want := int((floor - t0) / minute); paused != want {
				t.Fatalf("%d PAUSED records, want %d", paused, want)
			}
			for _, m := range messages(t, v) {
				if n := m.GetOccurrence().GetNominalDueAtUnixMicros(); n > t0 && n < floor {
					t.Fatalf("paused instant enqueued: %v", m)
				}
			}
		})
	}
}

// TestTriggerIsManualAndLedgered: a manual occurrence has its own id, a MANUAL ledger record,
// moves neither watermark nor revision, and is refused while paused, cancelled or suspended.
func TestTriggerIsManualAndLedgered(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, policies(every(t0+hour, hour), catchUp, bufferOne), 0, t0)
	res, err := trigger(v, t0+sec)
	if err != nil || len(res.GetEnqueuedIds()) != 1 || res.GetRevision() != 1 || res.GetNextOrdinal() != 0 {
		t.Fatalf("trigger: %v %v", res, err)
	}
	id := res.GetEnqueuedIds()[0]
	if id != ManualID(scheduleID, 1, t0+sec) || !messages(t, v)[id].GetOccurrence().GetManual() {
		t.Fatalf("manual message %v", messages(t, v)[id])
	}
	led := ledgerOf(t, v)
	if len(led) != 1 || led[0].GetOutcome() != outManual || !led[0].GetManual() || led[0].GetMessageId() != id || led[0].GetNominalDueAtUnixMicros() != t0+sec {
		t.Fatalf("ledger %v", led)
	}
	if rec := mustLoad(t, v); rec.GetInFlightMessageId() != "" {
		t.Fatal("a manual occurrence took the overlap slot")
	}
	before := v.Clone()
	if res, err := trigger(v, t0+sec); err != nil || len(res.GetEnqueuedIds()) != 0 || !v.Equal(before) {
		t.Fatalf("second trigger at the same logged time: %v %v", res, err)
	}
	suspendForTest(t, v)
	_, err = trigger(v, t0+2*sec)
	wantCode(t, err, orrery.ErrSuspended, "suspended")
}

// suspendForTest makes the stored record suspended, as an emit that found a mismatch would.
func suspendForTest(t *testing.T, v kv.View) {
	t.Helper()
	rec := mustLoad(t, v)
	if _, err := suspend(v, rec, "test", t0); err != nil {
		t.Fatal(err)
	}
	refreshNextDue(rec)
	if err := save(v, input.DefaultLimits(), rec, mustLoad(t, v).GetNextDueAtUnixMicros(), 0); err != nil {
		t.Fatal(err)
	}
}

// TestReplacementResetsLifecycleState: a new generation resets the ordinal and cursor,
// clears pause, cancellation and suspension, drops a buffered occurrence (DROPPED) and keeps
// the in-flight occurrence, whose ack then frees the new generation's slot.
func TestReplacementResetsLifecycleState(t *testing.T) {
	states := []struct {
		name  string
		setUp func(t *testing.T, v kv.View)
	}{
		{"paused", func(t *testing.T, v kv.View) { pause(t, v, t0+2*minute) }},
		{"suspended", suspendForTest},
		{"cancelled", func(t *testing.T, v kv.View) {
			if _, err := ApplyCancel(v, input.DefaultLimits(), &orreryv1.CancelSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: mustLoad(t, v).GetRevision()}); err != nil {
				t.Fatal(err)
			}
		}},
		{"running", func(*testing.T, kv.View) {}},
	}
	for _, st := range states {
		t.Run(st.name, func(t *testing.T) {
			v := kv.NewMemory()
			configure(t, v, policies(cronSpec("* * * * *", "Europe/Paris"), catchUp, bufferOne), 0, t0)
			mustEmit(t, v, 1, t0)        // ordinal 0 holds the slot
			mustEmit(t, v, 1, t0+minute) // ordinal 1 buffered
			st.setUp(t, v)
			old := mustLoad(t, v)
			res := configure(t, v, policies(cronSpec("*/5 * * * *", "Europe/Paris"), catchUp, bufferOne), old.GetRevision(), t0+2*minute+30*sec)
			rec := mustLoad(t, v)
			if res.GetGeneration() != 2 || rec.GetNextOrdinal() != 0 || rec.GetPaused() || rec.GetCancelled() || rec.GetSuspended() ||
				rec.GetSuspendedReason() != "" || rec.GetBuffered() != nil || rec.GetCronCursorUnixMicros() != t0+2*minute+30*sec-1 {
				t.Fatalf("replaced record %v", rec)
			}
			if rec.GetNextNominalUnixMicros() != t0+5*minute || rec.GetInFlightMessageId() != OccurrenceID(scheduleID, 1, 0) {
				t.Fatalf("replaced record %v", rec)
			}
			if got := outcomesOf(t, v, 1); got[1] != outDropped && got[1] != outSuspended {
				t.Fatalf("generation 1 outcomes %v", got)
			}
			wantDue(t, v, t0+5*minute, 2)
			// The old occurrence still overlaps: generation 2's first instant is buffered...
			mustEmit(t, v, 2, t0+5*minute)
			if got := outcomesOf(t, v, 2); got[0] != outBuffered {
				t.Fatalf("generation 2 outcomes %v", got)
			}
			// ...until the old occurrence's ack frees the slot.
			ackOccurrence(t, v, OccurrenceID(scheduleID, 1, 0), t0+6*minute)
			wantDue(t, v, t0+5*minute, 2)
			if res := mustEmit(t, v, 2, t0+6*minute); len(res.GetEnqueuedIds()) != 1 || res.GetEnqueuedIds()[0] != OccurrenceID(scheduleID, 2, 0) {
				t.Fatalf("after the ack: %v", res)
			}
			// A stale emit for generation 1 is refused.
			_, err := emit(v, 1, 32, t0+7*minute)
			wantCode(t, err, orrery.ErrTokenInvalidated, "expected_generation")
		})
	}
}

// TestPauseKeepsBufferedAndSlot: a pause keeps the buffered occurrence and the slot; after
// the holder's ack and a resume the buffered occurrence goes at once.
func TestPauseKeepsBufferedAndSlot(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, policies(every(t0, minute), catchUp, bufferOne), 0, t0)
	mustEmit(t, v, 1, t0)
	mustEmit(t, v, 1, t0+minute)
	pause(t, v, t0+90*sec)
	ackOccurrence(t, v, OccurrenceID(scheduleID, 1, 0), t0+100*sec)
	wantDue(t, v, 0, 0) // paused: the freed slot does not make it due
	res := resume(t, v, t0+110*sec)
	if res.GetNextDueAtUnixMicros() != t0+minute {
		t.Fatalf("resume with a buffered occurrence: due %d", res.GetNextDueAtUnixMicros())
	}
	if got := mustEmit(t, v, 1, t0+110*sec); len(got.GetEnqueuedIds()) != 1 || got.GetEnqueuedIds()[0] != OccurrenceID(scheduleID, 1, 1) {
		t.Fatalf("flush after resume: %v", got)
	}
}
