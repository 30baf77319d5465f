package schedule

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

func TestConfigureRevisionZeroCreatesOnlyWhenAbsent(t *testing.T) {
	v := kv.NewMemory()
	res := configure(t, v, definition(every(t0+hour, hour)), 0, t0)
	if res.GetRevision() != 1 || res.GetGeneration() != 1 || res.GetNextOrdinal() != 0 || res.GetNextDueAtUnixMicros() != t0+hour {
		t.Fatalf("create result %v", res)
	}
	before := v.Clone()
	_, err := applyConfigure(v, input.DefaultLimits(), "bob", &orreryv1.ConfigureSchedule{Definition: definition(every(t0, hour))}, t0)
	wantCode(t, err, orrery.ErrRevisionConflict, "expected_revision")
	if !v.Equal(before) {
		t.Fatal("a refused create wrote")
	}
	_, err = applyConfigure(kv.NewMemory(), input.DefaultLimits(), "bob", &orreryv1.ConfigureSchedule{Definition: definition(every(t0, hour)), ExpectedRevision: 3}, t0)
	wantCode(t, err, orrery.ErrNotFound, "definition.schedule_id")
}

func TestReplacementBumpsRevisionAndGenerationResetsOrdinalKeepsCreator(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(every(t0, hour)), 0, t0)
	if _, err := emit(v, 1, 32, t0+2*hour); err != nil {
		t.Fatal(err)
	}
	rec := mustLoad(t, v)
	if rec.GetNextOrdinal() != 3 || rec.GetRevision() != 2 {
		t.Fatalf("after emit: %v", rec)
	}
	_, err := applyConfigure(v, input.DefaultLimits(), "bob", &orreryv1.ConfigureSchedule{Definition: definition(every(t0+5*hour, hour)), ExpectedRevision: 1}, t0+2*hour)
	wantCode(t, err, orrery.ErrRevisionConflict, "expected_revision")

	res, err := applyConfigure(v, input.DefaultLimits(), "bob", &orreryv1.ConfigureSchedule{Definition: definition(every(t0+5*hour, hour)), ExpectedRevision: 2}, t0+2*hour)
	if err != nil {
		t.Fatal(err)
	}
	if res.GetRevision() != 3 || res.GetGeneration() != 2 || res.GetNextOrdinal() != 0 || res.GetNextDueAtUnixMicros() != t0+5*hour {
		t.Fatalf("replace result %v", res)
	}
	if rec := mustLoad(t, v); rec.GetCreator() != "alice" {
		t.Fatalf("creator %q, want the original alice", rec.GetCreator())
	}
	wantDue(t, v, t0+5*hour, 2)
}

func TestEmitBoundedBy32LeavesBacklogDue(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(every(t0, sec)), 0, t0)
	now := t0 + 99*sec // ordinals 0..99 are due
	res, err := emit(v, 1, 32, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.GetEnqueuedIds()) != 32 || res.GetNextOrdinal() != 32 || res.GetNextDueAtUnixMicros() != t0+32*sec {
		t.Fatalf("emit result: %d ids, next ordinal %d, next due %d", len(res.GetEnqueuedIds()), res.GetNextOrdinal(), res.GetNextDueAtUnixMicros())
	}
	wantDue(t, v, t0+32*sec, 1) // the backlog stays due
	if got := len(messages(t, v)); got != 32 {
		t.Fatalf("%d messages, want 32", got)
	}
	_, err = emit(v, 1, 33, now)
	wantCode(t, err, orrery.ErrValidation, "max")
	for range 3 {
		if _, err := emit(v, 1, 32, now); err != nil {
			t.Fatal(err)
		}
	}
	rec := mustLoad(t, v)
	if rec.GetNextOrdinal() != 100 || len(messages(t, v)) != 100 {
		t.Fatalf("after catch-up: next ordinal %d, %d messages", rec.GetNextOrdinal(), len(messages(t, v)))
	}
	for i := range uint64(100) {
		m := messages(t, v)[OccurrenceID(scheduleID, 1, i)]
		if m == nil || m.GetOccurrence().GetOrdinal() != i || m.GetOccurrence().GetNominalDueAtUnixMicros() != t0+int64(i)*sec {
			t.Fatalf("ordinal %d: %v", i, m)
		}
	}
}

func TestEmitZeroMaxMeansOne(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(every(t0, sec)), 0, t0)
	res, err := emit(v, 1, 0, t0+10*sec)
	if err != nil || len(res.GetEnqueuedIds()) != 1 {
		t.Fatalf("emit max 0: %v %v", res, err)
	}
}

func TestEmitStaleGenerationIsTokenInvalidated(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(every(t0, hour)), 0, t0)
	configure(t, v, definition(every(t0, hour)), 1, t0)
	before := v.Clone()
	_, err := emit(v, 1, 1, t0+hour)
	wantCode(t, err, orrery.ErrTokenInvalidated, "expected_generation")
	if !v.Equal(before) {
		t.Fatal("a stale emit wrote")
	}
}

func TestEmitNothingDueKeepsRevision(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(every(t0+hour, hour)), 0, t0)
	before := v.Clone()
	res, err := emit(v, 1, 32, t0+hour-1)
	if err != nil || res.GetRevision() != 1 || len(res.GetEnqueuedIds()) != 0 {
		t.Fatalf("emit not due: %v %v", res, err)
	}
	if !v.Equal(before) {
		t.Fatal("an empty emit wrote")
	}
	// Exactly at the due instant it is due.
	res, err = emit(v, 1, 32, t0+hour)
	if err != nil || len(res.GetEnqueuedIds()) != 1 || res.GetRevision() != 2 {
		t.Fatalf("emit at due instant: %v %v", res, err)
	}
}

func TestCancelledNeverEmitsAndKeepsWatermark(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(every(t0, hour)), 0, t0)
	if _, err := emit(v, 1, 32, t0+hour); err != nil {
		t.Fatal(err)
	}
	_, err := ApplyCancel(v, input.DefaultLimits(), &orreryv1.CancelSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: 1})
	wantCode(t, err, orrery.ErrRevisionConflict, "expected_revision")
	res, err := ApplyCancel(v, input.DefaultLimits(), &orreryv1.CancelSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: 2})
	if err != nil || res.GetRevision() != 3 || res.GetNextOrdinal() != 2 || res.GetNextDueAtUnixMicros() != 0 {
		t.Fatalf("cancel: %v %v", res, err)
	}
	wantDue(t, v, 0, 0)
	before := v.Clone()
	res, err = emit(v, 1, 32, t0+100*hour)
	if err != nil || len(res.GetEnqueuedIds()) != 0 {
		t.Fatalf("emit on cancelled: %v %v", res, err)
	}
	_, err = ApplyTrigger(v, input.DefaultLimits(), &orreryv1.TriggerSchedule{Lane: lane, ScheduleId: scheduleID}, t0+100*hour)
	wantCode(t, err, orrery.ErrSuspended, "cancelled")
	if !v.Equal(before) {
		t.Fatal("a cancelled schedule wrote")
	}
	rec := mustLoad(t, v)
	if !rec.GetCancelled() || rec.GetNextOrdinal() != 2 {
		t.Fatalf("cancelled record %v", rec)
	}
	// Only a new ConfigureSchedule revives it, as a new generation.
	res = configure(t, v, definition(every(t0+100*hour, hour)), 3, t0+100*hour)
	if res.GetGeneration() != 2 || res.GetNextOrdinal() != 0 || mustLoad(t, v).GetCancelled() {
		t.Fatalf("revive: %v", res)
	}
	wantDue(t, v, t0+100*hour, 2)
}

func TestDeleteTombstonesIDAndKeepsEnqueuedOccurrences(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(every(t0, hour)), 0, t0)
	if _, err := emit(v, 1, 1, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := ApplyDelete(v, &orreryv1.DeleteSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: 2}, t0, Newest); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := Load(v, lane, scheduleID); found {
		t.Fatal("deleted schedule still loads")
	}
	wantDue(t, v, 0, 0)
	if len(messages(t, v)) != 1 {
		t.Fatal("delete removed an enqueued occurrence")
	}
	_, err := applyConfigure(v, input.DefaultLimits(), "alice", &orreryv1.ConfigureSchedule{Definition: definition(every(t0, hour))}, t0)
	wantCode(t, err, orrery.ErrRevisionConflict, "definition.schedule_id")
}

func TestEveryOverflowIsValidationBeforeAnyWrite(t *testing.T) {
	cases := []struct {
		name  string
		spec  *orreryv1.ScheduleSpec
		field string
	}{
		{"interval above 365 days", every(t0, 365*input.Day+1), "definition.spec.every.interval_micros"},
		{"interval below 1 s", every(t0, sec-1), "definition.spec.every.interval_micros"},
		{"first due past 9999", every(input.MaxInstantMicros+1, sec), "definition.spec.every.first_due_at_unix_micros"},
		{"first due negative", every(-1, sec), "definition.spec.every.first_due_at_unix_micros"},
		{"at past 9999", at(input.MaxInstantMicros + 1), "definition.spec.at.due_at_unix_micros"},
		{"after negative", after(-1), "definition.spec.after.delay_micros"},
		{"no kind", &orreryv1.ScheduleSpec{}, "definition.spec"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := kv.NewMemory()
			_, err := applyConfigure(v, input.DefaultLimits(), "alice", &orreryv1.ConfigureSchedule{Definition: definition(c.spec)}, t0)
			wantCode(t, err, orrery.ErrValidation, c.field)
			if v.Len() != 0 {
				t.Fatal("a refused configure wrote")
			}
		})
	}
	// The checked product itself: an ordinal whose offset overflows 64 bits.
	rec := &orreryv1.ScheduleRecord{Definition: definition(every(t0, 365*input.Day))}
	_, _, err := DueAt(rec, 1<<62)
	wantCode(t, err, orrery.ErrValidation, "definition.spec.every")
	// An ordinal past year 9999 ends the series without error.
	if _, exists, err := DueAt(rec, 10_000); exists || err != nil {
		t.Fatalf("ordinal past 9999: exists=%v err=%v", exists, err)
	}
}

func TestEveryEndsAtYear9999(t *testing.T) {
	v := kv.NewMemory()
	last := input.MaxInstantMicros - 10*sec
	configure(t, v, definition(every(last, 7*sec)), 0, t0)
	res, err := emit(v, 1, 32, input.MaxInstantMicros)
	if err != nil || len(res.GetEnqueuedIds()) != 2 || res.GetNextDueAtUnixMicros() != 0 {
		t.Fatalf("emit at the end of time: %v %v", res, err)
	}
	wantDue(t, v, 0, 0)
}

// TestTTLAlreadyExpiredIsPassedWithALedgerReason: under the expired policy SKIP an expired
// occurrence is passed EXPIRED with the reason, and the series goes on.
func TestTTLAlreadyExpiredIsPassedWithALedgerReason(t *testing.T) {
	v := kv.NewMemory()
	def := definition(every(t0, hour))
	def.Template.TimeToLiveMicros = 10 * 60 * sec
	def.Expired = orreryv1.ExpiredPolicy_EXPIRED_POLICY_SKIP
	configure(t, v, def, 0, t0)
	// Within its TTL an occurrence emits with an expiry relative to its due time.
	res, err := emit(v, 1, 1, t0+9*60*sec)
	if err != nil || len(res.GetEnqueuedIds()) != 1 {
		t.Fatalf("emit within TTL: %v %v", res, err)
	}
	if m := messages(t, v)[res.GetEnqueuedIds()[0]]; m.GetExpiresAtUnixMicros() != t0+10*60*sec {
		t.Fatalf("expires at %d", m.GetExpiresAtUnixMicros())
	}
	// Ordinal 1 (due t0+1h) expired at t0+1h10m; ordinal 2 (t0+2h) is still within its TTL.
	res, err = emit(v, 1, 32, t0+2*hour+5*60*sec)
	if err != nil {
		t.Fatalf("emit past a TTL: %v", err)
	}
	if len(res.GetEnqueuedIds()) != 1 || res.GetEnqueuedIds()[0] != OccurrenceID(scheduleID, 1, 2) || res.GetPassedWithoutMessage() != 1 {
		t.Fatalf("emit past a TTL enqueued %v, passed %d without a message", res.GetEnqueuedIds(), res.GetPassedWithoutMessage())
	}
	if rec := mustLoad(t, v); rec.GetNextOrdinal() != 3 {
		t.Fatalf("watermark at %d, want 3: an expired occurrence must not stop the schedule", rec.GetNextOrdinal())
	}
	var expired *orreryv1.LedgerRecord
	for _, e := range ledgerOf(t, v) {
		if e.GetOrdinal() == 1 {
			expired = e
		}
	}
	if expired.GetOutcome() != outExpired || expired.GetRecordedAtUnixMicros() != t0+2*hour+5*60*sec || expired.GetMessageId() != "" ||
		!strings.Contains(expired.GetReason(), "time to live passed") || !strings.Contains(expired.GetReason(), "10m0s") {
		t.Fatalf("ledger of the expired ordinal: %v", expired)
	}
	if _, found := messages(t, v)[OccurrenceID(scheduleID, 1, 1)]; found {
		t.Fatal("the expired occurrence was enqueued")
	}
}

func TestTTLExpiredUnderCoalesceRecordsEveryMember(t *testing.T) {
	v := kv.NewMemory()
	def := definition(every(t0, hour))
	def.Misfire = orreryv1.MisfirePolicy_MISFIRE_POLICY_COALESCE
	def.Template.TimeToLiveMicros = 10 * 60 * sec
	def.Expired = orreryv1.ExpiredPolicy_EXPIRED_POLICY_SKIP
	configure(t, v, def, 0, t0)
	res, err := emit(v, 1, 32, t0+2*hour+30*60*sec) // ordinals 0..2 all expired
	if err != nil || len(res.GetEnqueuedIds()) != 0 || res.GetPassedWithoutMessage() != 3 {
		t.Fatalf("coalesced expired emit: %v %v", res, err)
	}
	for ordinal, outcome := range outcomesOf(t, v, 1) {
		if outcome != outExpired {
			t.Fatalf("ordinal %d recorded %v, want EXPIRED", ordinal, outcome)
		}
	}
	for _, e := range ledgerOf(t, v) {
		if e.GetReason() == "" || e.GetMessageId() != "" {
			t.Fatalf("expired member without a reason or with a message: %v", e)
		}
	}
}

func TestAtAndAfterFireOnce(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(at(t0+hour)), 0, t0)
	res, err := emit(v, 1, 32, t0+2*hour)
	if err != nil || len(res.GetEnqueuedIds()) != 1 || res.GetNextDueAtUnixMicros() != 0 {
		t.Fatalf("at: %v %v", res, err)
	}
	wantDue(t, v, 0, 0)

	v = kv.NewMemory()
	configure(t, v, definition(after(90*sec)), 0, t0+5*sec)
	if rec := mustLoad(t, v); rec.GetNextDueAtUnixMicros() != t0+95*sec {
		t.Fatalf("after anchored on creation: next due %d", rec.GetNextDueAtUnixMicros())
	}
	// Replacement re-anchors on the replacement's logged time.
	res = configure(t, v, definition(after(90*sec)), 1, t0+50*sec)
	if res.GetNextDueAtUnixMicros() != t0+140*sec {
		t.Fatalf("after re-anchored: %d", res.GetNextDueAtUnixMicros())
	}
}

func TestOccurrenceIDsAndProvenance(t *testing.T) {
	if got, want := OccurrenceID(scheduleID, 2, 255), "recurring-0f8fad5bd9cb469fa16570867728950e-0000000000000002-00000000000000ff"; got != want {
		t.Fatalf("occurrence id %s, want %s", got, want)
	}
	if got, want := ManualID(scheduleID, 1, 16), "manual-0f8fad5bd9cb469fa16570867728950e-0000000000000001-0000000000000010"; got != want {
		t.Fatalf("manual id %s, want %s", got, want)
	}
	v := kv.NewMemory()
	configure(t, v, definition(every(t0, hour)), 0, t0)
	if _, err := emit(v, 1, 1, t0+5); err != nil {
		t.Fatal(err)
	}
	m := messages(t, v)[OccurrenceID(scheduleID, 1, 0)]
	o := m.GetOccurrence()
	if o.GetScheduleId() != scheduleID || o.GetGeneration() != 1 || o.GetOrdinal() != 0 || o.GetNominalDueAtUnixMicros() != t0 ||
		m.GetEnqueuedAtUnixMicros() != t0+5 || m.GetPayloadJson() != `{"report":"daily"}` || m.GetHeadersJson() != `{"h":"v"}` {
		t.Fatalf("message %v", m)
	}
}

func TestPauseResumeTrigger(t *testing.T) {
	lim := input.DefaultLimits()
	v := kv.NewMemory()
	configure(t, v, definition(every(t0, hour)), 0, t0)
	if _, err := emit(v, 1, 1, t0); err != nil { // ordinal 0
		t.Fatal(err)
	}
	res, err := ApplyPause(v, input.DefaultLimits(), &orreryv1.PauseSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: 2}, t0+30*60*sec)
	if err != nil || res.GetRevision() != 3 || res.GetNextDueAtUnixMicros() != 0 {
		t.Fatalf("pause: %v %v", res, err)
	}
	wantDue(t, v, 0, 0)
	if res, err := emit(v, 1, 32, t0+5*hour); err != nil || len(res.GetEnqueuedIds()) != 0 {
		t.Fatalf("emit while paused: %v %v", res, err)
	}
	_, err = ApplyTrigger(v, lim, &orreryv1.TriggerSchedule{Lane: lane, ScheduleId: scheduleID}, t0+5*hour)
	wantCode(t, err, orrery.ErrSuspended, "paused")
	// Resume at 5h30: ordinals 1..5 (1h..5h) are not back-filled; the next is 6 (6h).
	res, err = ApplyResume(v, input.DefaultLimits(), &orreryv1.ResumeSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: 3}, t0+5*hour+30*60*sec)
	if err != nil || res.GetRevision() != 4 || res.GetNextOrdinal() != 6 || res.GetNextDueAtUnixMicros() != t0+6*hour {
		t.Fatalf("resume: %v %v", res, err)
	}
	wantDue(t, v, t0+6*hour, 1)
	// Resume exactly on a due instant keeps that occurrence.
	v2 := kv.NewMemory()
	configure(t, v2, definition(every(t0, hour)), 0, t0)
	if _, err := ApplyPause(v2, input.DefaultLimits(), &orreryv1.PauseSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: 1}, t0); err != nil {
		t.Fatal(err)
	}
	if res, err := ApplyResume(v2, input.DefaultLimits(), &orreryv1.ResumeSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: 2}, t0+2*hour); err != nil || res.GetNextOrdinal() != 2 {
		t.Fatalf("resume on a due instant: %v %v", res, err)
	}
	// Trigger: a manual occurrence with its own id; the watermark and revision do not move.
	tr, err := ApplyTrigger(v, lim, &orreryv1.TriggerSchedule{Lane: lane, ScheduleId: scheduleID}, t0+5*hour+31*60*sec)
	if err != nil || len(tr.GetEnqueuedIds()) != 1 || tr.GetRevision() != 4 || tr.GetNextOrdinal() != 6 {
		t.Fatalf("trigger: %v %v", tr, err)
	}
	m := messages(t, v)[tr.GetEnqueuedIds()[0]]
	if !strings.HasPrefix(m.GetId(), "manual-") || !m.GetOccurrence().GetManual() {
		t.Fatalf("manual message %v", m)
	}
	// Triggering twice at the same logged time yields the same id: a no-op.
	tr2, err := ApplyTrigger(v, lim, &orreryv1.TriggerSchedule{Lane: lane, ScheduleId: scheduleID}, t0+5*hour+31*60*sec)
	if err != nil || len(tr2.GetEnqueuedIds()) != 0 {
		t.Fatalf("second trigger: %v %v", tr2, err)
	}
	// Replacing a paused schedule un-pauses it as a new generation.
	if _, err := ApplyPause(v, input.DefaultLimits(), &orreryv1.PauseSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: 4}, t0+6*hour); err != nil {
		t.Fatal(err)
	}
	res = configure(t, v, definition(every(t0+7*hour, hour)), 5, t0+6*hour)
	if rec := mustLoad(t, v); rec.GetPaused() || res.GetGeneration() != 2 {
		t.Fatalf("replace paused: %v", rec)
	}
}

func TestValidationNamesFieldAndWritesNothing(t *testing.T) {
	good := func() *orreryv1.ScheduleDefinition { return definition(every(t0, hour)) }
	cases := []struct {
		field  string
		mutate func(d *orreryv1.ScheduleDefinition)
	}{
		{"definition.lane", func(d *orreryv1.ScheduleDefinition) { d.Lane = nil }},
		{"definition.lane.namespace", func(d *orreryv1.ScheduleDefinition) { d.Lane = &orreryv1.Lane{Queue: "q", Key: "k"} }},
		{"definition.lane.queue", func(d *orreryv1.ScheduleDefinition) {
			d.Lane = &orreryv1.Lane{Namespace: "n", Queue: "bad queue", Key: "k"}
		}},
		{"definition.lane.queue", func(d *orreryv1.ScheduleDefinition) {
			d.Lane = &orreryv1.Lane{Namespace: "n", Queue: "q$dlq", Key: "k"}
		}},
		{"definition.lane.key", func(d *orreryv1.ScheduleDefinition) { d.Lane = &orreryv1.Lane{Namespace: "n", Queue: "q", Key: ""} }},
		{"definition.schedule_id", func(d *orreryv1.ScheduleDefinition) { d.ScheduleId = "0F8FAD5B-D9CB-469F-A165-70867728950E" }},
		{"definition.schedule_id", func(d *orreryv1.ScheduleDefinition) { d.ScheduleId = "not-a-uuid" }},
		{"definition.name", func(d *orreryv1.ScheduleDefinition) { d.Name = strings.Repeat("n", input.MaxScheduleNameBytes+1) }},
		{"definition.name", func(d *orreryv1.ScheduleDefinition) { d.Name = "tab\there" }},
		{"definition.name", func(d *orreryv1.ScheduleDefinition) { d.Name = "\xff" }},
		{"definition.misfire", func(d *orreryv1.ScheduleDefinition) { d.Misfire = orreryv1.MisfirePolicy(99) }},
		{"definition.overlap", func(d *orreryv1.ScheduleDefinition) { d.Overlap = orreryv1.OverlapPolicy(99) }},
		{"definition.catch_up_window_micros", func(d *orreryv1.ScheduleDefinition) { d.CatchUpWindowMicros = sec - 1 }},
		{"definition.catch_up_window_micros", func(d *orreryv1.ScheduleDefinition) { d.CatchUpWindowMicros = -1 }},
		{"definition.anomaly_window_micros", func(d *orreryv1.ScheduleDefinition) { d.AnomalyWindowMicros = 366 * input.Day }},
		{"definition.template.payload_json", func(d *orreryv1.ScheduleDefinition) { d.Template.PayloadJson = "{" }},
		{"definition.template.headers_json", func(d *orreryv1.ScheduleDefinition) { d.Template.HeadersJson = "[1]" }},
		{"definition.template.time_to_live_micros", func(d *orreryv1.ScheduleDefinition) { d.Template.TimeToLiveMicros = -5 }},
		{"definition.template.time_to_live_micros", func(d *orreryv1.ScheduleDefinition) { d.Template.TimeToLiveMicros = 366 * input.Day }},
		{"definition.template.max_deliveries", func(d *orreryv1.ScheduleDefinition) { d.Template.MaxDeliveries = -1 }},
		{"definition.template.payload_json", func(d *orreryv1.ScheduleDefinition) {
			d.Template.PayloadJson = fmt.Sprintf("%q", strings.Repeat("x", 300<<10))
		}},
	}
	for _, c := range cases {
		t.Run(c.field, func(t *testing.T) {
			d := good()
			c.mutate(d)
			v := kv.NewMemory()
			_, err := applyConfigure(v, input.DefaultLimits(), "alice", &orreryv1.ConfigureSchedule{Definition: d}, t0)
			wantCode(t, err, orrery.ErrValidation, c.field)
			if v.Len() != 0 {
				t.Fatal("a refused configure wrote")
			}
		})
	}
	v := kv.NewMemory()
	_, err := emit(v, 1, 1, t0)
	wantCode(t, err, orrery.ErrNotFound, "schedule_id")
	_, err = ApplyEmit(v, input.DefaultLimits(), &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: "x"}, t0)
	wantCode(t, err, orrery.ErrValidation, "schedule_id")
}

// TestOccurrenceIDMatchesItsFormat: the hand-built id equals the documented format for any
// schedule id, generation and ordinal.
func TestOccurrenceIDMatchesItsFormat(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		id := rapid.StringMatching(`[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`).Draw(t, "schedule")
		gen, ord := rapid.Uint64().Draw(t, "generation"), rapid.Uint64().Draw(t, "ordinal")
		want := fmt.Sprintf("recurring-%s-%016x-%016x", strings.ReplaceAll(id, "-", ""), gen, ord)
		if got := OccurrenceID(id, gen, ord); got != want {
			t.Fatalf("OccurrenceID = %q, want %q", got, want)
		}
	})
}

// TestConfigureSaysHowManyInstantsAreAlreadyDue: the configure result counts the instants of
// the new generation already due at its logged time, with the first and the last: a start 72 h
// back every minute has 4,321; a start ahead, none.
func TestConfigureSaysHowManyInstantsAreAlreadyDue(t *testing.T) {
	const minute = 60 * sec
	res := configure(t, kv.NewMemory(), definition(every(t0-72*hour, minute)), 0, t0)
	if res.GetAlreadyDue() != 4321 || res.GetFirstAlreadyDueAtUnixMicros() != t0-72*hour || res.GetLastAlreadyDueAtUnixMicros() != t0 {
		t.Fatalf("a start 72 h back every minute: %v", res)
	}
	res = configure(t, kv.NewMemory(), definition(every(t0-90*sec, minute)), 0, t0)
	if res.GetAlreadyDue() != 2 || res.GetLastAlreadyDueAtUnixMicros() != t0-30*sec {
		t.Fatalf("a start 90 s back every minute: %v", res)
	}
	if res := configure(t, kv.NewMemory(), definition(every(t0+hour, minute)), 0, t0); res.GetAlreadyDue() != 0 || res.GetFirstAlreadyDueAtUnixMicros() != 0 {
		t.Fatalf("a start ahead: %v", res)
	}
	if res := configure(t, kv.NewMemory(), definition(at(t0-hour)), 0, t0); res.GetAlreadyDue() != 1 || res.GetFirstAlreadyDueAtUnixMicros() != t0-hour {
		t.Fatalf("an instant an hour back: %v", res)
	}
	if res := configure(t, kv.NewMemory(), definition(at(t0+hour)), 0, t0); res.GetAlreadyDue() != 0 {
		t.Fatalf("an instant ahead: %v", res)
	}
}
