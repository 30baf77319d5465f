package engine

import (
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
)

// prioritized is enqueue(id, delay) with a priority.
func prioritized(id string, delay time.Duration, priority int32) *orreryv1.Mutation {
	m := enqueue(id, delay)
	m.GetEnqueue().Priority = priority
	return m
}

// TestALongPollWakesForAMessageInAPriorityBand: a parked long poll is proposed by the Applied
// event of an enqueue of a priority above 0 (whose index entry is in the queue's band), and
// the wait timer follows a delayed one, so a queue whose messages are all in bands wakes its
// waiters like any other.
func TestALongPollWakesForAMessageInAPriorityBand(t *testing.T) {
	at20 := func(c *Config) { c.Applier.ApplyVersion = batch.ApplyVersionPriority }
	h := newHarness(t, at20)
	h.applier.ApplyVersion = batch.ApplyVersionPriority
	h.command("w", longPoll("r1", 10*time.Second))
	h.command("a", request("c1", prioritized("m1", 0, 7)))
	h.commit()
	if len(h.log) != 1 || h.log[0].cmd.GetBatch().GetCommandId() != "r1" {
		t.Fatalf("after the enqueue applied: log %v; want the long poll proposed", h.log)
	}
	h.commit()
	if w := h.answers("w"); len(w) != 1 || len(receiptOf(t, w[0]).GetResults()[0].GetReceive().GetMessages()) != 1 {
		t.Fatalf("the long poll: %v, want m1 leased", w)
	}

	h.command("a", request("c2", prioritized("m2", 2*time.Second, 9)))
	h.commit()
	h.command("v", longPoll("r2", 30*time.Second))
	// The enqueue's logged time is a few µs past h.now (one per entry applied).
	if at := h.timers[WaitTimer]; at.Before(h.now.Add(2*time.Second)) || !at.Before(h.now.Add(2*time.Second+time.Millisecond)) {
		t.Fatalf("wait timer in %v, want when the banded message becomes visible (2s)", at.Sub(h.now))
	}
	h.fire(WaitTimer)
	h.commit()
	v := h.answers("v")
	if len(v) != 1 {
		t.Fatalf("when the banded message became visible: %v", v)
	}
	if msgs := receiptOf(t, v[0]).GetResults()[0].GetReceive().GetMessages(); len(msgs) != 1 || msgs[0].GetId() != "m2" || msgs[0].GetPriority() != 9 {
		t.Fatalf("the long poll leased %v, want m2 of priority 9", msgs)
	}
}
