package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// emittedNominals lists the nominal instants of the messages enqueued, as RFC 3339 UTC.
func emittedNominals(t *testing.T, v kv.Reader, ids []string) []string {
	t.Helper()
	msgs := messages(t, v)
	var out []string
	for _, id := range ids {
		out = append(out, time.UnixMicro(msgs[id].GetOccurrence().GetNominalDueAtUnixMicros()).UTC().Format(time.RFC3339))
	}
	return out
}

// TestCronAcrossNewYorkDSTThroughEmit: America/New_York springs forward on 2026-03-08 (02:00
// EST → 03:00 EDT) and falls back on 2026-11-01 (02:00 EDT → 01:00 EST). The schedule is
// emitted both step by step (every hour, as a coordinator would) and in one catch-up, and
// both see the same instants, with the ordinals counting them.
func TestCronAcrossNewYorkDSTThroughEmit(t *testing.T) {
	cases := []struct {
		name       string
		expression string
		gap        orreryv1.CronGapPolicy
		repeat     orreryv1.CronRepeatPolicy
		from, to   string
		want       []string
	}{
		{"spring forward: the gap fires at 03:00 EDT", "30 2 * * *", 0, 0, "2026-03-07T00:00:00Z", "2026-03-10T00:00:00Z",
			[]string{"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"spring forward, gap skip", "30 2 * * *", orreryv1.CronGapPolicy_CRON_GAP_POLICY_SKIP, 0, "2026-03-07T00:00:00Z", "2026-03-10T00:00:00Z",
			[]string{"2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z"}},
		{"spring forward, hourly skips the missing hour", "0 * * * *", 0, 0, "2026-03-08T06:30:00Z", "2026-03-08T08:30:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"}},
		{"fall back: fixed time fires once, first pass", "30 1 * * *", 0, 0, "2026-10-31T00:00:00Z", "2026-11-03T00:00:00Z",
			[]string{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"fall back, repeat last", "30 1 * * *", 0, orreryv1.CronRepeatPolicy_CRON_REPEAT_POLICY_LAST, "2026-10-31T12:00:00Z", "2026-11-01T12:00:00Z",
			[]string{"2026-11-01T06:30:00Z"}},
		{"fall back, repeat both", "30 1 * * *", 0, orreryv1.CronRepeatPolicy_CRON_REPEAT_POLICY_BOTH, "2026-10-31T12:00:00Z", "2026-11-01T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z"}},
		{"fall back: interval expression fires in both passes", "*/30 1 * * *", 0, 0, "2026-10-31T12:00:00Z", "2026-11-01T12:00:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:30:00Z"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := cronSpec(c.expression, "America/New_York")
			spec.GetCron().GapPolicy, spec.GetCron().RepeatPolicy = c.gap, c.repeat
			from, to := utc(t, c.from), utc(t, c.to)
			// Step by step.
			v := kv.NewMemory()
			configure(t, v, definition(spec), 0, from)
			var ids []string
			for now := from; now <= to; now += hour / 2 {
				ids = append(ids, drain(t, v, 1, now)...)
			}
			if got := emittedNominals(t, v, ids); strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Fatalf("step by step: %v, want %v", got, c.want)
			}
			for i, id := range ids {
				if id != OccurrenceID(scheduleID, 1, uint64(i)) {
					t.Fatalf("id %d is %s", i, id)
				}
			}
			// One catch-up at the end sees the same instants.
			v = kv.NewMemory()
			configure(t, v, definition(spec), 0, from)
			if got := emittedNominals(t, v, drain(t, v, 1, to)); strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Fatalf("catch-up: %v, want %v", got, c.want)
			}
			if rec := mustLoad(t, v); rec.GetCronCursorUnixMicros() != utc(t, c.want[len(c.want)-1]) || rec.GetNextDueAtUnixMicros() <= to {
				t.Fatalf("cursor %d next due %d", rec.GetCronCursorUnixMicros(), rec.GetNextDueAtUnixMicros())
			}
		})
	}
}

func TestCronFirstOccurrenceIsAtOrAfterGenerationStart(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(cronSpec("0 0 * * *", "")), 0, t0) // t0 is midnight UTC
	if rec := mustLoad(t, v); rec.GetNextDueAtUnixMicros() != t0 {
		t.Fatalf("next due %d, want the start itself", rec.GetNextDueAtUnixMicros())
	}
	v = kv.NewMemory()
	configure(t, v, definition(cronSpec("0 0 * * *", "")), 0, t0+1)
	if rec := mustLoad(t, v); rec.GetNextDueAtUnixMicros() != t0+input.Day {
		t.Fatalf("next due %d, want the next midnight", rec.GetNextDueAtUnixMicros())
	}
}

// TestCronValidationNamesFieldAndPosition: a bad cron spec fails configure with Validation
// naming the field (and, for the expression, the position), writing nothing.
func TestCronValidationNamesFieldAndPosition(t *testing.T) {
	cases := []struct {
		spec    *orreryv1.CronSpec
		field   string
		message string
	}{
		{&orreryv1.CronSpec{Expression: "*/15 9-17 * * MOX"}, "definition.spec.cron.expression", "position 15"},
		{&orreryv1.CronSpec{Expression: "61 * * * *"}, "definition.spec.cron.expression", "field 1 (minute)"},
		{&orreryv1.CronSpec{Expression: ""}, "definition.spec.cron.expression", "position"},
		{&orreryv1.CronSpec{Expression: "0 0 30 2 *"}, "definition.spec.cron.expression", "matches no instant"},
		{&orreryv1.CronSpec{Expression: "@daily", TimeZone: "Mars/Olympus_Mons"}, "definition.spec.cron.time_zone", "unknown time zone"},
		{&orreryv1.CronSpec{Expression: "@daily", TimeZone: "Local"}, "definition.spec.cron.time_zone", "not allowed"},
		{&orreryv1.CronSpec{Expression: "@daily", GapPolicy: 7}, "definition.spec.cron.gap_policy", "unknown"},
		{&orreryv1.CronSpec{Expression: "@daily", RepeatPolicy: -1}, "definition.spec.cron.repeat_policy", "unknown"},
	}
	for _, c := range cases {
		t.Run(c.spec.GetExpression()+"/"+c.field, func(t *testing.T) {
			v := kv.NewMemory()
			def := definition(&orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Cron{Cron: c.spec}})
			_, err := applyConfigure(v, input.DefaultLimits(), "alice", &orreryv1.ConfigureSchedule{Definition: def}, t0)
			wantCode(t, err, orrery.ErrValidation, c.field)
			if !strings.Contains(orrery.AsError(err).Message, c.message) {
				t.Fatalf("message %q does not say %q", orrery.AsError(err).Message, c.message)
			}
			if v.Len() != 0 {
				t.Fatal("a refused configure wrote")
			}
		})
	}
	_, _, err := DueAt(&orreryv1.ScheduleRecord{Definition: definition(cronSpec("@daily", ""))}, 0)
	wantCode(t, err, orrery.ErrValidation, "definition.spec.cron")
}

// TestInspectionShowsNextFireTimesAndLastOutcomes.
func TestInspectionShowsNextFireTimesAndLastOutcomes(t *testing.T) {
	v := kv.NewMemory()
	if insp, err := Inspect(v, lane, scheduleID, t0); insp != nil || err != nil {
		t.Fatalf("absent schedule: %v %v", insp, err)
	}
	_, err := Inspect(v, lane, "nope", t0)
	wantCode(t, err, orrery.ErrValidation, "schedule_id")

	// Daily at 02:30 New York time from 2026-03-01: the spring-forward day fires at 03:00 EDT.
	start := utc(t, "2026-03-01T12:00:00Z")
	configure(t, v, definition(cronSpec("30 2 * * *", "America/New_York")), 0, start)
	insp, err := Inspect(v, lane, scheduleID, start)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, at := range insp.GetNextFireTimesUnixMicros() {
		got = append(got, time.UnixMicro(at).UTC().Format(time.RFC3339))
	}
	want := []string{"2026-03-02T07:30:00Z", "2026-03-03T07:30:00Z", "2026-03-04T07:30:00Z", "2026-03-05T07:30:00Z", "2026-03-06T07:30:00Z",
		"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z", "2026-03-11T06:30:00Z"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("next fire times %v, want %v", got, want)
	}
	if len(insp.GetLastOutcomes()) != 0 || insp.GetRecord().GetRevision() != 1 || insp.GetSuspendedReason() != "" {
		t.Fatalf("inspection %v", insp)
	}
	// After 12 days of emits: the last 10 outcomes, newest first; fire times from the watermark.
	now := utc(t, "2026-03-13T00:00:00Z")
	drain(t, v, 1, now)
	insp, _ = Inspect(v, lane, scheduleID, now)
	if n := len(insp.GetLastOutcomes()); n != 10 || insp.GetLastOutcomes()[0].GetOrdinal() != 10 || insp.GetLastOutcomes()[9].GetOrdinal() != 1 {
		t.Fatalf("last outcomes %v", insp.GetLastOutcomes())
	}
	if first := insp.GetNextFireTimesUnixMicros()[0]; first != utc(t, "2026-03-13T06:30:00Z") {
		t.Fatalf("next fire %d", first)
	}
	// Paused: what a resume now would start from; cancelled: nothing.
	pause(t, v, now)
	insp, _ = Inspect(v, lane, scheduleID, utc(t, "2026-03-20T00:00:00Z"))
	if first := insp.GetNextFireTimesUnixMicros()[0]; first != utc(t, "2026-03-20T06:30:00Z") || len(insp.GetNextFireTimesUnixMicros()) != 10 {
		t.Fatalf("paused preview starts %d", first)
	}
	if _, err := ApplyCancel(v, input.DefaultLimits(), &orreryv1.CancelSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: mustLoad(t, v).GetRevision()}); err != nil {
		t.Fatal(err)
	}
	if insp, _ = Inspect(v, lane, scheduleID, now); len(insp.GetNextFireTimesUnixMicros()) != 0 {
		t.Fatalf("cancelled schedule has fire times %v", insp.GetNextFireTimesUnixMicros())
	}
	// An At schedule has one fire time, then none.
	v = kv.NewMemory()
	configure(t, v, definition(at(t0+hour)), 0, t0)
	if insp, _ := Inspect(v, lane, scheduleID, t0); len(insp.GetNextFireTimesUnixMicros()) != 1 {
		t.Fatalf("at: %v", insp.GetNextFireTimesUnixMicros())
	}
	mustEmit(t, v, 1, t0+hour)
	if insp, _ := Inspect(v, lane, scheduleID, t0+hour); len(insp.GetNextFireTimesUnixMicros()) != 0 || len(insp.GetLastOutcomes()) != 1 {
		t.Fatalf("fired at: %v", insp)
	}
}
