package coordinatortest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func configure(id string, dueAt time.Time) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
		Definition: &orreryv1.ScheduleDefinition{
			Lane: &orreryv1.Lane{Namespace: "acme", Queue: "jobs", Key: "k"}, ScheduleId: id,
			Spec:     &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_At{At: &orreryv1.AtSpec{DueAtUnixMicros: dueAt.UnixMicro()}}},
			Template: &orreryv1.MessageTemplate{PayloadJson: `{}`},
		},
	}}}
}

// TestTwin covers what the coordinator relies on: logged time from the clock, bounded scans
// with continuations, receipts replayed byte for byte, hints after commands, hooks and the
// call log.
func TestTwin(t *testing.T) {
	fake := clock.NewFake(t0)
	twin := New(fake, input.DefaultLimits(), 2)
	if err := twin.Grant(grants.Everything("alice")); err != nil {
		t.Fatal(err)
	}
	var hints []*orreryv1.NextDueNotice
	twin.SetNotify(func(n *orreryv1.NextDueNotice) { hints = append(hints, n) })
	ids := []string{"00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002", "00000000-0000-4000-8000-000000000003"}
	if _, err := twin.Apply(1, "alice", &orreryv1.Batch{CommandId: "c1", Mutations: []*orreryv1.Mutation{
		configure(ids[0], t0), configure(ids[1], t0.Add(time.Second)), configure(ids[2], t0.Add(time.Hour)),
	}}); err != nil {
		t.Fatal(err)
	}
	if len(hints) != 1 || hints[0].GetPartition() != 1 || hints[0].GetNextDueAtUnixMicros() != t0.UnixMicro() {
		t.Fatalf("hints %v", hints)
	}
	fake.Advance(time.Minute)
	ctx := context.Background()
	first, err := twin.ScanDue(ctx, 1, &orreryv1.ScanDueRequest{MaxRefs: 1})
	if err != nil || len(first.GetRefs()) != 1 || !first.GetMore() || first.GetLoggedTimeUnixMicros() != t0.Add(time.Minute).UnixMicro() {
		t.Fatalf("first page %v %v", first, err)
	}
	second, err := twin.ScanDue(ctx, 1, &orreryv1.ScanDueRequest{MaxRefs: 1, After: first.GetContinuation()})
	if err != nil || len(second.GetRefs()) != 1 || second.GetMore() || second.GetRefs()[0].GetId() != ids[1] || second.GetNextDueAtUnixMicros() != t0.Add(time.Hour).UnixMicro() {
		t.Fatalf("second page %v %v", second, err)
	}

	ref := first.GetRefs()[0]
	req := &orreryv1.CommandRequest{Principal: "system:coordinator", Batch: &orreryv1.Batch{CommandId: "emit-1", Mutations: []*orreryv1.Mutation{
		{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{Lane: ref.GetLane(), ScheduleId: ref.GetId(), ExpectedGeneration: ref.GetToken(), Max: 32}}},
	}}}
	lost := true
	twin.SetHooks(Hooks{AfterCommand: func(int, *orreryv1.CommandRequest, *orreryv1.CommandReply) error {
		if lost {
			lost = false
			return orrery.Errorf(orrery.CodeUnavailable, "lost")
		}
		return nil
	}})
	if _, err := twin.Command(ctx, 1, req); !errors.Is(err, orrery.ErrUnavailable) {
		t.Fatalf("lost reply: %v", err)
	}
	fake.Advance(time.Second)
	replayed, err := twin.Command(ctx, 1, req)
	if err != nil || replayed.GetError() != nil {
		t.Fatalf("replay: %v %v", replayed, err)
	}
	original, err := batchReceipt(replayed)
	if err != nil || original.GetLoggedTimeUnixMicros() != t0.Add(time.Minute).UnixMicro() || len(original.GetResults()[0].GetSchedule().GetEnqueuedIds()) != 1 {
		t.Fatalf("receipt %v %v", original, err)
	}
	again, _ := twin.Command(ctx, 1, req)
	if !bytes.Equal(again.GetReceipt(), replayed.GetReceipt()) {
		t.Fatal("replays differ")
	}
	req.Batch.Mutations[0].GetEmitOccurrences().Max = 1
	if reply, err := twin.Command(ctx, 1, req); err != nil || orrery.CodeOf(orrery.FromProto(reply.GetError())) != orrery.CodeIdempotencyConflict {
		t.Fatalf("reused id with another request: %v %v", reply, err)
	}

	calls := twin.Calls()
	if len(calls) != 6 || calls[0].Kind != "scan" || calls[2].Kind != "command" || calls[2].CommandID != "emit-1" {
		t.Fatalf("calls %+v", calls)
	}
	if _, err := twin.ScanDue(ctx, 2, &orreryv1.ScanDueRequest{MaxRefs: 1}); !errors.Is(err, orrery.ErrUnavailable) {
		t.Fatalf("scan of a missing partition: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := twin.ScanDue(cancelled, 0, &orreryv1.ScanDueRequest{MaxRefs: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("scan with a cancelled context: %v", err)
	}
	if reply, err := twin.ScanDue(ctx, 0, &orreryv1.ScanDueRequest{}); err != nil || orrery.CodeOf(orrery.FromProto(reply.GetError())) != orrery.CodeValidation {
		t.Fatalf("scan without a budget: %v %v", reply, err)
	}
}
