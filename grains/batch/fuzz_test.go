package batch

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/kv"
)

// fuzzState is the partition every fuzzed command applies to: the seeded grants, a schedule
// with a backlog, a saga waiting on its deadline and a queued message, so that mutations on
// existing records reach past their lookups.
func fuzzState(t fataler) *kv.Memory {
	v := granted(t)
	for i, b := range []*orreryv1.Batch{
		{CommandId: "seed-configure", Mutations: []*orreryv1.Mutation{configureMutation(everySpec(t0, hour), 0)}},
		{CommandId: "seed-saga", Mutations: []*orreryv1.Mutation{mutationOf(sagaMutation(sagaID, 0, t0+hour))}},
		{CommandId: "seed-enqueue", Mutations: []*orreryv1.Mutation{enqueueMutation("m1")}},
	} {
		if _, err := applier().ApplyBatch(v, sender(b), b, t0+int64(i)*sec); err != nil {
			t.Fatalf("seed %s: %v", b.GetCommandId(), err)
		}
	}
	return v
}

// fuzzSeedRequests are well-formed commands of every kind, for the corpus.
func fuzzSeedRequests() []*orreryv1.CommandRequest {
	one := func(principal, id string, m ...*orreryv1.Mutation) *orreryv1.CommandRequest {
		return &orreryv1.CommandRequest{Principal: principal, Batch: &orreryv1.Batch{CommandId: id, Mutations: m}}
	}
	return []*orreryv1.CommandRequest{
		one("alice", "c1", configureMutation(everySpec(t0, sec), 1)),
		one("alice", "c2", enqueueMutation("m2"), enqueueMutation("m3")),
		one(systemTest, "c3", emitMutation(1)),
		one("alice", "c4", mutationOf(&orreryv1.PauseSchedule{Lane: lane, ScheduleId: scheduleID})),
		one("alice", "c5", mutationOf(&orreryv1.TriggerSchedule{Lane: lane, ScheduleId: scheduleID})),
		one("alice", "c6", mutationOf(sagaMutation(sagaID, 1, t0+2*hour))),
		one(systemTest, "c7", mutationOf(&orreryv1.ExpireSaga{Lane: lane, SagaId: sagaID, ExpectedRevision: 1})),
		one("alice", "c8", mutationOf(&orreryv1.Receive{Namespace: lane.Namespace, Queue: lane.Queue, Max: 4, LeaseDurationMicros: 30 * sec})),
		one("bob", "c9", mutationOf(&orreryv1.DeleteSchedule{Lane: lane, ScheduleId: scheduleID})),
		one(systemTest, "c10", housekeepMutation(16)),
		one("alice", "c11", mutationOf(&orreryv1.PutGrant{Principal: "dave", Rules: []*orreryv1.GrantRule{{Namespace: "acme", Capabilities: 4}}})),
		one("carol", "c12", enqueueMutation("m4")),
		{Principal: "alice", Batch: &orreryv1.Batch{CommandId: "c13", AllOrNothing: true, Mutations: []*orreryv1.Mutation{enqueueMutation("m5"), configureMutation(everySpec(t0, 0), 0)}}},
	}
}

// FuzzApplyCommand: arbitrary bytes decoded as a CommandRequest, the message a client sends a
// partition, applied to a populated partition as its principal never panic and never fail
// Internal; apply is deterministic (two replicas applying it to equal states write equal
// states and equal receipts); and the same command applied again replays the identical receipt
// and writes nothing (or, when the caller lacks the grants, is refused Unauthorized).
func FuzzApplyCommand(f *testing.F) {
	for _, req := range fuzzSeedRequests() {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint32(60))
	}
	base := fuzzState(f)
	f.Fuzz(func(t *testing.T, data []byte, afterSeconds uint32) {
		req := &orreryv1.CommandRequest{}
		if proto.Unmarshal(data, req) != nil {
			return
		}
		now := t0 + 10*sec + int64(afterSeconds)*sec
		a, b := base.Clone(), base.Clone()
		outA, errA := applier().ApplyBatch(a, req.GetPrincipal(), req.GetBatch(), now)
		outB, errB := applier().ApplyBatch(b, req.GetPrincipal(), req.GetBatch(), now)
		if orrery.CodeOf(errA) == orrery.CodeInternal {
			t.Fatalf("apply failed Internal: %v", errA)
		}
		if (errA == nil) != (errB == nil) || (errA != nil && errA.Error() != errB.Error()) {
			t.Fatalf("apply is not deterministic: %v, then %v", errA, errB)
		}
		if errA != nil {
			return
		}
		if !bytes.Equal(outA.ReceiptBytes, outB.ReceiptBytes) || !a.Equal(b) {
			t.Fatalf("two applies of the same command to equal states differ")
		}
		before := a.Clone()
		again, err := applier().ApplyBatch(a, req.GetPrincipal(), req.GetBatch(), now+sec)
		switch {
		case orrery.CodeOf(err) == orrery.CodeUnauthorized:
			// A replay is authorized again, and a caller without its grants gets no receipt.
		case err != nil:
			t.Fatalf("replay failed: %v", err)
		case !again.Replayed || !bytes.Equal(again.ReceiptBytes, outA.ReceiptBytes):
			t.Fatalf("replay answered replayed=%v and a different receipt", again.Replayed)
		}
		if !a.Equal(before) {
			t.Fatalf("the replay wrote to the partition")
		}
	})
}
