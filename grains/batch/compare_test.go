package batch

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
)

// enqueuePayload is an Enqueue of id into lane with payloadJSON.
func enqueuePayload(id, payloadJSON string) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: lane, Id: id, PayloadJson: payloadJSON}}}
}

// payloadOf is the payload of the live message id of lane ("" when there is none).
func payloadOf(t *testing.T, v kv.Reader, id string) string {
	t.Helper()
	msgs, _, err := queue.ListLane(v, lane, "", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.GetId() == id {
			return m.GetPayloadJson()
		}
	}
	return ""
}

// TestCompareOrReturnWaitsForItsApplyVersion: before apply version 18 an enqueue under a
// held id with another payload is taken for the message there (created=false, nothing
// written), exactly as before; from 18 it fails IdempotencyConflict on the enqueue's id, and
// the same message again is still created=false.
func TestCompareOrReturnWaitsForItsApplyVersion(t *testing.T) {
	if KnownApplyVersion < ApplyVersionCompareOrReturn {
		t.Fatalf("KnownApplyVersion %d is below ApplyVersionCompareOrReturn %d", KnownApplyVersion, ApplyVersionCompareOrReturn)
	}
	v := granted(t)
	a := applier()
	a.ApplyVersion = ApplyVersionCompareOrReturn - 1
	applyAt(t, a, v, "alice", "first", enqueuePayload("m1", `"x"`), t0)
	before, _, _ := queue.ListLane(v, lane, "", 100, 0)
	r := applyAt(t, a, v, "alice", "older", enqueuePayload("m1", `"y"`), t0+sec)
	after, _, _ := queue.ListLane(v, lane, "", 100, 0)
	if r.GetError() != nil || r.GetEnqueue().GetCreated() || len(after) != 1 || !proto.Equal(before[0], after[0]) {
		t.Fatalf("at apply version %d: %v, want created=false and the first message kept as it was", a.ApplyVersion, r)
	}
	a.ApplyVersion = ApplyVersionCompareOrReturn
	r = applyAt(t, a, v, "alice", "current", enqueuePayload("m1", `"y"`), t0+2*sec)
	if err := resultErr(r); !errors.Is(err, orrery.ErrIdempotencyConflict) || r.GetError().GetField() != "mutations[0].enqueue.id" {
		t.Fatalf("at apply version %d: %v, want IdempotencyConflict on mutations[0].enqueue.id", a.ApplyVersion, r)
	}
	if r := applyAt(t, a, v, "alice", "same", enqueuePayload("m1", `"x"`), t0+3*sec); r.GetError() != nil || r.GetEnqueue().GetCreated() {
		t.Fatalf("the same message again: %v, want created=false", r)
	}
}

// TestACompareConflictFailsLikeOtherErrors: a conflicting enqueue fails alone in a batch,
// leaving the others applied, like any mutation's error; under all_or_nothing it rolls the
// whole batch back, and nothing of it is written.
func TestACompareConflictFailsLikeOtherErrors(t *testing.T) {
	a := applier()
	a.ApplyVersion = ApplyVersionCompareOrReturn
	for _, allOrNothing := range []bool{false, true} {
		v := granted(t)
		applyAt(t, a, v, "alice", "first", enqueuePayload("m1", `"x"`), t0)
		b := &orreryv1.Batch{CommandId: "batch", AllOrNothing: allOrNothing, Mutations: []*orreryv1.Mutation{
			enqueuePayload("m2", `"new"`), enqueuePayload("m1", `"y"`),
		}}
		out, err := a.ApplyBatch(v, "alice", b, t0+sec)
		if err != nil {
			t.Fatal(err)
		}
		if allOrNothing {
			if e := out.Receipt.GetError(); !errors.Is(orrery.FromProto(e), orrery.ErrIdempotencyConflict) || e.GetField() != "mutations[1].enqueue.id" || payloadOf(t, v, "m2") != "" {
				t.Fatalf("all-or-nothing: receipt %v, m2 %q; want the batch rolled back", out.Receipt, payloadOf(t, v, "m2"))
			}
			continue
		}
		rs := out.Receipt.GetResults()
		if len(rs) != 2 || !rs[0].GetEnqueue().GetCreated() || !errors.Is(resultErr(rs[1]), orrery.ErrIdempotencyConflict) || payloadOf(t, v, "m2") != `"new"` || payloadOf(t, v, "m1") != `"x"` {
			t.Fatalf("receipt %v: want m2 created and m1's conflict alone", out.Receipt)
		}
	}
}
