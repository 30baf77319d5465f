package batch

import (
	"errors"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/schedule"
)

func pauseQueueMutation(reason string) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_PauseQueue{PauseQueue: &orreryv1.PauseQueue{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Reason: reason}}}
}

func resumeQueueMutation() *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_ResumeQueue{ResumeQueue: &orreryv1.ResumeQueue{Namespace: lane.GetNamespace(), Queue: lane.GetQueue()}}}
}

func cancelMessageMutation(id string) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_CancelMessage{CancelMessage: &orreryv1.CancelMessage{Lane: lane, Id: id}}}
}

func receiveMutation() *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Max: 10}}}
}

// applyAt applies one mutation from principal with a and returns its result.
func applyAt(t *testing.T, a Applier, v kv.View, principal, id string, m *orreryv1.Mutation, now int64) *orreryv1.MutationResult {
	t.Helper()
	out, err := a.ApplyBatch(v, principal, &orreryv1.Batch{CommandId: id, Mutations: []*orreryv1.Mutation{m}}, now)
	if err != nil {
		t.Fatalf("apply %s: %v", id, err)
	}
	return out.Receipt.GetResults()[0]
}

// TestQueuePauseAndCancelWaitForTheirApplyVersions: a command carrying PauseQueue or
// ResumeQueue is refused whole (Validation naming the mutation's field number, nothing
// written) before apply version 13, one carrying CancelMessage before version 14, so that no
// replica of an older release leases from a paused queue or acks a cancelled message; from
// their versions on they are taken.
func TestQueuePauseAndCancelWaitForTheirApplyVersions(t *testing.T) {
	for _, c := range []struct {
		mutation *orreryv1.Mutation
		version  uint32
		want     string
	}{
		{pauseQueueMutation(""), ApplyVersionQueuePause, "mutations[0]: carries field 25 of orrery.v1.Mutation"},
		{resumeQueueMutation(), ApplyVersionQueuePause, "mutations[0]: carries field 26 of orrery.v1.Mutation"},
		{cancelMessageMutation("m1"), ApplyVersionCancelMessage, "mutations[0]: carries field 27 of orrery.v1.Mutation"},
	} {
		v := granted(t)
		applyOne(t, v, "enqueue", enqueueMutation("m1"), t0)
		a := applier()
		a.ApplyVersion = c.version - 1
		before := v.Clone()
		_, err := a.ApplyBatch(v, "alice", &orreryv1.Batch{CommandId: "older", Mutations: []*orreryv1.Mutation{c.mutation}}, t0)
		if !errors.Is(err, orrery.ErrValidation) || !strings.Contains(err.Error(), c.want) || !v.Equal(before) {
			t.Fatalf("%s at apply version %d: %v (wrote: %v), want Validation %q and nothing written", kindName(c.mutation), c.version-1, err, !v.Equal(before), c.want)
		}
		a.ApplyVersion = c.version
		if got := resultErr(applyAt(t, a, v, "alice", "current", c.mutation, t0)); got != nil {
			t.Fatalf("%s at apply version %d: %v", kindName(c.mutation), c.version, got)
		}
	}
}

// TestPauseQueueThroughTheBatchPath: a paused queue's receive through the batch path leases
// nothing, an enqueue still lands, and the receive after a resume leases it.
func TestPauseQueueThroughTheBatchPath(t *testing.T) {
	v := granted(t)
	a := applier()
	a.ApplyVersion = ApplyVersionQueuePause
	r := applyAt(t, a, v, "alice", "pause", pauseQueueMutation("maintenance"), t0)
	if p := r.GetQueuePause(); !p.GetChanged() || p.GetPause().GetPausedBy() != "alice" || p.GetPause().GetReason() != "maintenance" {
		t.Fatalf("pause result %v", r)
	}
	if r := applyAt(t, a, v, "alice", "enqueue", enqueueMutation("m1"), t0+1); r.GetError() != nil || !r.GetEnqueue().GetCreated() {
		t.Fatalf("enqueue into a paused queue: %v", r)
	}
	if r := applyAt(t, a, v, "alice", "receive-1", receiveMutation(), t0+2); r.GetError() != nil || len(r.GetReceive().GetMessages()) != 0 {
		t.Fatalf("receive of a paused queue: %v", r)
	}
	applyAt(t, a, v, "alice", "resume", resumeQueueMutation(), t0+3)
	if r := applyAt(t, a, v, "alice", "receive-2", receiveMutation(), t0+4); len(r.GetReceive().GetMessages()) != 1 {
		t.Fatalf("receive after the resume: %v", r)
	}
}

// TestQueueAdminNeedsConsumeAndPublish: pausing, resuming a queue and cancelling one of its
// messages need QueueConsume and QueuePublish on the queue (what a redrive needs): a consumer
// alone, or a publisher alone, is Unauthorized.
func TestQueueAdminNeedsConsumeAndPublish(t *testing.T) {
	v := granted(t)
	applyOne(t, v, "enqueue", enqueueMutation("m1"), t0)
	seedGrant(t, v, "consumer", grants.QueueConsume)
	seedGrant(t, v, "publisher", grants.QueuePublish)
	seedGrant(t, v, "operator", grants.QueueConsume|grants.QueuePublish)
	a := applier()
	a.ApplyVersion = ApplyVersionCancelMessage
	for _, m := range []*orreryv1.Mutation{pauseQueueMutation(""), resumeQueueMutation(), cancelMessageMutation("m1")} {
		for _, principal := range []string{"consumer", "publisher"} {
			if got := resultErr(applyAt(t, a, v, principal, kindName(m), m, t0)); !errors.Is(got, orrery.ErrUnauthorized) {
				t.Fatalf("%s by %s: %v, want Unauthorized", kindName(m), principal, got)
			}
		}
		if got := resultErr(applyAt(t, a, v, "operator", kindName(m), m, t0)); got != nil {
			t.Fatalf("%s by operator: %v", kindName(m), got)
		}
	}
}

// TestCancelledOccurrenceIsLedgeredAndFreesItsSlot: cancelling a leased BUFFER_ONE occurrence
// revokes its lease (its ack fails TokenInvalidated), ledgers its ordinal CANCELLED naming the
// caller, and frees the overlap slot in the same batch, so the buffered occurrence is enqueued
// at the next emit; cancelling that one while visible removes it and ledgers it too.
func TestCancelledOccurrenceIsLedgeredAndFreesItsSlot(t *testing.T) {
	v := granted(t)
	a := applier()
	a.ApplyVersion = ApplyVersionCancelMessage
	applyOne(t, v, "configure", overlapConfigure(orreryv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE), t0)
	applyOne(t, v, "emit-0", emitMutation(1), t0)
	applyOne(t, v, "emit-1", emitMutation(1), t0+input.Minute) // buffered behind ordinal 0
	held := applyAt(t, a, v, "alice", "receive", receiveMutation(), t0+70*sec).GetReceive().GetMessages()[0]
	first := schedule.OccurrenceID(scheduleID, 1, 0)
	if held.GetId() != first {
		t.Fatalf("received %s", held.GetId())
	}
	r := applyAt(t, a, v, "alice", "cancel-0", cancelMessageMutation(first), t0+75*sec)
	if r.GetCancelMessage().GetOutcome() != orreryv1.CancelOutcome_CANCEL_OUTCOME_LEASE_REVOKED {
		t.Fatalf("cancel of the leased occurrence: %v", r)
	}
	rec, _, _ := schedule.Load(v, lane, scheduleID)
	if rec.GetInFlightMessageId() != "" {
		t.Fatalf("the cancelled occurrence still holds the slot: %v", rec)
	}
	ack := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Ack{Ack: &orreryv1.Ack{Lane: lane, Id: first, LeaseToken: held.GetLease().GetToken()}}}
	if got := resultErr(applyAt(t, a, v, "alice", "ack", ack, t0+76*sec)); !errors.Is(got, orrery.ErrTokenInvalidated) || !strings.Contains(got.Error(), "cancelled by alice") {
		t.Fatalf("ack of the cancelled occurrence: %v, want TokenInvalidated naming the cancel", got)
	}
	res := applyOne(t, v, "emit-2", emitMutation(1), t0+80*sec)
	second := schedule.OccurrenceID(scheduleID, 1, 1)
	if ids := res.GetSchedule().GetEnqueuedIds(); len(ids) != 1 || ids[0] != second {
		t.Fatalf("the buffered occurrence was not enqueued once the slot was free: %v", res)
	}
	if r := applyAt(t, a, v, "alice", "cancel-1", cancelMessageMutation(second), t0+81*sec); r.GetCancelMessage().GetOutcome() != orreryv1.CancelOutcome_CANCEL_OUTCOME_REMOVED {
		t.Fatalf("cancel of the visible occurrence: %v", r)
	}
	records, _, err := schedule.ReadLedger(v, lane, scheduleID, schedule.LedgerQuery{FromMicros: t0, ToMicros: t0 + input.Hour, MaxRecords: 10})
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[uint64]*orreryv1.LedgerRecord{}
	for _, rec := range records {
		outcomes[rec.GetOrdinal()] = rec
	}
	for ordinal, id := range []string{first, second} {
		rec := outcomes[uint64(ordinal)]
		if rec.GetOutcome() != orreryv1.LedgerOutcome_LEDGER_OUTCOME_CANCELLED || rec.GetMessageId() != id || !strings.HasPrefix(rec.GetReason(), "cancelled by alice") {
			t.Fatalf("ledger of ordinal %d: %v", ordinal, rec)
		}
	}
	if rec, _, _ := schedule.Load(v, lane, scheduleID); rec.GetInFlightMessageId() != "" {
		t.Fatalf("after the second cancel the slot is held: %v", rec)
	}
}
