package schedule

import (
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/schedule/cron"
)

// tamper rewrites the stored record as if another silo (other tzdata, other evaluator) had
// configured it.
func tamper(t *testing.T, v kv.View, change func(*orreryv1.ScheduleRecord)) {
	t.Helper()
	rec := mustLoad(t, v)
	change(rec)
	if _, err := record.Store(v, keys.ScheduleKey(lane, scheduleID), rec); err != nil {
		t.Fatal(err)
	}
}

func TestConfigurePinsEvaluatorAndFingerprint(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(cronSpec("0 9 * * MON-FRI", "America/New_York")), 0, t0)
	rec := mustLoad(t, v)
	from, to := fingerprintHorizon(t0)
	want, err := cron.Fingerprint("America/New_York", from, to)
	if err != nil {
		t.Fatal(err)
	}
	if rec.GetEvaluatorVersion() != cron.EvaluatorVersion || rec.GetZoneFingerprint() != want {
		t.Fatalf("pinned version %d fingerprint %s, want %d %s", rec.GetEvaluatorVersion(), rec.GetZoneFingerprint(), cron.EvaluatorVersion, want)
	}
	if from != t0/sec-86400 || to != utc(t, "2031-01-01T00:00:00Z")/sec {
		t.Fatalf("horizon %d..%d", from, to)
	}
	// Other kinds pin nothing.
	v = kv.NewMemory()
	configure(t, v, definition(every(t0, hour)), 0, t0)
	if rec := mustLoad(t, v); rec.GetEvaluatorVersion() != 0 || rec.GetZoneFingerprint() != "" {
		t.Fatalf("every pinned %v", rec)
	}
}

// TestEvaluatorMismatchSuspendsAndNewGenerationReleases covers both pinned values: a silo whose
// rules disagree suspends the schedule at the next emit (reason visible, SUSPENDED ledger
// record, no due entry, nothing enqueued), never reinterprets it; only a new generation
// releases it.
func TestEvaluatorMismatchSuspendsAndNewGenerationReleases(t *testing.T) {
	cases := []struct {
		name   string
		change func(*orreryv1.ScheduleRecord)
		reason string
	}{
		{"zone fingerprint", func(r *orreryv1.ScheduleRecord) { r.ZoneFingerprint = strings.Repeat("0", 64) }, "tzdata changed"},
		{"evaluator version", func(r *orreryv1.ScheduleRecord) { r.EvaluatorVersion = cron.EvaluatorVersion + 1 }, "evaluator version"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := kv.NewMemory()
			configure(t, v, definition(cronSpec("*/10 * * * *", "America/New_York")), 0, t0)
			if res := mustEmit(t, v, 1, t0); len(res.GetEnqueuedIds()) != 1 {
				t.Fatalf("first emit %v", res)
			}
			tamper(t, v, c.change)
			// Nothing due yet: no check, no write.
			before := v.Clone()
			if res := mustEmit(t, v, 1, t0+5*minute); len(res.GetEnqueuedIds()) != 0 || !v.Equal(before) {
				t.Fatalf("not-due emit wrote: %v", res)
			}
			insp, err := Inspect(v, lane, scheduleID, t0+5*minute)
			if err != nil || !strings.Contains(insp.GetEvaluatorMismatch(), c.reason) || len(insp.GetNextFireTimesUnixMicros()) != 0 {
				t.Fatalf("inspection before the emit: %v %v", insp, err)
			}
			res := mustEmit(t, v, 1, t0+10*minute)
			if len(res.GetEnqueuedIds()) != 0 || !strings.Contains(res.GetSuspendedReason(), c.reason) || res.GetNextDueAtUnixMicros() != 0 {
				t.Fatalf("emit on a mismatch: %v", res)
			}
			rec := mustLoad(t, v)
			if !rec.GetSuspended() || rec.GetSuspendedAtUnixMicros() != t0+10*minute || len(messages(t, v)) != 1 {
				t.Fatalf("suspended record %v", rec)
			}
			wantDue(t, v, 0, 0)
			led := ledgerOf(t, v)
			last := led[len(led)-1]
			if last.GetOutcome() != outSuspended || last.GetOrdinal() != 1 || last.GetNominalDueAtUnixMicros() != t0+10*minute || last.GetReason() != rec.GetSuspendedReason() {
				t.Fatalf("ledger %v", led)
			}
			insp, _ = Inspect(v, lane, scheduleID, t0+10*minute)
			if insp.GetSuspendedReason() != rec.GetSuspendedReason() || insp.GetLastOutcomes()[0].GetOutcome() != outSuspended {
				t.Fatalf("inspection %v", insp)
			}
			// Suspended: emits nothing, refuses triggers, and a resume does not release it.
			before = v.Clone()
			if res := mustEmit(t, v, 1, t0+hour); len(res.GetEnqueuedIds()) != 0 || !v.Equal(before) {
				t.Fatalf("suspended schedule emitted %v", res)
			}
			_, err = trigger(v, t0+hour)
			wantCode(t, err, orrery.ErrSuspended, "schedule_id")
			pause(t, v, t0+hour)
			if res := resume(t, v, t0+hour+sec); res.GetSuspendedReason() == "" || res.GetNextDueAtUnixMicros() != 0 {
				t.Fatalf("resume released a suspension: %v", res)
			}
			// A new ConfigureSchedule releases it with freshly pinned rules.
			res = configure(t, v, definition(cronSpec("*/10 * * * *", "America/New_York")), mustLoad(t, v).GetRevision(), t0+2*hour)
			if res.GetGeneration() != 2 || res.GetSuspendedReason() != "" || res.GetNextDueAtUnixMicros() != t0+2*hour {
				t.Fatalf("new generation %v", res)
			}
			if res := mustEmit(t, v, 2, t0+2*hour); len(res.GetEnqueuedIds()) != 1 {
				t.Fatalf("released schedule did not emit: %v", res)
			}
		})
	}
}

// TestResumeOnMismatchedSiloSuspends: a resume must compute the next instant, so it checks
// the pinned rules too.
func TestResumeOnMismatchedSiloSuspends(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(cronSpec("@hourly", "Europe/London")), 0, t0)
	pause(t, v, t0)
	tamper(t, v, func(r *orreryv1.ScheduleRecord) { r.ZoneFingerprint = "x" })
	res := resume(t, v, t0+5*hour)
	if res.GetSuspendedReason() == "" || res.GetNextDueAtUnixMicros() != 0 || mustLoad(t, v).GetPaused() {
		t.Fatalf("resume on a mismatch: %v", res)
	}
	wantDue(t, v, 0, 0)
}

// TestClockAnomalySuspendsInsteadOfFlooding: a logged time further past the next nominal
// instant than the anomaly window suspends; within it the backlog catches up.
func TestClockAnomalySuspendsInsteadOfFlooding(t *testing.T) {
	for _, spec := range []*orreryv1.ScheduleSpec{every(t0, minute), cronSpec("* * * * *", "Asia/Tokyo")} {
		v := kv.NewMemory()
		def := definition(spec)
		def.AnomalyWindowMicros = 10 * minute
		configure(t, v, def, 0, t0)
		if res := mustEmit(t, v, 1, t0+9*minute); len(res.GetEnqueuedIds()) != 10 {
			t.Fatalf("within the window: %v", res)
		}
		// Next nominal is t0+10m; the clock jumps to t0+1d.
		res := mustEmit(t, v, 1, t0+input.Day)
		if len(res.GetEnqueuedIds()) != 0 || !strings.Contains(res.GetSuspendedReason(), "clock anomaly") || res.GetPassedWithoutMessage() != 1 {
			t.Fatalf("anomaly: %v", res)
		}
		wantDue(t, v, 0, 0)
		if got := outcomesOf(t, v, 1); len(got) != 11 || got[10] != outSuspended {
			t.Fatalf("outcomes %v", got)
		}
		// A generation configured with a backlog is not an anomaly: the reference is its start.
		configure(t, v, def, mustLoad(t, v).GetRevision(), t0+input.Day)
		mustEmit(t, v, 2, t0+input.Day+sec)
		if rec := mustLoad(t, v); rec.GetSuspended() {
			t.Fatalf("backlog of a new generation suspended it: %s", rec.GetSuspendedReason())
		}
	}
}
