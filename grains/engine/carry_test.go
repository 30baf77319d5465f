package engine

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
)

// newCarryingHarness is a harness whose partition applies under version (its engine and its
// applies alike).
func newCarryingHarness(t *testing.T, version uint32) *harness {
	h := newHarness(t, func(c *Config) { c.Applier.ApplyVersion = version })
	h.applier.ApplyVersion = version
	return h
}

// receiptIn reports whether the partition holds a receipt of alice's command id.
func receiptIn(t *testing.T, h *harness, id string) bool {
	t.Helper()
	_, found, err := h.state.mem.Get(keys.InboxKey("alice", id))
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestAParkedLongPollLeasesInTheEntryThatMakesItsMessageVisible: from apply version 23, an
// enqueue proposed while a long poll of its queue is parked carries it, and that one entry
// leases the message for it: the long poll is answered with its receipt when the enqueue
// applies, and nothing else is proposed. Before (version 22), the enqueue's Applied event
// proposed the long poll in an entry of its own.
func TestAParkedLongPollLeasesInTheEntryThatMakesItsMessageVisible(t *testing.T) {
	h := newCarryingHarness(t, batch.ApplyVersionWaitingInEntry)
	h.command("w", longPoll("r1", 10*time.Second))
	h.command("a", request("c1", enqueue("m1", 0)))
	if len(h.log) != 1 || len(h.log[0].cmd.GetWaiting()) != 1 || h.log[0].cmd.GetWaiting()[0].GetBatch().GetCommandId() != "r1" {
		t.Fatalf("log %v; want the enqueue carrying the long poll r1", h.log)
	}
	if h.e.Queued() != 2 {
		t.Fatalf("queued %d, want 2: the enqueue and the long poll it carries", h.e.Queued())
	}
	h.stages = nil
	h.now = h.now.Add(2 * time.Millisecond)
	h.commit()
	if len(h.log) != 0 {
		t.Fatalf("%d entries proposed after the enqueue applied, want none", len(h.log))
	}
	w := h.answers("w")
	if len(w) != 1 {
		t.Fatalf("long poll answers %v, want its receipt", w)
	}
	if msgs := receiptOf(t, w[0]).GetResults()[0].GetReceive().GetMessages(); len(msgs) != 1 || msgs[0].GetId() != "m1" {
		t.Fatalf("the long poll leased %v, want m1", msgs)
	}
	if len(h.answers("a")) != 1 || h.e.Queued() != 0 || !h.timers[WaitTimer].IsZero() {
		t.Fatalf("enqueue answers %v, queued %d, wait timer %v", h.answers("a"), h.e.Queued(), h.timers[WaitTimer])
	}
	want := []StageTiming{{StageCommand, 2 * time.Millisecond}, {StageApply, 2 * time.Millisecond}, {StageLease, 2 * time.Millisecond}, {StageApply, 2 * time.Millisecond}}
	if len(h.stages) != len(want) {
		t.Fatalf("stages %v, want %v", h.stages, want)
	}
	for i := range want {
		if h.stages[i] != want[i] {
			t.Fatalf("stages %v, want %v", h.stages, want)
		}
	}

	old := newCarryingHarness(t, batch.ApplyVersionWaitingInEntry-1)
	old.command("w", longPoll("r1", 10*time.Second))
	old.command("a", request("c1", enqueue("m1", 0)))
	if len(old.log) != 1 || len(old.log[0].cmd.GetWaiting()) != 0 {
		t.Fatalf("at version %d: log %v; want the enqueue alone", batch.ApplyVersionWaitingInEntry-1, old.log)
	}
	old.commit()
	if len(old.log) != 1 || old.log[0].cmd.GetBatch().GetCommandId() != "r1" {
		t.Fatalf("at version %d: log %v; want the long poll proposed on its own", batch.ApplyVersionWaitingInEntry-1, old.log)
	}
}

// TestACarriedLongPollThatLeasesNothingWritesNothingAndStaysParked: an entry carries only the
// long polls of the queues it may feed, and one whose queue has nothing visible when the entry
// applies writes no receipt and stays parked, so the message that becomes visible later still
// leases for it (and its retry would still park).
func TestACarriedLongPollThatLeasesNothingWritesNothingAndStaysParked(t *testing.T) {
	h := newCarryingHarness(t, batch.ApplyVersionWaitingInEntry)
	h.command("w", longPoll("r1", 10*time.Second))
	other := enqueue("o1", 0)
	other.GetEnqueue().Lane = &orreryv1.Lane{Namespace: lane.GetNamespace(), Queue: "other", Key: lane.GetKey()}
	h.command("a", request("c1", other))
	if len(h.log) != 1 || len(h.log[0].cmd.GetWaiting()) != 0 {
		t.Fatalf("an enqueue into another queue: log %v; want it carrying nothing", h.log)
	}
	h.commit()
	h.command("a", request("c2", enqueue("m1", 2*time.Second)))
	if len(h.log) != 1 || len(h.log[0].cmd.GetWaiting()) != 1 {
		t.Fatalf("a delayed enqueue into the long poll's queue: log %v; want it carrying the long poll", h.log)
	}
	h.commit()
	if len(h.answers("w")) != 0 || len(h.log) != 0 || receiptIn(t, h, "r1") || h.e.Queued() != 1 {
		t.Fatalf("after the delayed enqueue applied: answers %v, %d entries, receipt %v, queued %d; want the long poll parked, nothing written",
			h.answers("w"), len(h.log), receiptIn(t, h, "r1"), h.e.Queued())
	}
	if at := h.timers[WaitTimer].Sub(t0); at < 2*time.Second || at > 2*time.Second+time.Millisecond {
		t.Fatalf("wait timer at %v, want when m1 becomes visible (2 s after its logged time)", at)
	}
	h.fire(WaitTimer)
	h.commit()
	if w := h.answers("w"); len(w) != 1 || receiptOf(t, w[0]).GetResults()[0].GetReceive().GetMessages()[0].GetId() != "m1" {
		t.Fatalf("when m1 became visible: %v, want m1 leased", w)
	}
}

// TestADueCommandCarriesTheParkedLongPolls: a due command may feed any queue (its schedules
// name them), so it carries the parked long polls, at most MaxWaitingPerEntry, and the
// occurrence it enqueues is leased in its own entry.
func TestADueCommandCarriesTheParkedLongPolls(t *testing.T) {
	h := newCarryingHarness(t, batch.ApplyVersionWaitingInEntry)
	h.command("a", request("c1", configure(scheduleID(1), t0.Add(-time.Second))))
	h.commit()
	for i := range MaxWaitingPerEntry + 1 {
		h.command("w", longPoll("r"+string(rune('0'+i)), 10*time.Second))
	}
	emit := &orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: scheduleID(1), ExpectedGeneration: 1, Max: 32}}}
	h.command("coordinator", &orreryv1.CommandRequest{Principal: input.CoordinatorPrincipal, Due: true, Batch: batchOf("d1", emit)})
	if len(h.log) != 1 || len(h.log[0].cmd.GetWaiting()) != MaxWaitingPerEntry {
		t.Fatalf("log %v; want the due command carrying %d long polls", h.log, MaxWaitingPerEntry)
	}
	h.commit()
	w := h.answers("w")
	if len(w) != 1 || len(receiptOf(t, w[0]).GetResults()[0].GetReceive().GetMessages()) != 1 {
		t.Fatalf("long poll answers %v; want the first one answered with the occurrence", w)
	}
	if len(h.log) != 0 || h.e.Queued() != MaxWaitingPerEntry {
		t.Fatalf("%d entries, queued %d; want nothing proposed and the other %d long polls parked", len(h.log), h.e.Queued(), MaxWaitingPerEntry)
	}
	for i := 1; i < MaxWaitingPerEntry; i++ {
		if receiptIn(t, h, "r"+string(rune('0'+i))) {
			t.Fatalf("long poll r%d, which leased nothing, has a receipt", i)
		}
	}
}

// TestACarriedLongPollWhoseEntryIsLostOrRefusedIsAnsweredOrParked: a carried long poll is
// answered Unavailable with its entry when the entry loses its term (it may still apply:
// the retry gets the receipt), parked again when the proposal is refused (its entry is not in
// the log), and carried no more when its entry failed as a whole without applying it.
func TestACarriedLongPollWhoseEntryIsLostOrRefusedIsAnsweredOrParked(t *testing.T) {
	h := newCarryingHarness(t, batch.ApplyVersionWaitingInEntry)
	h.command("w", longPoll("r1", 10*time.Second))
	h.command("a", request("c1", enqueue("m1", 0)))
	h.step(Lost{Proposals: []Proposal{{Index: h.log[0].index, Term: h.log[0].term}}})
	for _, who := range []string{"a", "w"} {
		if a := h.answers(who); len(a) != 1 || orrery.CodeOf(orrery.FromProto(a[0].GetError())) != orrery.CodeUnavailable {
			t.Fatalf("%s after its entry lost its term: %v, want Unavailable", who, a)
		}
	}
	if h.e.Queued() != 0 {
		t.Fatalf("queued %d after the loss, want 0", h.e.Queued())
	}
	h.log = nil

	h.command("w2", longPoll("r2", 10*time.Second))
	h.refuse = orrery.Errorf(orrery.CodeUnavailable, "disk full")
	h.command("b", request("c2", enqueue("m2", 0)))
	h.refuse = nil
	if len(h.answers("w2")) != 0 || h.e.Queued() != 1 {
		t.Fatalf("after a refused proposal carrying it: answers %v, queued %d; want the long poll parked again", h.answers("w2"), h.e.Queued())
	}

	h.command("c", request("c3", enqueue("m3", 0)))
	if len(h.log) != 1 || len(h.log[0].cmd.GetWaiting()) != 1 {
		t.Fatalf("log %v; want the enqueue carrying r2", h.log)
	}
	// The state machine failed the entry as a whole (too big for one transaction): a Result
	// without Waiting.
	h.step(Applied{Results: []Result{{Index: h.log[0].index, Term: h.log[0].term, Reply: ErrorReply(orrery.Invalid("batch", "too big"))}}})
	h.log = nil
	if len(h.answers("w2")) != 0 || h.e.Queued() != 1 {
		t.Fatalf("r2 answered %v by an entry that did not apply it, queued %d", h.answers("w2"), h.e.Queued())
	}
	h.command("d", request("c4", enqueue("m4", 0)))
	if len(h.log) != 1 || len(h.log[0].cmd.GetWaiting()) != 0 {
		t.Fatalf("log %v; want the enqueue carrying nothing: r2 is proposed on its own from now on", h.log)
	}
	h.commit()
	if len(h.log) != 1 || h.log[0].cmd.GetBatch().GetCommandId() != "r2" {
		t.Fatalf("log %v; want r2 proposed on its own", h.log)
	}
	h.commit()
	h.command("w2", longPoll("r2", 10*time.Second)) // a retry: replays
	h.commit()
	if len(h.answers("w2")) != 2 || !bytes.Equal(h.answers("w2")[0].GetReceipt(), h.answers("w2")[1].GetReceipt()) {
		t.Fatalf("r2 answers %v, want its receipt twice", h.answers("w2"))
	}
}

// TestAnAbandonOfACarriedLongPollAnswersItsReceipt: an abandon that finds its long poll
// carried is proposed after it and answered with its receipt, as for a proposed one.
func TestAnAbandonOfACarriedLongPollAnswersItsReceipt(t *testing.T) {
	h := newCarryingHarness(t, batch.ApplyVersionWaitingInEntry)
	h.command("w", longPoll("r1", 10*time.Second))
	h.command("a", request("c1", enqueue("m1", 0)))
	h.command("x", abandon("r1"))
	if len(h.log) != 2 {
		t.Fatalf("%d entries, want the enqueue carrying r1 and the abandon", len(h.log))
	}
	h.commit()
	w, x := h.answers("w"), h.answers("x")
	if len(w) != 1 || len(x) != 1 || !bytes.Equal(w[0].GetReceipt(), x[0].GetReceipt()) || len(receiptOf(t, w[0]).GetResults()[0].GetReceive().GetMessages()) != 1 {
		t.Fatalf("long poll %v, abandon %v; want both answered with the receipt leasing m1", w, x)
	}

	// Abandoned while carried by an entry that leases nothing: answered with nothing when the
	// entry applies, not parked again.
	h.command("v", longPoll("r2", 10*time.Second))
	h.command("b", request("c2", enqueue("m2", 5*time.Second)))
	h.command("y", abandon("r2"))
	h.commit()
	if v := h.answers("v"); len(v) != 1 || len(v[0].GetReceipt()) != 0 || v[0].GetError() != nil || h.e.Queued() != 0 {
		t.Fatalf("abandoned while carried: %v, queued %d; want answered with nothing", v, h.e.Queued())
	}
}

// TestApplyEntryAppliesTheWaitingReceivesItCarries: after the batch, a waiting receive whose
// queue has a visible message leases and stores its receipt, one whose command id has a
// receipt replays it, and one with nothing visible writes nothing; below apply version 23
// they are ignored, as a replica of an older release ignores the field.
func TestApplyEntryAppliesTheWaitingReceivesItCarries(t *testing.T) {
	encode := func(cmd *orreryv1.PartitionCommand) []byte {
		b, err := proto.Marshal(cmd)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	waiting := func(id, queue string) *orreryv1.WaitingReceive {
		recv := receive()
		recv.GetReceive().Queue = queue
		return &orreryv1.WaitingReceive{Principal: "alice", Batch: batchOf(id, recv)}
	}
	for _, version := range []uint32{batch.ApplyVersionWaitingInEntry - 1, batch.ApplyVersionWaitingInEntry} {
		h := newCarryingHarness(t, version)
		mem := h.state.mem
		cmd := encode(&orreryv1.PartitionCommand{Batch: batchOf("c1", enqueue("m1", 0)),
			Waiting: []*orreryv1.WaitingReceive{waiting("r1", "jobs"), waiting("r2", "jobs"), waiting("r3", "empty")}})
		out, err := ApplyEntry(h.applier, mem, "alice", cmd, t0.UnixMicro())
		if err != nil || out.Reply.GetError() != nil {
			t.Fatalf("version %d: %+v, %v", version, out, err)
		}
		if version < batch.ApplyVersionWaitingInEntry {
			if out.Waiting != nil || receiptIn(t, h, "r1") {
				t.Fatalf("version %d: waiting answers %v, r1 receipt %v; want them ignored", version, out.Waiting, receiptIn(t, h, "r1"))
			}
			continue
		}
		if len(out.Waiting) != 3 || out.Waiting[0] == nil || out.Waiting[2] != nil {
			t.Fatalf("waiting answers %v; want r1 answered, r3 not", out.Waiting)
		}
		if msgs := receiptOf(t, out.Waiting[0]).GetResults()[0].GetReceive().GetMessages(); len(msgs) != 1 || msgs[0].GetId() != "m1" {
			t.Fatalf("r1 leased %v, want m1", msgs)
		}
		// m1 is leased: nothing is visible for r2 either.
		if out.Waiting[1] != nil || receiptIn(t, h, "r2") || receiptIn(t, h, "r3") || !receiptIn(t, h, "r1") {
			t.Fatalf("r2 answered %v; receipts r1 %v r2 %v r3 %v; want r1's only", out.Waiting[1], receiptIn(t, h, "r1"), receiptIn(t, h, "r2"), receiptIn(t, h, "r3"))
		}
		before := mem.Len()
		again, err := ApplyEntry(h.applier, mem, "alice", encode(&orreryv1.PartitionCommand{Batch: batchOf("c2", receive()),
			Waiting: []*orreryv1.WaitingReceive{waiting("r1", "jobs")}}), t0.UnixMicro()+1)
		if err != nil || len(again.Waiting) != 1 || !bytes.Equal(again.Waiting[0].GetReceipt(), out.Waiting[0].GetReceipt()) {
			t.Fatalf("r1 carried again: %+v, %v; want its receipt replayed", again.Waiting, err)
		}
		if mem.Len() != before+2 { // c2's inbox entry and its expiry index only
			t.Fatalf("%d keys after, %d before", mem.Len(), before)
		}
	}
}
