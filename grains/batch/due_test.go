package batch

import (
	"errors"
	"fmt"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
)

// TestDueCommandStoresNoReceiptAndFailsMutationsAlone: a due command writes no
// inbox entry, receipt-expiry index or receipt count, and a full lane fails only the emit
// into it, where an ordinary batch would roll back every mutation.
func TestDueCommandStoresNoReceiptAndFailsMutationsAlone(t *testing.T) {
	lim := input.DefaultLimits()
	lim.MaxLaneMessages = 1
	a := Applier{Limits: lim}
	v := granted(t)
	full := &orreryv1.Lane{Namespace: "acme", Queue: "reports", Key: "full"}
	configure := func(l *orreryv1.Lane, id string) *orreryv1.Mutation {
		m := configureMutation(everySpec(t0, hour), 0)
		m.GetConfigureSchedule().GetDefinition().Lane, m.GetConfigureSchedule().GetDefinition().ScheduleId = l, id
		return m
	}
	const other = "1b4e28ba-2ca1-4e6f-9b1e-4f8c2d9e8f10"
	mustApply(t, v, &orreryv1.Batch{CommandId: "setup", Mutations: []*orreryv1.Mutation{
		configure(lane, scheduleID), configure(full, other),
		{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: full, Id: "filler", PayloadJson: `"x"`}}},
	}}, t0-sec)
	inboxBefore, expiryBefore := countPrefix(t, v, keys.Inbox), countPrefix(t, v, keys.InboxExpiry)
	countBefore, _, _ := v.Get(keys.ReceiptCount)

	emitFull := emitMutation(1)
	emitFull.GetEmitOccurrences().Lane, emitFull.GetEmitOccurrences().ScheduleId = full, other
	b := &orreryv1.Batch{CommandId: "due-1-1", Mutations: []*orreryv1.Mutation{emitFull, emitMutation(1)}}
	rc, err := a.ApplyDue(v, "system:coordinator", b, t0+sec)
	if err != nil {
		t.Fatal(err)
	}
	if rc.GetError() != nil || len(rc.GetResults()) != 2 {
		t.Fatalf("receipt %v", rc)
	}
	if err := resultErr(rc.GetResults()[0]); !errors.Is(err, orrery.ErrQuotaExceeded) {
		t.Fatalf("emit into the full lane: %v", err)
	}
	if err := resultErr(rc.GetResults()[1]); err != nil || len(rc.GetResults()[1].GetSchedule().GetEnqueuedIds()) != 1 {
		t.Fatalf("emit into the other lane: %v", rc.GetResults()[1])
	}
	if msgs, _, _ := queue.ListLane(v, lane, "", 10, 0); len(msgs) != 1 {
		t.Fatalf("%d messages in the lane with room, want 1", len(msgs))
	}
	if msgs, _, _ := queue.ListLane(v, full, "", 10, 0); len(msgs) != 1 {
		t.Fatalf("%d messages in the full lane, want the filler only", len(msgs))
	}
	countAfter, _, _ := v.Get(keys.ReceiptCount)
	if countPrefix(t, v, keys.Inbox) != inboxBefore || countPrefix(t, v, keys.InboxExpiry) != expiryBefore || string(countAfter) != string(countBefore) {
		t.Fatal("a due command stored a receipt")
	}

	// The same batch as an ordinary command rolls back as a whole.
	out, err := a.ApplyBatch(v, systemTest, &orreryv1.Batch{CommandId: "c2", Mutations: []*orreryv1.Mutation{emitFull, emitMutation(1)}}, t0+2*sec)
	if err != nil || !errors.Is(orrery.FromProto(out.Receipt.GetError()), orrery.ErrQuotaExceeded) {
		t.Fatalf("ordinary batch with a full lane: %v", out.Receipt)
	}
}

// TestDueCommandHoldsOnlyDueMutations: a due command refuses other mutation kinds and
// all_or_nothing, and writes nothing then.
func TestDueCommandHoldsOnlyDueMutations(t *testing.T) {
	v := granted(t)
	for name, b := range map[string]*orreryv1.Batch{
		"mutations[1]":   {CommandId: "due-1", Mutations: []*orreryv1.Mutation{emitMutation(1), enqueueMutation("m1")}},
		"all_or_nothing": {CommandId: "due-2", Mutations: []*orreryv1.Mutation{emitMutation(1)}, AllOrNothing: true},
		"command_id":     {Mutations: []*orreryv1.Mutation{emitMutation(1)}},
	} {
		_, err := applier().ApplyDue(v, "system:coordinator", b, t0)
		var e *orrery.Error
		if !errors.As(err, &e) || e.Code != orrery.CodeValidation || e.Field != name {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if written(v) != 0 {
		t.Fatalf("refused due commandes wrote %d keys", written(v))
	}
}

// TestDueCommandEnqueuesAtMostItsOccurrenceBudget: the emits of one due command share
// DueBatchOccurrences, oldest mutation first, and leave the rest due; an ordinary batch of the
// same emits enqueues every one's max.
func TestDueCommandEnqueuesAtMostItsOccurrenceBudget(t *testing.T) {
	const schedules, backlog = 20, 40
	ids := make([]string, schedules)
	var configure, emits []*orreryv1.Mutation
	for i := range ids {
		ids[i] = fmt.Sprintf("00000000-0000-4000-8000-%012x", i)
		m := configureMutation(everySpec(t0-backlog*sec, sec), 0)
		m.GetConfigureSchedule().GetDefinition().ScheduleId = ids[i]
		configure = append(configure, m)
		e := emitMutation(1)
		e.GetEmitOccurrences().ScheduleId = ids[i]
		emits = append(emits, e)
	}
	enqueued := func(rc *orreryv1.Receipt) (total int, each []int) {
		for _, r := range rc.GetResults() {
			if err := resultErr(r); err != nil {
				t.Fatal(err)
			}
			n := len(r.GetSchedule().GetEnqueuedIds())
			total, each = total+n, append(each, n)
		}
		return total, each
	}
	due, ordinary := granted(t), granted(t)
	for _, v := range []kv.View{due, ordinary} {
		mustApply(t, v, &orreryv1.Batch{CommandId: "setup", Mutations: configure}, t0-backlog*sec)
	}
	rc, err := applier().ApplyDue(due, "system:coordinator", &orreryv1.Batch{CommandId: "due-1-1", Mutations: emits}, t0)
	if err != nil {
		t.Fatal(err)
	}
	total, each := enqueued(rc)
	if total != DueBatchOccurrences || each[0] != 32 || each[schedules-1] != 0 {
		t.Fatalf("due command enqueued %d (%v), want %d, the first schedules' max first", total, each, DueBatchOccurrences)
	}
	if total, _ := enqueued(mustApply(t, ordinary, &orreryv1.Batch{CommandId: "c1", Mutations: emits}, t0).Receipt); total != schedules*32 {
		t.Fatalf("ordinary batch enqueued %d, want %d", total, schedules*32)
	}
}
