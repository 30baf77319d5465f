package engine

import (
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
)

// TestALongPollAtAQueueShareWaitsForALeaseToEnd: a long poll on a queue whose share (1) is
// held is parked, though the queue has visible messages, with the wait timer at the held
// lease's end (not spinning, not at its deadline); an ack of the held lease proposes it; the
// next long poll is parked again and the wait timer firing at the lease end proposes it, and
// it leases.
func TestALongPollAtAQueueShareWaitsForALeaseToEnd(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Applier.ApplyVersion = batch.ApplyVersionQueueShare })
	h.applier.ApplyVersion = batch.ApplyVersionQueueShare
	share := &orreryv1.Mutation{Kind: &orreryv1.Mutation_SetQueueShare{SetQueueShare: &orreryv1.SetQueueShare{
		Namespace: "acme", Queue: "jobs", Policy: &orreryv1.QueueLimits{MaxLeased: 1}, ShareLeased: 1}}}
	h.command("a", request("c1", enqueue("m1", 0), enqueue("m2", 0), enqueue("m3", 0), share))
	h.commit()
	hold := func(id string) *orreryv1.QueueMessage {
		t.Helper()
		recv := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: "acme", Queue: "jobs", Max: 10, LeaseDurationMicros: (5 * time.Second).Microseconds()}}}
		h.command("h", request(id, recv))
		h.commit()
		got := receiptOf(t, h.answers("h")[len(h.answers("h"))-1]).GetResults()[0].GetReceive().GetMessages()
		if len(got) != 1 {
			t.Fatalf("a receive under a share of 1 leased %d", len(got))
		}
		return got[0]
	}
	held := hold("h1")
	h.command("w", longPoll("r1", 20*time.Second))
	leaseEnd := time.UnixMicro(held.GetLease().GetUntilUnixMicros())
	if len(h.log) != 0 || len(h.answers("w")) != 0 || !h.timers[WaitTimer].Equal(leaseEnd) {
		t.Fatalf("parked at the share: %d entries, answers %v, wait timer %v; want the lease end %v", len(h.log), h.answers("w"), h.timers[WaitTimer], leaseEnd)
	}
	ack := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Ack{Ack: &orreryv1.Ack{Lane: held.GetLane(), Id: held.GetId(), LeaseToken: held.GetLease().GetToken()}}}
	h.command("a", request("c2", ack))
	h.commit()
	if len(h.log) != 1 || h.log[0].cmd.GetBatch().GetCommandId() != "r1" {
		t.Fatalf("after the ack applied: log %v; want the long poll proposed", h.log)
	}
	h.commit()
	if w := h.answers("w"); len(w) != 1 || len(receiptOf(t, w[0]).GetResults()[0].GetReceive().GetMessages()) != 1 {
		t.Fatalf("the long poll after the ack: %v", w)
	}
	// Held again by the long poll's lease (30 s): a second long poll waits for its end.
	h.command("w", longPoll("r2", 20*time.Second))
	if len(h.log) != 0 || len(h.answers("w")) != 1 {
		t.Fatalf("a second long poll at the share: log %v, answers %v", h.log, h.answers("w"))
	}
	deadline := h.timers[WaitTimer]
	h.fire(WaitTimer) // its deadline: the lease (30 s) outlasts the wait (20 s)
	if len(h.log) != 0 || len(h.answers("w")) != 2 || len(h.answers("w")[1].GetReceipt()) != 0 {
		t.Fatalf("at its deadline %v the long poll: log %v, answers %v; want answered with nothing", deadline, h.log, h.answers("w"))
	}
	h.command("w", longPoll("r3", 20*time.Second))
	h.fire(WaitTimer) // the lease end, 10 s on
	if len(h.log) != 1 || h.log[0].cmd.GetBatch().GetCommandId() != "r3" {
		t.Fatalf("at the lease end (%v): log %v; want the long poll proposed", h.now, h.log)
	}
	h.commit()
	if w := h.answers("w"); len(w) != 3 || len(receiptOf(t, w[2]).GetResults()[0].GetReceive().GetMessages()) != 1 {
		t.Fatalf("the long poll at the lease end: %v", w)
	}
}
