package batch

import (
	"fmt"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/schedule"
)

// applyOne applies a one-mutation batch and returns its result, failing on a rollback.
func applyOne(t *testing.T, v kv.View, id string, m *orreryv1.Mutation, now int64) *orreryv1.MutationResult {
	t.Helper()
	out := mustApply(t, v, &orreryv1.Batch{CommandId: id, Mutations: []*orreryv1.Mutation{m}}, now)
	if out.Receipt.GetError() != nil {
		t.Fatalf("%s rolled back: %v", id, out.Receipt.GetError())
	}
	return out.Receipt.GetResults()[0]
}

func overlapConfigure(overlap orreryv1.OverlapPolicy) *orreryv1.Mutation {
	m := configureMutation(everySpec(t0, input.Minute), 0)
	m.GetConfigureSchedule().Definition.Overlap = overlap
	return m
}

// TestAckReleasesOverlapSlotInSameTransaction: the ack of the occurrence holding a BUFFER_ONE
// slot frees it in the ack's own batch, and the buffered occurrence is due at once.
func TestAckReleasesOverlapSlotInSameTransaction(t *testing.T) {
	v := granted(t)
	applyOne(t, v, "configure", overlapConfigure(orreryv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE), t0)
	applyOne(t, v, "emit-0", emitMutation(1), t0)
	applyOne(t, v, "emit-1", emitMutation(1), t0+input.Minute) // buffered
	rec, _, _ := schedule.Load(v, lane, scheduleID)
	if rec.GetBuffered().GetOrdinal() != 1 || rec.GetNextDueAtUnixMicros() != t0+2*input.Minute {
		t.Fatalf("before the ack: %v", rec)
	}
	recv := applyOne(t, v, "receive", &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Max: 1}}}, t0+70*sec)
	m := recv.GetReceive().GetMessages()[0]
	// A failing mutation in the same batch after the ack does not undo it (per-mutation buffers),
	// and the ack's release is part of the ack itself.
	out := mustApply(t, v, &orreryv1.Batch{CommandId: "ack", Mutations: []*orreryv1.Mutation{
		{Kind: &orreryv1.Mutation_Ack{Ack: &orreryv1.Ack{Lane: lane, Id: m.GetId(), LeaseToken: m.GetLease().GetToken()}}},
		{Kind: &orreryv1.Mutation_Ack{Ack: &orreryv1.Ack{Lane: lane, Id: m.GetId(), LeaseToken: "stale"}}},
	}}, t0+80*sec)
	if r := out.Receipt.GetResults(); r[0].GetError() != nil || r[1].GetError() == nil {
		t.Fatalf("ack receipt %v", out.Receipt)
	}
	rec, _, _ = schedule.Load(v, lane, scheduleID)
	if rec.GetInFlightMessageId() != "" || rec.GetNextDueAtUnixMicros() != t0+input.Minute {
		t.Fatalf("after the ack: %v", rec)
	}
	res := applyOne(t, v, "emit-2", emitMutation(1), t0+80*sec)
	if ids := res.GetSchedule().GetEnqueuedIds(); len(ids) != 1 || ids[0] != schedule.OccurrenceID(scheduleID, 1, 1) {
		t.Fatalf("the buffered occurrence was not enqueued at once: %v", res)
	}
	// A rolled-back ack releases nothing.
	lim := input.DefaultLimits()
	lim.MaxLaneMessages = 1
	a := Applier{Limits: lim}
	recv = applyOne(t, v, "receive-2", &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Max: 1}}}, t0+90*sec)
	m = recv.GetReceive().GetMessages()[0]
	rolled, err := a.ApplyBatch(v, "alice", &orreryv1.Batch{CommandId: "ack-rolled", Mutations: []*orreryv1.Mutation{
		{Kind: &orreryv1.Mutation_Ack{Ack: &orreryv1.Ack{Lane: lane, Id: m.GetId(), LeaseToken: m.GetLease().GetToken()}}},
		enqueueMutation("x1"), enqueueMutation("x2"),
	}}, t0+91*sec)
	if err != nil || rolled.Receipt.GetError() == nil {
		t.Fatalf("quota batch: %v %v", rolled, err)
	}
	after, _, _ := schedule.Load(v, lane, scheduleID)
	if after.GetInFlightMessageId() != schedule.OccurrenceID(scheduleID, 1, 1) {
		t.Fatalf("a rolled-back ack released the slot: %v", after)
	}
}

// TestHousekeepPrunesLedgerPastRetention: ledger records older than
// Limits.LedgerRetentionMicros go, bounded per command, after receipts and tombstones.
func TestHousekeepPrunesLedgerPastRetention(t *testing.T) {
	lim := input.DefaultLimits()
	lim.LedgerRetentionMicros = input.Hour
	a := Applier{Limits: lim}
	v := granted(t)
	apply := func(id string, m *orreryv1.Mutation, now int64) *orreryv1.MutationResult {
		t.Helper()
		out, err := a.ApplyBatch(v, "system:test", &orreryv1.Batch{CommandId: id, Mutations: []*orreryv1.Mutation{m}}, now)
		if err != nil || out.Receipt.GetError() != nil {
			t.Fatalf("%s: %v %v", id, out, err)
		}
		if r := out.Receipt.GetResults()[0]; r.GetError() != nil {
			t.Fatalf("%s: %v", id, orrery.FromProto(r.GetError()))
		}
		return out.Receipt.GetResults()[0]
	}
	apply("configure", configureMutation(everySpec(t0, input.Minute), 0), t0)
	for i := range 10 {
		apply(fmt.Sprint("emit-", i), emitMutation(1), t0+int64(i)*input.Minute)
	}
	ledger := func() int { return countPrefix(t, v, keys.Ledger) }
	if ledger() != 10 || countPrefix(t, v, keys.LedgerAge) != 10 {
		t.Fatalf("%d ledger records", ledger())
	}
	// Within the hour nothing goes.
	if r := apply("h0", housekeepMutation(100), t0+30*input.Minute).GetHousekeep(); r.GetLedgerRecordsRemoved() != 0 {
		t.Fatalf("early: %v", r)
	}
	// An hour after the fifth (t0+4m) write: five go, in bounded steps.
	now := t0 + 4*input.Minute + input.Hour
	total := 0
	for i := 0; ; i++ {
		r := apply(fmt.Sprint("h-", i), housekeepMutation(2), now).GetHousekeep()
		total += int(r.GetLedgerRecordsRemoved())
		if r.GetReceiptsRemoved()+r.GetTombstonesRemoved()+r.GetLedgerRecordsRemoved() > 2 {
			t.Fatalf("housekeep exceeded its bound: %v", r)
		}
		if !r.GetMore() {
			break
		}
		if i > 50 {
			t.Fatal("housekeeping never finished")
		}
	}
	if total != 5 || ledger() != 5 || countPrefix(t, v, keys.LedgerAge) != 5 {
		t.Fatalf("removed %d, left %d", total, ledger())
	}
	entries, _, err := schedule.ReadLedger(v, lane, scheduleID, schedule.LedgerQuery{ToMicros: input.MaxInstantMicros, MaxRecords: 10})
	if err != nil || len(entries) != 5 || entries[4].GetOrdinal() != 5 {
		t.Fatalf("left %v %v", entries, err)
	}
}
