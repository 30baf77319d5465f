package engine

import (
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/input"
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

// TestALeaderProposesItsPriorityStepOnceThePartitionTakesIt: below apply version 20 a leader
// configured with another priority step proposes its other limits without the step (a replica
// of an older release would refuse the field), so the partition keeps the default; once the
// leader raises the apply version to 20 it proposes the step, and the partition takes it.
func TestALeaderProposesItsPriorityStepOnceThePartitionTakesIt(t *testing.T) {
	want := input.DefaultLimits()
	want.MaxPayloadBytes = 1 << 20
	want.PriorityStepMicros = 0 // strict
	h := newHarness(t, func(c *Config) {
		c.Limits = want
		c.VotersApplyVersion = func() (uint32, bool) { return batch.ApplyVersionPriority, true }
	})
	var limits []*orreryv1.PartitionLimits
	for _, e := range h.log {
		if l := e.cmd.GetBatch().GetMutations()[0].GetSetLimits(); l != nil {
			limits = append(limits, l.GetLimits())
		}
	}
	if len(limits) != 1 || limits[0].PriorityStepMicros != nil || limits[0].GetMaxPayloadBytes() != 1<<20 {
		t.Fatalf("proposed limits %v, want one SetLimits without a priority step", limits)
	}
	h.commit() // the limits, then the apply version
	held, err := batch.LoadLimits(h.state.mem)
	if err != nil || held.MaxPayloadBytes != 1<<20 || held.PriorityStepMicros != input.Minute {
		t.Fatalf("the partition's limits: %+v, %v; want the payload limit and the default step", held, err)
	}
	if v, err := batch.LoadApplyVersion(h.state.mem); err != nil || v != batch.ApplyVersionPriority {
		t.Fatalf("apply version %d, %v; want %d", v, err, batch.ApplyVersionPriority)
	}
	h.applier.ApplyVersion = batch.ApplyVersionPriority // as the state machine reads it back
	if len(h.log) != 1 || h.log[0].cmd.GetBatch().GetMutations()[0].GetSetLimits().GetLimits().PriorityStepMicros == nil {
		t.Fatalf("after the version rose: log %v, want a SetLimits with the step", h.log)
	}
	h.commit()
	if held, err := batch.LoadLimits(h.state.mem); err != nil || held != want {
		t.Fatalf("the partition's limits: %+v, %v; want %+v", held, err, want)
	}
}
