package schedule

import (
	"bytes"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/schedule/cron"
	"github.com/orreryhq/orrery/grains/schedule/zonerules"
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

// TestConfigurePinsEvaluatorAndKeepsZoneRules: a cron generation pins the partition's
// evaluator version, and the partition keeps the carried rules of its zone (none for UTC and
// the other kinds).
func TestConfigurePinsEvaluatorAndKeepsZoneRules(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(cronSpec("0 9 * * MON-FRI", "America/New_York")), 0, t0)
	if rec := mustLoad(t, v); rec.GetEvaluatorVersion() != pinnedEvaluatorVersion {
		t.Fatalf("pinned version %d, want %d", rec.GetEvaluatorVersion(), pinnedEvaluatorVersion)
	}
	want, _ := zonerules.Lookup("America/New_York")
	if held := heldRules(t, v, "America/New_York"); held.GetVersion() != zonerules.Version || !bytes.Equal(held.GetTzif(), want) {
		t.Fatalf("held rules %s (%d bytes), want %s (%d bytes)", held.GetVersion(), len(held.GetTzif()), zonerules.Version, len(want))
	}
	insp, err := Inspect(v, lane, scheduleID, t0)
	if err != nil || insp.GetZoneRulesVersion() != zonerules.Version {
		t.Fatalf("inspection names rules %q (%v), want %q", insp.GetZoneRulesVersion(), err, zonerules.Version)
	}
	for _, spec := range []*orreryv1.ScheduleSpec{every(t0, hour), cronSpec("@hourly", ""), cronSpec("@hourly", "UTC")} {
		v = kv.NewMemory()
		configure(t, v, definition(spec), 0, t0)
		held := 0
		if err := kv.ScanPrefix(v, keys.ZoneRules, func(_, _ []byte) (bool, error) { held++; return true, nil }); err != nil || held != 0 {
			t.Fatalf("%v kept %d zone rules (%v)", spec, held, err)
		}
	}
	if rec := mustLoad(t, v); rec.GetEvaluatorVersion() != pinnedEvaluatorVersion {
		t.Fatalf("UTC cron pinned %d", rec.GetEvaluatorVersion())
	}
}

// TestZoneRulesComeOnlyFromTheEntryAndTheState: every replica computes the same instants
// because they follow the rules the entry carries or the partition holds, never the applying
// process's zone database; newer carried rules replace held ones (and move the zone's
// schedules), older or equal ones do not.
func TestZoneRulesComeOnlyFromTheEntryAndTheState(t *testing.T) {
	t.Setenv("ZONEINFO", t.TempDir()) // the process's own database: empty, and never read
	real, _ := zonerules.Lookup("Europe/Berlin")
	asUTC, _ := zonerules.Lookup("UTC")
	rules := func(version string, tzif []byte) []*orreryv1.ZoneRules {
		return []*orreryv1.ZoneRules{{Zone: "Europe/Berlin", Version: version, Tzif: tzif}}
	}
	configureWith := func(v kv.View, id string, carried []*orreryv1.ZoneRules, expected uint64, now int64) *orreryv1.ScheduleResult {
		t.Helper()
		def := definition(cronSpec("0 22 * * *", "Europe/Berlin"))
		def.ScheduleId = id
		res, err := ApplyConfigure(v, input.DefaultLimits(), "alice", &orreryv1.ConfigureSchedule{Definition: def, ExpectedRevision: expected}, carried, now, Newest)
		if err != nil {
			t.Fatalf("configure %s: %v", id, err)
		}
		return res
	}
	summer := utc(t, "2026-07-01T00:00:00Z")
	tenPMBerlin, tenPMUTC := utc(t, "2026-07-01T20:00:00Z"), utc(t, "2026-07-01T22:00:00Z")

	v := kv.NewMemory()
	// A leader whose rules say Berlin is UTC, release 2025a: its entry decides.
	if res := configureWith(v, scheduleID, rules("2025a", asUTC), 0, summer); res.GetNextDueAtUnixMicros() != tenPMUTC {
		t.Fatalf("carried UTC-like rules: next due %s, want %s", instant(res.GetNextDueAtUnixMicros()), instant(tenPMUTC))
	}
	// The same release with other bytes does not replace them: the first wins.
	other := "0b8f1a52-0000-4000-8000-000000000002"
	if res := configureWith(v, other, rules("2025a", real), 0, summer); res.GetNextDueAtUnixMicros() != tenPMUTC {
		t.Fatalf("an equal release replaced the held rules: next due %s", instant(res.GetNextDueAtUnixMicros()))
	}
	// A newer release replaces them; the zone's other schedules follow at their next instant.
	res := configureWith(v, other, rules("2025b", real), 1, summer)
	if res.GetNextDueAtUnixMicros() != tenPMBerlin || heldRules(t, v, "Europe/Berlin").GetVersion() != "2025b" {
		t.Fatalf("a newer release: next due %s, held %s", instant(res.GetNextDueAtUnixMicros()), heldRules(t, v, "Europe/Berlin").GetVersion())
	}
	insp, err := Inspect(v, lane, scheduleID, summer)
	if err != nil || insp.GetZoneRulesVersion() != "2025b" || insp.GetNextFireTimesUnixMicros()[1] != tenPMBerlin+input.Day {
		t.Fatalf("the first schedule after the update: %v %v", insp, err)
	}
	// An older release (a leader on an older binary) never takes the zone back.
	if res := configureWith(v, other, rules("2024z", asUTC), 2, summer); res.GetNextDueAtUnixMicros() != tenPMBerlin {
		t.Fatalf("an older release replaced the held rules: next due %s", instant(res.GetNextDueAtUnixMicros()))
	}
	// Rules neither carried nor held: the zone is unknown, and nothing is written.
	before := kv.NewMemory()
	_, err = ApplyConfigure(before, input.DefaultLimits(), "alice", &orreryv1.ConfigureSchedule{Definition: definition(cronSpec("@daily", "Europe/Berlin"))}, nil, summer, Newest)
	wantCode(t, err, orrery.ErrValidation, "definition.spec.cron.time_zone")
	if before.Len() != 0 {
		t.Fatalf("a refused configure wrote %d keys", before.Len())
	}
}

// heldRules returns the rules the partition holds for zone.
func heldRules(t *testing.T, v kv.Reader, zone string) *orreryv1.ZoneRules {
	t.Helper()
	rules, err := loadZoneRules(v, zone)
	if err != nil || rules == nil {
		t.Fatalf("rules of %s: %v, %v", zone, rules, err)
	}
	return rules
}

// TestUnknownEvaluatorStopsApplying: a generation pinned to an evaluator version this binary
// does not know fails the emit as a platform error (the replica stops applying) instead of
// computing instants the other replicas would not, and writes nothing.
func TestUnknownEvaluatorStopsApplying(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(cronSpec("*/10 * * * *", "America/New_York")), 0, t0)
	tamper(t, v, func(r *orreryv1.ScheduleRecord) { r.EvaluatorVersion = cron.EvaluatorVersion + 1 })
	before := v.Clone()
	_, err := ApplyEmit(v, input.DefaultLimits(), &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: scheduleID, ExpectedGeneration: 1, Max: 1}, t0)
	wantCode(t, err, orrery.ErrInternal, "")
	if !v.Equal(before) || !strings.Contains(err.Error(), "evaluator version") {
		t.Fatalf("emit under an unknown evaluator: %v (wrote: %v)", err, !v.Equal(before))
	}
	insp, err := Inspect(v, lane, scheduleID, t0)
	if err != nil || !strings.Contains(insp.GetEvaluatorMismatch(), "evaluator version") || len(insp.GetNextFireTimesUnixMicros()) != 0 {
		t.Fatalf("inspection: %v %v", insp, err)
	}
}

// TestMissingZoneRulesSuspendAndNewGenerationReleases: a cron schedule whose partition holds
// no rules of its zone (configured before the rules were kept in the state) is suspended at
// its next emit (reason visible, SUSPENDED ledger record, no due entry, nothing enqueued),
// never evaluated with a silo's own rules; a new generation, whose entry carries them,
// releases it.
func TestMissingZoneRulesSuspendAndNewGenerationReleases(t *testing.T) {
	cases := []struct {
		name   string
		change func(*orreryv1.ScheduleRecord)
		reason string
	}{
		{"zone rules missing", func(r *orreryv1.ScheduleRecord) {}, "holds no rules of time zone"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := kv.NewMemory()
			configure(t, v, definition(cronSpec("*/10 * * * *", "America/New_York")), 0, t0)
			if res := mustEmit(t, v, 1, t0); len(res.GetEnqueuedIds()) != 1 {
				t.Fatalf("first emit %v", res)
			}
			tamper(t, v, c.change)
			if err := v.Delete(keys.ZoneRulesKey("America/New_York")); err != nil {
				t.Fatal(err)
			}
			// Nothing due yet: no check, no write.
			before := v.Clone()
			if res := mustEmit(t, v, 1, t0+5*minute); len(res.GetEnqueuedIds()) != 0 || !v.Equal(before) {
				t.Fatalf("not-due emit wrote: %v", res)
			}
			insp, err := Inspect(v, lane, scheduleID, t0+5*minute)
			if err != nil || insp.GetZoneRulesVersion() != "" || len(insp.GetNextFireTimesUnixMicros()) != 0 {
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
			wantCode(t, err, orrery.ErrSuspended, "suspended")
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

// TestResumeWithoutZoneRulesSuspends: a resume must compute the next instant, so it needs the
// zone's rules too.
func TestResumeWithoutZoneRulesSuspends(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(cronSpec("@hourly", "Europe/London")), 0, t0)
	pause(t, v, t0)
	if err := v.Delete(keys.ZoneRulesKey("Europe/London")); err != nil {
		t.Fatal(err)
	}
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
