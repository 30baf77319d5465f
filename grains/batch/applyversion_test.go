package batch

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/kv"
)

// setApplyVersion applies a SetApplyVersion of version from principal with a, returning the
// mutation's result or the apply's error.
func setApplyVersion(t *testing.T, a Applier, v kv.View, principal string, version uint32, id string) (*orreryv1.MutationResult, error) {
	t.Helper()
	b := &orreryv1.Batch{CommandId: id, Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_SetApplyVersion{SetApplyVersion: &orreryv1.SetApplyVersion{Version: version}}}}}
	out, err := a.ApplyBatch(v, principal, b, t0)
	if err != nil {
		return nil, err
	}
	return out.Receipt.GetResults()[0], nil
}

// TestSetApplyVersionRaisesItForGood: a partition holds apply version 1 until a
// SetApplyVersion from Orrery's own principal raises it (a caller's is Unauthorized); a version
// below it is refused (Validation: versions never go back) and the same one changes nothing.
func TestSetApplyVersionRaisesItForGood(t *testing.T) {
	v := granted(t)
	if held, err := LoadApplyVersion(v); err != nil || held != 1 {
		t.Fatalf("before any SetApplyVersion: %d, %v; want 1", held, err)
	}
	a := applier()
	a.KnownApplyVersion = 3
	if r, err := setApplyVersion(t, a, v, "alice", 2, "alice"); err != nil || !errors.Is(resultErr(r), orrery.ErrUnauthorized) {
		t.Fatalf("alice's SetApplyVersion: %v %v, want Unauthorized", resultErr(r), err)
	}
	if r, err := setApplyVersion(t, a, v, systemTest, 2, "to-2"); err != nil || r.GetError() != nil {
		t.Fatalf("SetApplyVersion 2: %v %v", resultErr(r), err)
	}
	if held, _ := LoadApplyVersion(v); held != 2 {
		t.Fatalf("after SetApplyVersion 2 the partition holds %d", held)
	}
	a.ApplyVersion = 2
	var e *orrery.Error
	if r, err := setApplyVersion(t, a, v, systemTest, 1, "back-to-1"); err != nil || !errors.As(resultErr(r), &e) || e.Code != orrery.CodeValidation || !strings.Contains(e.Message, "never go back") {
		t.Fatalf("SetApplyVersion 1 at 2: %v %v, want Validation", resultErr(r), err)
	}
	if r, err := setApplyVersion(t, a, v, systemTest, 2, "again-2"); err != nil || r.GetError() != nil {
		t.Fatalf("SetApplyVersion 2 at 2: %v %v", resultErr(r), err)
	}
	if held, _ := LoadApplyVersion(v); held != 2 {
		t.Fatalf("the partition holds %d, want 2", held)
	}
}

// TestABinaryStopsBeforeAVersionItDoesNotKnow: a binary that knows version 1 neither raises a
// partition to 2 nor applies any command of a partition at 2: both are Internal (its replica
// stops applying rather than apply otherwise than the replicas that know 2), and nothing is
// written.
func TestABinaryStopsBeforeAVersionItDoesNotKnow(t *testing.T) {
	v := granted(t)
	before := v.Clone()
	onlyOne := applier()
	onlyOne.KnownApplyVersion = 1
	if _, err := setApplyVersion(t, onlyOne, v, systemTest, 2, "to-2"); !errors.Is(err, orrery.ErrInternal) || !v.Equal(before) {
		t.Fatalf("SetApplyVersion 2 on a binary knowing 1: %v (wrote: %v), want Internal and nothing written", err, !v.Equal(before))
	}
	newer := applier()
	newer.KnownApplyVersion = 2
	if r, err := setApplyVersion(t, newer, v, systemTest, 2, "to-2"); err != nil || r.GetError() != nil {
		t.Fatal(resultErr(r), err)
	}
	older := applier()
	older.KnownApplyVersion = 1
	older.ApplyVersion = 2 // what its state machine read from the partition
	before = v.Clone()
	b := &orreryv1.Batch{CommandId: fmt.Sprintf("enqueue-%d", 1), Mutations: []*orreryv1.Mutation{enqueueMutation("m1")}}
	if _, err := older.ApplyBatch(v, "alice", b, t0); !errors.Is(err, orrery.ErrInternal) || !strings.Contains(err.Error(), "knows versions up to 1") || !v.Equal(before) {
		t.Fatalf("an enqueue at version 2 on a binary knowing 1: %v, want Internal and nothing written", err)
	}
	if _, err := older.ApplyDue(v, systemTest, b, t0); !errors.Is(err, orrery.ErrInternal) {
		t.Fatalf("a due command at version 2 on a binary knowing 1: %v, want Internal", err)
	}
}

// TestScheduleBoundsWaitForTheirApplyVersion: a configure that sets a bound is refused
// (Validation naming the apply version) while the partition applies under version 1, since a
// replica of an older release would fire past the bound, and taken at version 2; a configure
// without bounds is taken at either.
func TestScheduleBoundsWaitForTheirApplyVersion(t *testing.T) {
	bounded := configureMutation(everySpec(t0+hour, hour), 0)
	bounded.GetConfigureSchedule().GetDefinition().MaxOccurrences = 3
	for _, c := range []struct {
		version uint32
		taken   bool
	}{{1, false}, {2, true}} {
		v := granted(t)
		a := applier()
		a.ApplyVersion = c.version
		got := oneResultErr(a.ApplyBatch(v, "alice", &orreryv1.Batch{CommandId: "bounded", Mutations: []*orreryv1.Mutation{bounded}}, t0))
		if taken := got == nil; taken != c.taken {
			t.Fatalf("at apply version %d a bounded configure: %v, want taken %v", c.version, got, c.taken)
		}
		if !c.taken && (!errors.Is(got, orrery.ErrValidation) || !strings.Contains(got.Error(), "field 12 of orrery.v1.ScheduleDefinition, which this partition does not take under apply version 1")) {
			t.Fatalf("at apply version 1: %v, want Validation naming max_occurrences (field 12) and version 1", got)
		}
		plain := configureMutation(everySpec(t0+hour, hour), 0)
		plain.GetConfigureSchedule().GetDefinition().ScheduleId = "1f8fad5b-d9cb-469f-a165-70867728950e"
		if out, err := a.ApplyBatch(v, "alice", &orreryv1.Batch{CommandId: "plain", Mutations: []*orreryv1.Mutation{plain}}, t0); err != nil || out.Receipt.GetResults()[0].GetError() != nil {
			t.Fatalf("at apply version %d a configure without bounds: %v %v", c.version, err, resultErr(out.Receipt.GetResults()[0]))
		}
	}
}
