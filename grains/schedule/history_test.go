package schedule

import (
	"testing"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/retained"
)

// TestAReplacementKeepsTheReplacedGeneration: each replacement keeps the record it replaced
// (its definition, revision and watermark, when and by whom), inspection lists them newest
// first, only the last KeptGenerations stay, and a delete removes them with their share of
// the retained-record account.
func TestAReplacementKeepsTheReplacedGeneration(t *testing.T) {
	v := kv.NewMemory()
	before, err := retained.Load(v)
	if err != nil {
		t.Fatal(err)
	}
	configure(t, v, definition(every(t0+minute, minute)), 0, t0)
	drain(t, v, 1, t0+3*minute) // ordinals 0..2
	first := mustLoad(t, v)
	replacement := definition(every(t0+hour, hour))
	res, err := applyConfigure(v, input.DefaultLimits(), "bob", &orreryv1.ConfigureSchedule{Definition: replacement, ExpectedRevision: first.GetRevision()}, t0+4*minute)
	if err != nil {
		t.Fatal(err)
	}
	insp, err := Inspect(v, lane, scheduleID, t0+4*minute)
	if err != nil {
		t.Fatal(err)
	}
	gens := insp.GetGenerations()
	if len(gens) != 1 {
		t.Fatalf("kept generations %v, want the one replaced", gens)
	}
	g := gens[0]
	if g.GetRecord().GetGeneration() != 1 || g.GetRecord().GetNextOrdinal() != 3 || g.GetRecord().GetRevision() != first.GetRevision() ||
		g.GetRecord().GetDefinition().GetSpec().GetEvery().GetIntervalMicros() != minute || g.GetReplacedAtUnixMicros() != t0+4*minute || g.GetReplacedBy() != "bob" {
		t.Fatalf("kept generation %v", g)
	}
	// Twelve more replacements: the last KeptGenerations stay, newest first.
	revision := res.GetRevision()
	for i := range 12 {
		def := definition(every(t0+hour, hour+int64(i+1)*sec))
		res := configure(t, v, def, revision, t0+5*minute)
		revision = res.GetRevision()
	}
	insp, err = Inspect(v, lane, scheduleID, t0+5*minute)
	if err != nil {
		t.Fatal(err)
	}
	if gens = insp.GetGenerations(); len(gens) != KeptGenerations || gens[0].GetRecord().GetGeneration() != 13 || gens[KeptGenerations-1].GetRecord().GetGeneration() != 4 {
		t.Fatalf("kept %d generations from %d to %d, want %d from 13 to 4", len(gens), gens[0].GetRecord().GetGeneration(), gens[len(gens)-1].GetRecord().GetGeneration(), KeptGenerations)
	}
	if during, err := retained.Load(v); err != nil || during.GetRecords() != before.GetRecords()+1+KeptGenerations {
		t.Fatalf("retained account %v (%v), want the schedule and its %d kept generations on it", during, err, KeptGenerations)
	}
	if _, err := ApplyDelete(v, &orreryv1.DeleteSchedule{Lane: lane, ScheduleId: scheduleID, AnyRevision: true}, t0+6*minute, Newest); err != nil {
		t.Fatal(err)
	}
	left := 0
	if err := kv.ScanPrefix(v, keys.ScheduleHistoryPrefix(lane, scheduleID), func(_, _ []byte) (bool, error) { left++; return true, nil }); err != nil || left != 0 {
		t.Fatalf("after the delete %d kept generations remain (%v)", left, err)
	}
	after, err := retained.Load(v)
	if err != nil {
		t.Fatal(err)
	}
	if after.GetRecords() != before.GetRecords() || after.GetBytes() != before.GetBytes() {
		t.Fatalf("retained account %v after the delete, want %v as before the schedule", after, before)
	}
}

// TestReplacementsKeepNothingBeforeTheirApplyVersion: without Rules.KeepsGenerations a
// replacement keeps no generation.
func TestReplacementsKeepNothingBeforeTheirApplyVersion(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(every(t0+minute, minute)), 0, t0)
	m := &orreryv1.ConfigureSchedule{Definition: definition(every(t0+hour, hour)), ExpectedRevision: 1}
	if _, err := ApplyConfigure(v, input.DefaultLimits(), "alice", m, nil, t0, Rules{}); err != nil {
		t.Fatal(err)
	}
	if gens, err := Generations(v, lane, scheduleID); err != nil || len(gens) != 0 {
		t.Fatalf("kept %v (%v) before apply version 8", gens, err)
	}
}
