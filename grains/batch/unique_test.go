package batch

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
)

// enqueueUnique is an Enqueue of id into lane with a unique key held for periodMicros (0:
// while live).
func enqueueUnique(id, key string, periodMicros int64) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{
		Lane: lane, Id: id, PayloadJson: `"x"`, Unique: &orreryv1.UniqueSpec{Key: key, PeriodMicros: periodMicros}}}}
}

// TestUniqueWaitsForItsApplyVersion: before apply version 21 a command carrying an enqueue's
// unique spec is refused whole (Validation naming the field, nothing written), by the release
// that gates it and, with the same error, by an older one to which the field is unknown; from
// 21 a second enqueue under the key is skipped as a duplicate of the first.
func TestUniqueWaitsForItsApplyVersion(t *testing.T) {
	v := granted(t)
	before := v.Clone()
	a := applier()
	a.ApplyVersion = ApplyVersionUnique - 1
	b := &orreryv1.Batch{CommandId: "unique", Mutations: []*orreryv1.Mutation{enqueueMutation("m0"), enqueueUnique("m1", "u", 0)}}
	_, gatedErr := a.ApplyBatch(v, sender(b), b, t0)
	const want = "mutations[1]: carries field 11 of orrery.v1.Enqueue"
	if !errors.Is(gatedErr, orrery.ErrValidation) || !strings.Contains(gatedErr.Error(), want) || !v.Equal(before) {
		t.Fatalf("at apply version %d: %v (wrote: %v), want Validation %q and nothing written", a.ApplyVersion, gatedErr, !v.Equal(before), want)
	}
	encoded, err := proto.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	older := olderBatch(t, encoded, map[string][]string{"Enqueue": {"unique"}}, nil)
	if olderErr := wireError(older, a.ApplyVersion); olderErr == nil || olderErr.Error() != gatedErr.Error() {
		t.Fatalf("an older release that does not know it:\n%v\nthe release that gates it:\n%v", olderErr, gatedErr)
	}
	a.ApplyVersion = ApplyVersionUnique
	if r := applyAt(t, a, v, "alice", "first", enqueueUnique("m1", "u", 0), t0); r.GetError() != nil || !r.GetEnqueue().GetCreated() {
		t.Fatalf("first enqueue under the key: %v", r)
	}
	r := applyAt(t, a, v, "alice", "second", enqueueUnique("m2", "u", 0), t0+sec)
	if r.GetError() != nil || r.GetEnqueue().GetCreated() || r.GetEnqueue().GetDuplicateOf() != "m1" {
		t.Fatalf("second enqueue under the key: %v, want a duplicate of m1", r)
	}
}

// TestADuplicateEnqueueReplaysItsReceipt: an enqueue skipped as a duplicate stores its receipt
// like any command: sent again under its command id, even once the key is free, it returns the
// byte-identical receipt (duplicate_of and all) and writes nothing.
func TestADuplicateEnqueueReplaysItsReceipt(t *testing.T) {
	v := granted(t)
	a := applier()
	a.ApplyVersion = ApplyVersionUnique
	applyAt(t, a, v, "alice", "first", enqueueUnique("m1", "u", 0), t0)
	dup := &orreryv1.Batch{CommandId: "dup", Mutations: []*orreryv1.Mutation{enqueueUnique("m2", "u", 0)}}
	out, err := a.ApplyBatch(v, "alice", dup, t0+sec)
	if err != nil || out.Receipt.GetResults()[0].GetEnqueue().GetDuplicateOf() != "m1" {
		t.Fatalf("duplicate: %v %v", out, err)
	}
	if r := applyAt(t, a, v, "alice", "cancel", &orreryv1.Mutation{Kind: &orreryv1.Mutation_CancelMessage{CancelMessage: &orreryv1.CancelMessage{Lane: lane, Id: "m1"}}}, t0+2*sec); r.GetError() != nil {
		t.Fatal(resultErr(r))
	}
	before := v.Clone()
	again, err := a.ApplyBatch(v, "alice", dup, t0+3*sec)
	if err != nil || !again.Replayed || !bytes.Equal(again.ReceiptBytes, out.ReceiptBytes) || !v.Equal(before) {
		t.Fatalf("replay: %v %v (wrote: %v), want the same receipt and nothing written", again, err, !v.Equal(before))
	}
	if r := applyAt(t, a, v, "alice", "fresh", enqueueUnique("m2", "u", 0), t0+4*sec); !r.GetEnqueue().GetCreated() {
		t.Fatalf("a new command once m1 is cancelled: %v, want m2 created", r)
	}
}

// TestHousekeepPrunesLapsedUniqueRecords: a unique record held for a period makes housekeeping
// due once the period has passed, and Housekeep removes it (counted), within its bound; a
// record held while live is never pruned.
func TestHousekeepPrunesLapsedUniqueRecords(t *testing.T) {
	v := granted(t)
	a := applier()
	a.ApplyVersion = ApplyVersionUnique
	applyAt(t, a, v, "alice", "live", enqueueUnique("m0", "held", 0), t0)
	applyAt(t, a, v, "alice", "a", enqueueUnique("m1", "a", hour), t0)
	applyAt(t, a, v, "alice", "b", enqueueUnique("m2", "b", 2*hour), t0)
	if due, err := a.HousekeepingDue(v, t0+hour-1); err != nil || due {
		t.Fatalf("before any period passed: due %v %v", due, err)
	}
	if due, err := a.HousekeepingDue(v, t0+hour); err != nil || !due {
		t.Fatalf("once the first period passed: due %v %v", due, err)
	}
	if r := housekeep(t, a, v, "h1", 1, t0+3*hour); r.GetUniqueRecordsRemoved() != 1 || !r.GetMore() {
		t.Fatalf("housekeep with room for one: %v, want one unique record removed and more", r)
	}
	if _, found, _ := v.Get(keys.UniqueKey(lane, "a")); found {
		t.Fatal("the record that lapsed first stayed")
	}
	if r := housekeep(t, a, v, "h2", 100, t0+3*hour); r.GetUniqueRecordsRemoved() != 1 || r.GetMore() {
		t.Fatalf("housekeep: %v, want the other lapsed record removed", r)
	}
	if n := countPrefix(t, v, keys.Unique); n != 1 {
		t.Fatalf("%d unique keys remain, want the record held while live", n)
	}
	if r := applyAt(t, a, v, "alice", "dup", enqueueUnique("m3", "held", 0), t0+3*hour); r.GetEnqueue().GetDuplicateOf() != "m0" {
		t.Fatalf("the key held while live: %v, want a duplicate of m0", r)
	}
}
