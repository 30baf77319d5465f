package schedule

import (
	"strings"
	"testing"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// TestPausedInstantsAreLedgeredInBoundedSteps: an Every-minute schedule fires ordinal 0, is
// paused, and resumed 10 instants later with MaxPassedPerEmit 4. The resume passes 4 of them
// PAUSED, the next emits 4 and 2 more, each enqueuing nothing (and not tripping the 1 s clock
// anomaly guard, although they run well after the resume); only then is ordinal 11 fired, at
// its instant. Every ordinal has exactly one ledger record; the paused ones carry their
// nominal instants and none was enqueued. Inspection meanwhile shows the next fire times
// after the paused window.
func TestPausedInstantsAreLedgeredInBoundedSteps(t *testing.T) {
	lim := input.DefaultLimits()
	lim.MaxPassedPerEmit = 4
	v := kv.NewMemory()
	def := definition(every(t0, minute))
	def.AnomalyWindowMicros = MinWindowMicros
	configure(t, v, def, 0, t0)
	mustEmit(t, v, 1, t0)
	pause(t, v, t0+30*sec)
	resumeAt := t0 + 10*minute + 30*sec
	res, err := ApplyResume(v, lim, &orreryv1.ResumeSchedule{Lane: lane, ScheduleId: scheduleID, AnyRevision: true}, resumeAt)
	if err != nil {
		t.Fatal(err)
	}
	if res.GetPassedWithoutMessage() != 4 || res.GetNextOrdinal() != 5 || res.GetNextDueAtUnixMicros() != t0+5*minute {
		t.Fatalf("resume: %v", res)
	}
	wantDue(t, v, t0+5*minute, 1) // overdue: the rest goes at once
	insp, err := Inspect(v, lane, scheduleID, resumeAt)
	if err != nil {
		t.Fatal(err)
	}
	if got := insp.GetNextFireTimesUnixMicros(); len(got) == 0 || got[0] != t0+11*minute {
		t.Fatalf("next fire times %v, want from %d", got, t0+11*minute)
	}
	for i, want := range []uint32{4, 2} {
		now := resumeAt + int64(i+1)*10*sec
		res, err := ApplyEmit(v, lim, &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: scheduleID, ExpectedGeneration: 1, Max: 32}, now)
		if err != nil {
			t.Fatal(err)
		}
		if res.GetPassedWithoutMessage() != want || len(res.GetEnqueuedIds()) != 0 || res.GetSuspendedReason() != "" {
			t.Fatalf("emit %d at %d: %v", i, now, res)
		}
	}
	if res := mustLoad(t, v); res.GetNextOrdinal() != 11 || res.GetNextDueAtUnixMicros() != t0+11*minute {
		t.Fatalf("after the paused window: %v", res)
	}
	if res, err := ApplyEmit(v, lim, &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: scheduleID, ExpectedGeneration: 1, Max: 32}, t0+11*minute); err != nil ||
		len(res.GetEnqueuedIds()) != 1 || res.GetEnqueuedIds()[0] != OccurrenceID(scheduleID, 1, 11) {
		t.Fatalf("first occurrence after the resume: %v %v", res, err)
	}
	for _, e := range ledgerOf(t, v) {
		paused := e.GetOrdinal() >= 1 && e.GetOrdinal() <= 10
		if paused != (e.GetOutcome() == outPaused) || e.GetNominalDueAtUnixMicros() != t0+int64(e.GetOrdinal())*minute {
			t.Fatalf("ledger record %v", e)
		}
	}
	if got := countOutcomes(t, v, 1); got[outPaused] != 10 || got[outEnqueued] != 2 || len(got) != 2 {
		t.Fatalf("outcomes %v", got) // countOutcomes fails on an ordinal with two records
	}
	msgs := messages(t, v)
	if len(msgs) != 2 || msgs[OccurrenceID(scheduleID, 1, 0)] == nil || msgs[OccurrenceID(scheduleID, 1, 11)] == nil {
		t.Fatalf("messages %v", msgs)
	}
}

// TestPausedOneShotIsLedgered: an At schedule paused across its instant records it PAUSED
// when resumed, and its series ends without an occurrence.
func TestPausedOneShotIsLedgered(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(at(t0+hour)), 0, t0)
	pause(t, v, t0+sec)
	res := resume(t, v, t0+2*hour)
	if res.GetPassedWithoutMessage() != 1 || res.GetNextDueAtUnixMicros() != 0 {
		t.Fatalf("resume: %v", res)
	}
	if led := ledgerOf(t, v); len(led) != 1 || led[0].GetOutcome() != outPaused || led[0].GetNominalDueAtUnixMicros() != t0+hour {
		t.Fatalf("ledger %v", led)
	}
	if len(messages(t, v)) != 0 {
		t.Fatal("a paused instant was enqueued")
	}
}

// TestEmptyTemplateDeliversEmptyPayload: an empty payload and headers mean none; the
// occurrence message carries empty strings.
func TestEmptyTemplateDeliversEmptyPayload(t *testing.T) {
	v := kv.NewMemory()
	def := definition(every(t0, minute))
	def.Template = &orreryv1.MessageTemplate{}
	configure(t, v, def, 0, t0)
	res := mustEmit(t, v, 1, t0)
	if len(res.GetEnqueuedIds()) != 1 {
		t.Fatalf("emit %v", res)
	}
	m := messages(t, v)[res.GetEnqueuedIds()[0]]
	if m.GetPayloadJson() != "" || m.GetHeadersJson() != "" {
		t.Fatalf("message %v", m)
	}
}

// TestScheduleNameIsKeptAndInspected: the definition's name is validated like other names,
// stored with the record and shown by inspection.
func TestScheduleNameIsKeptAndInspected(t *testing.T) {
	v := kv.NewMemory()
	def := definition(every(t0, minute))
	def.Name = "nightly report"
	configure(t, v, def, 0, t0)
	insp, err := Inspect(v, lane, scheduleID, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got := insp.GetRecord().GetDefinition().GetName(); got != "nightly report" {
		t.Fatalf("inspected name %q", got)
	}
	longest := definition(every(t0, minute))
	longest.Name = strings.Repeat("é", input.MaxScheduleNameBytes/2)
	configure(t, kv.NewMemory(), longest, 0, t0)
}
