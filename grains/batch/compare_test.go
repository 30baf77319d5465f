package batch

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/saga"
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

// TestADueExpiryMeetingAForeignMessageFailsAlone: through the due path, a saga whose timeout
// id a client's message holds is not timed out from apply version 18: its ExpireSaga fails
// IdempotencyConflict alone and the saga stays Waiting; before 18 the saga times out onto
// that message, as it always did.
func TestADueExpiryMeetingAForeignMessageFailsAlone(t *testing.T) {
	for _, version := range []uint32{ApplyVersionCompareOrReturn - 1, ApplyVersionCompareOrReturn} {
		v := granted(t)
		a := applier()
		a.ApplyVersion = version
		timeouts := &orreryv1.Lane{Namespace: lane.GetNamespace(), Queue: "timeouts", Key: lane.GetKey()}
		start := &orreryv1.Mutation{Kind: &orreryv1.Mutation_CompareExchangeSaga{CompareExchangeSaga: &orreryv1.CompareExchangeSaga{
			Lane: lane, SagaId: scheduleID, Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING, StateJson: `{}`, DeadlineUnixMicros: t0 + sec,
			Timeout: &orreryv1.SagaTimeout{Queue: "timeouts", Template: &orreryv1.MessageTemplate{PayloadJson: `"timed out"`}},
		}}}
		squat := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: timeouts, Id: saga.TimeoutMessageID(scheduleID, 1), PayloadJson: `"timed out"`}}}
		for i, m := range []*orreryv1.Mutation{start, squat} {
			if r := applyAt(t, a, v, "alice", fmt.Sprint("setup-", i), m, t0); r.GetError() != nil {
				t.Fatalf("setup %d: %v", i, resultErr(r))
			}
		}
		expire := &orreryv1.Mutation{Kind: &orreryv1.Mutation_ExpireSaga{ExpireSaga: &orreryv1.ExpireSaga{Lane: lane, SagaId: scheduleID, ExpectedRevision: 1}}}
		rc, err := a.ApplyDue(v, "system:coordinator", &orreryv1.Batch{CommandId: "due-1", Mutations: []*orreryv1.Mutation{expire}}, t0+2*sec)
		if err != nil {
			t.Fatal(err)
		}
		rec := &orreryv1.SagaRecord{}
		if _, err := record.Load(v, keys.SagaKey(lane, scheduleID), rec); err != nil {
			t.Fatal(err)
		}
		if version < ApplyVersionCompareOrReturn {
			if rc.GetResults()[0].GetError() != nil || rec.GetPhase() != orreryv1.SagaPhase_SAGA_PHASE_TIMED_OUT {
				t.Fatalf("at apply version %d: %v, saga %v; want it timed out", version, rc, rec.GetPhase())
			}
			continue
		}
		if err := resultErr(rc.GetResults()[0]); !errors.Is(err, orrery.ErrIdempotencyConflict) || rec.GetPhase() != orreryv1.SagaPhase_SAGA_PHASE_WAITING || rec.GetRevision() != 1 {
			t.Fatalf("at apply version %d: %v, saga %v at %d; want IdempotencyConflict and the saga still waiting", version, err, rec.GetPhase(), rec.GetRevision())
		}
	}
}
