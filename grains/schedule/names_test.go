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
)

// resolve resolves name in the test lane, failing the test on an error.
func resolve(t *testing.T, r kv.Reader, name string) NameResolution {
	t.Helper()
	n, err := ResolveName(r, lane, "name", name)
	if err != nil {
		t.Fatalf("resolve %q: %v", name, err)
	}
	return n
}

// namedDefinition is an every-minute definition of the schedule id named name.
func namedDefinition(id, name string) *orreryv1.ScheduleDefinition {
	def := definition(every(t0, minute))
	def.ScheduleId, def.Name = id, name
	return def
}

// TestADeletedNameResolvesToANewIdentity: a name resolves to its first identity
// (ScheduleIDFromName, the id of schedules named before names were reusable) until that
// schedule is deleted, then to the next one, which configures as a new schedule whose
// occurrences and ledger are its own. The deleted id stays terminal: configuring it is
// refused, its tombstone untouched, and an action on it says it was deleted.
func TestADeletedNameResolvesToANewIdentity(t *testing.T) {
	lim := input.DefaultLimits()
	v := kv.NewMemory()
	first := resolve(t, v, "nightly")
	if first.Incarnation != 1 || first.ScheduleID != input.ScheduleIDFromName(lane.GetNamespace(), "nightly") {
		t.Fatalf("an unused name resolves to %+v, want its first identity", first)
	}
	configure(t, v, namedDefinition(first.ScheduleID, "nightly"), 0, t0)
	if got := resolve(t, v, "nightly"); got != first {
		t.Fatalf("a live schedule's name resolves to %+v, want %+v", got, first)
	}
	old, err := ApplyEmit(v, lim, &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: first.ScheduleID, ExpectedGeneration: 1, Max: 32}, t0+2*minute)
	if err != nil || len(old.GetEnqueuedIds()) != 3 {
		t.Fatalf("emit of the first schedule: %v, %v", old, err)
	}
	if _, err := ApplyDelete(v, &orreryv1.DeleteSchedule{Lane: lane, ScheduleId: first.ScheduleID, AnyRevision: true}, t0+3*minute, Newest); err != nil {
		t.Fatal(err)
	}
	tombstone, _, err := v.Get(keys.ScheduleTombstoneKey(lane, first.ScheduleID))
	if err != nil {
		t.Fatal(err)
	}

	second := resolve(t, v, "nightly")
	if second.Incarnation != 2 || second.ScheduleID != input.ScheduleIDFromNameIncarnation(lane.GetNamespace(), "nightly", 2) || second.ScheduleID == first.ScheduleID {
		t.Fatalf("a deleted name resolves to %+v, want its second identity", second)
	}
	res := configure(t, v, namedDefinition(second.ScheduleID, "nightly"), 0, t0+3*minute)
	if res.GetGeneration() != 1 || res.GetRevision() != 1 {
		t.Fatalf("the name's new schedule: %v, want a new one at generation 1", res)
	}
	renewed, err := ApplyEmit(v, lim, &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: second.ScheduleID, ExpectedGeneration: 1, Max: 32}, t0+3*minute)
	if err != nil || len(renewed.GetEnqueuedIds()) == 0 {
		t.Fatalf("emit of the new schedule: %v, %v", renewed, err)
	}
	for _, id := range renewed.GetEnqueuedIds() {
		if want := OccurrenceID(second.ScheduleID, 1, 0)[:len("recurring-")+32]; !strings.HasPrefix(id, want) || strings.Contains(id, input.UUIDHex(first.ScheduleID)) {
			t.Fatalf("the new schedule enqueued %s, want an id of its own (%s...)", id, want)
		}
	}
	ledger, _, err := ReadLedger(v, lane, second.ScheduleID, LedgerQuery{ToMicros: input.MaxInstantMicros, MaxRecords: MaxLedgerRead})
	if err != nil || len(ledger) != len(renewed.GetEnqueuedIds()) {
		t.Fatalf("the new schedule's ledger holds %d records (%v), want its %d occurrences only", len(ledger), err, len(renewed.GetEnqueuedIds()))
	}
	if got := resolve(t, v, "nightly"); got != second {
		t.Fatalf("the name of the new schedule resolves to %+v, want %+v", got, second)
	}

	before := v.Clone()
	_, err = applyConfigure(v, lim, "alice", &orreryv1.ConfigureSchedule{Definition: namedDefinition(first.ScheduleID, "nightly")}, t0+4*minute)
	wantCode(t, err, orrery.ErrRevisionConflict, "definition.schedule_id")
	_, err = ApplyPause(v, lim, &orreryv1.PauseSchedule{Lane: lane, ScheduleId: first.ScheduleID, AnyRevision: true}, t0+4*minute)
	wantCode(t, err, orrery.ErrNotFound, "schedule_id")
	if !strings.Contains(err.Error(), "was deleted") {
		t.Fatalf("a pause of the deleted id: %v, want it to say it was deleted", err)
	}
	if after, _, _ := v.Get(keys.ScheduleTombstoneKey(lane, first.ScheduleID)); !v.Equal(before) || !bytes.Equal(after, tombstone) {
		t.Fatal("a refused configure or pause of the deleted id wrote")
	}

	if _, err := ApplyDelete(v, &orreryv1.DeleteSchedule{Lane: lane, ScheduleId: second.ScheduleID, AnyRevision: true}, t0+5*minute, Newest); err != nil {
		t.Fatal(err)
	}
	if third := resolve(t, v, "nightly"); third.Incarnation != 3 {
		t.Fatalf("a name deleted twice resolves to %+v, want its third identity", third)
	}
	other := &orreryv1.Lane{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Key: "other-key"}
	if n, err := ResolveName(v, other, "name", "nightly"); err != nil || n != first {
		t.Fatalf("the name in another lane resolves to %+v, %v; want its own first identity", n, err)
	}
}

// countingReader counts the reads of the reader it wraps.
type countingReader struct {
	kv.Reader
	gets int
}

func (c *countingReader) Get(key []byte) ([]byte, bool, error) {
	c.gets++
	return c.Reader.Get(key)
}

// TestResolveNameReadsLogarithmically: after n deletions of a name the search finds its
// (n+1)-th identity in at most 2·log2(n+1)+2 tombstone reads, and a bad name is a Validation
// error naming the field.
func TestResolveNameReadsLogarithmically(t *testing.T) {
	v := kv.NewMemory()
	for _, n := range []uint64{1, 2, 3, 100, 1000} {
		for k := uint64(1); k <= n; k++ {
			id := input.ScheduleIDFromNameIncarnation(lane.GetNamespace(), "churn", k)
			if _, err := record.Store(v, keys.ScheduleTombstoneKey(lane, id), &orreryv1.ScheduleTombstone{DeletedAtUnixMicros: t0}); err != nil {
				t.Fatal(err)
			}
		}
		r := &countingReader{Reader: v}
		got, err := ResolveName(r, lane, "name", "churn")
		if err != nil || got.Incarnation != n+1 {
			t.Fatalf("after %d deletions: %+v, %v; want incarnation %d", n, got, err, n+1)
		}
		bound := 2
		for m := n + 1; m > 1; m /= 2 {
			bound += 2
		}
		if r.gets > bound {
			t.Fatalf("after %d deletions the search read %d times, more than %d", n, r.gets, bound)
		}
	}
	for _, bad := range []string{"", "a\x00b", strings.Repeat("x", input.MaxScheduleNameBytes+1)} {
		_, err := ResolveName(v, lane, "name", bad)
		wantCode(t, err, orrery.ErrValidation, "name")
	}
}
