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
)

func housekeepMutation(max uint32) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_Housekeep{Housekeep: &orreryv1.Housekeep{MaxRecords: max}}}
}

func countPrefix(t *testing.T, v kv.Reader, prefix []byte) int {
	t.Helper()
	n := 0
	if err := kv.ScanPrefix(v, prefix, func(_, _ []byte) (bool, error) { n++; return true, nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func housekeep(t *testing.T, a Applier, v kv.View, id string, max uint32, now int64) *orreryv1.HousekeepResult {
	t.Helper()
	out, err := a.ApplyBatch(v, "system:housekeeping", &orreryv1.Batch{CommandId: id, Mutations: []*orreryv1.Mutation{housekeepMutation(max)}}, now)
	if err != nil {
		t.Fatal(err)
	}
	r := out.Receipt.GetResults()[0]
	if r.GetError() != nil {
		t.Fatal(orrery.FromProto(r.GetError()))
	}
	return r.GetHousekeep()
}

func TestReceiptsExpireAfterTheirRetention(t *testing.T) {
	a := applier()
	v := granted(t)
	user := &orreryv1.Batch{CommandId: "u1", Mutations: []*orreryv1.Mutation{enqueueMutation("m1")}}
	first := mustApply(t, v, user, t0)
	system, err := a.ApplyBatch(v, "system:coordinator", &orreryv1.Batch{CommandId: "s1", Mutations: []*orreryv1.Mutation{enqueueMutation("m2")}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	_ = system
	// After the system retention (10 min) only the system receipt (and the housekeeping's own,
	// which is young) go; the user's stays for a day.
	r := housekeep(t, a, v, "h1", 100, t0+11*input.Minute)
	if r.GetReceiptsRemoved() != 1 || r.GetMore() {
		t.Fatalf("after 11 min: %v", r)
	}
	if replay := mustApply(t, v, user, t0+12*input.Minute); !replay.Replayed || string(replay.ReceiptBytes) != string(first.ReceiptBytes) {
		t.Fatal("the user's receipt must still replay within its day")
	}
	if again, _ := a.ApplyBatch(v, "system:coordinator", &orreryv1.Batch{CommandId: "s1", Mutations: []*orreryv1.Mutation{enqueueMutation("m2")}}, t0+12*input.Minute); again.Replayed {
		t.Fatal("the system receipt should be gone")
	}
	r = housekeep(t, a, v, "h2", 100, t0+25*input.Hour)
	if r.GetReceiptsRemoved() < 1 {
		t.Fatalf("after a day: %v", r)
	}
	if fresh := mustApply(t, v, user, t0+25*input.Hour); fresh.Replayed {
		t.Fatal("past its retention the command id is new again")
	}
}

func TestReceiptCapRemovesSoonestToExpire(t *testing.T) {
	lim := input.DefaultLimits()
	lim.MaxReceipts = 5
	a := Applier{Limits: lim}
	v := granted(t)
	for i := range 10 {
		if _, err := a.ApplyBatch(v, "alice", &orreryv1.Batch{CommandId: fmt.Sprint("c", i), Mutations: []*orreryv1.Mutation{enqueueMutation(fmt.Sprint("m", i))}}, t0+int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	r := housekeep(t, a, v, "h", 100, t0+100) // 11 receipts with the housekeeping's own
	if r.GetReceiptsRemoved() != 5 {
		t.Fatalf("removed %d, want 5 beyond the cap of 5 (10 stored before)", r.GetReceiptsRemoved())
	}
	if n := countPrefix(t, v, keys.Inbox); n != 6 {
		t.Fatalf("%d receipts left, want 6 (5 + the housekeeping command's own)", n)
	}
	// The oldest went first.
	if out, _ := a.ApplyBatch(v, "alice", &orreryv1.Batch{CommandId: "c0", Mutations: []*orreryv1.Mutation{enqueueMutation("m0")}}, t0+200); out.Replayed {
		t.Fatal("the oldest receipt survived the cap")
	}
	if out, _ := a.ApplyBatch(v, "alice", &orreryv1.Batch{CommandId: "c9", Mutations: []*orreryv1.Mutation{enqueueMutation("m9")}}, t0+200); !out.Replayed {
		t.Fatal("the newest receipt was removed")
	}
}

func TestTombstonesExpireAndHousekeepIsBounded(t *testing.T) {
	a := applier()
	v := granted(t)
	for i := range 5 {
		mustApply(t, v, &orreryv1.Batch{CommandId: fmt.Sprint("e", i), Mutations: []*orreryv1.Mutation{enqueueMutation(fmt.Sprint("m", i))}}, t0)
	}
	recv := mustApply(t, v, &orreryv1.Batch{CommandId: "r", Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Max: 10}}}}}, t0+1)
	var acks []*orreryv1.Mutation
	for _, m := range recv.Receipt.GetResults()[0].GetReceive().GetMessages() {
		acks = append(acks, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Ack{Ack: &orreryv1.Ack{Lane: m.GetLane(), Id: m.GetId(), LeaseToken: m.GetLease().GetToken()}}})
	}
	mustApply(t, v, &orreryv1.Batch{CommandId: "a", Mutations: acks}, t0+2)
	if n := countPrefix(t, v, keys.MessageTombstone); n != 5 {
		t.Fatalf("%d tombstones", n)
	}
	// Within the day the ids stay taken.
	if r := housekeep(t, a, v, "h1", 100, t0+input.Hour); r.GetTombstonesRemoved() != 0 {
		t.Fatalf("tombstones removed early: %v", r)
	}
	// Past it, in bounded steps: receipts first, then tombstones.
	now := t0 + 2*input.Day
	total := 0
	for i := 0; ; i++ {
		r := housekeep(t, a, v, fmt.Sprint("h-late-", i), 3, now)
		total += int(r.GetTombstonesRemoved())
		if !r.GetMore() {
			break
		}
		if i > 20 {
			t.Fatal("housekeeping never finished")
		}
	}
	if total != 5 || countPrefix(t, v, keys.MessageTombstone) != 0 || countPrefix(t, v, keys.TombstoneAge) != 0 {
		t.Fatalf("removed %d tombstones, left %d", total, countPrefix(t, v, keys.MessageTombstone))
	}
	// The id is usable again.
	out := mustApply(t, v, &orreryv1.Batch{CommandId: "again", Mutations: []*orreryv1.Mutation{enqueueMutation("m0")}}, now+1)
	if !out.Receipt.GetResults()[0].GetEnqueue().GetCreated() {
		t.Fatal("a pruned id could not be enqueued again")
	}
	_, err := a.ApplyBatch(v, systemTest, &orreryv1.Batch{CommandId: "big", Mutations: []*orreryv1.Mutation{housekeepMutation(MaxHousekeepRecords + 1)}}, now+2)
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := a.ApplyBatch(v, systemTest, &orreryv1.Batch{CommandId: "big", Mutations: []*orreryv1.Mutation{housekeepMutation(MaxHousekeepRecords + 1)}}, now+2); !errors.Is(orrery.FromProto(out.Receipt.GetResults()[0].GetError()), orrery.ErrValidation) {
		t.Fatalf("oversized housekeep: %v", out.Receipt)
	}
}

func TestHousekeepingDueOnlyWhenSomethingExpired(t *testing.T) {
	a := applier()
	v := granted(t)
	if due, err := a.HousekeepingDue(v, t0); err != nil || due {
		t.Fatalf("empty partition: due=%v err=%v", due, err)
	}
	mustApply(t, v, &orreryv1.Batch{CommandId: "c", Mutations: []*orreryv1.Mutation{enqueueMutation("m")}}, t0)
	if due, _ := a.HousekeepingDue(v, t0+input.Hour); due {
		t.Fatal("a fresh receipt made housekeeping due")
	}
	if due, _ := a.HousekeepingDue(v, t0+25*input.Hour); !due {
		t.Fatal("an expired receipt did not make housekeeping due")
	}
	housekeep(t, a, v, "h", 100, t0+25*input.Hour)
	if due, _ := a.HousekeepingDue(v, t0+25*input.Hour+1); due {
		t.Fatal("housekeeping still due after it ran (its own receipt is fresh)")
	}
}
