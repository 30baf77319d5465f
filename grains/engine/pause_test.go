package engine

import (
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
)

// TestALongPollOnAPausedQueueWaitsForTheResume: a long poll on a paused queue that holds a
// visible message is parked (nothing proposed, the wait timer at its deadline, not spinning at
// the message's instant), an enqueue meanwhile does not wake it, and the Applied event of the
// resume proposes it: it leases the message.
func TestALongPollOnAPausedQueueWaitsForTheResume(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Applier.ApplyVersion = batch.ApplyVersionQueuePause })
	h.applier.ApplyVersion = batch.ApplyVersionQueuePause
	pause := &orreryv1.Mutation{Kind: &orreryv1.Mutation_PauseQueue{PauseQueue: &orreryv1.PauseQueue{Namespace: "acme", Queue: "jobs"}}}
	h.command("a", request("c1", enqueue("m1", 0), pause))
	h.commit()
	h.command("w", longPoll("r1", 10*time.Second))
	if len(h.log) != 0 || len(h.answers("w")) != 0 || !h.timers[WaitTimer].Equal(h.now.Add(10*time.Second)) {
		t.Fatalf("parked on a paused queue: %d entries, answers %v, wait timer %v", len(h.log), h.answers("w"), h.timers[WaitTimer])
	}
	h.command("a", request("c2", enqueue("m2", 0)))
	h.commit()
	if len(h.log) != 0 || len(h.answers("w")) != 0 {
		t.Fatalf("an enqueue into the paused queue woke the long poll: log %v, answers %v", h.log, h.answers("w"))
	}
	resume := &orreryv1.Mutation{Kind: &orreryv1.Mutation_ResumeQueue{ResumeQueue: &orreryv1.ResumeQueue{Namespace: "acme", Queue: "jobs"}}}
	h.command("a", request("c3", resume))
	h.commit()
	if len(h.log) != 1 || h.log[0].cmd.GetBatch().GetCommandId() != "r1" {
		t.Fatalf("after the resume applied: log %v; want the long poll proposed", h.log)
	}
	h.commit()
	if w := h.answers("w"); len(w) != 1 || len(receiptOf(t, w[0]).GetResults()[0].GetReceive().GetMessages()) != 2 {
		t.Fatalf("the long poll after the resume: %v", w)
	}
}
