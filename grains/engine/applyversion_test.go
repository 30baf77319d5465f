package engine

import (
	"testing"
	"time"

	"github.com/orreryhq/orrery/grains/batch"
)

// TestTheLeaderRaisesTheApplyVersionOnceEveryVoterKnowsIt: a leader whose binary knows apply
// version 2 proposes SetApplyVersion 2 (as ApplyVersionPrincipal) only once every voter of its
// group knows 2: not while a voter knows 1 or is not known, then at a housekeeping tick once
// they all do; once applied the partition holds 2 and a leader opened then proposes nothing.
func TestTheLeaderRaisesTheApplyVersionOnceEveryVoterKnowsIt(t *testing.T) {
	voters, known := uint32(1), true
	h := newHarness(t, func(c *Config) {
		c.Applier.KnownApplyVersion = 2
		c.VotersApplyVersion = func() (uint32, bool) { return voters, known }
	})
	h.applier.KnownApplyVersion = 2
	if len(h.log) != 0 {
		t.Fatalf("a voter knows only version 1: proposed %v", h.log)
	}
	voters, known = 2, false
	h.fire(HousekeepTimer)
	if len(h.log) != 0 {
		t.Fatalf("a voter's version is not known: proposed %v", h.log)
	}
	voters, known = 2, true
	h.fire(HousekeepTimer)
	if len(h.log) != 1 || h.log[0].principal != ApplyVersionPrincipal || h.log[0].cmd.GetBatch().GetMutations()[0].GetSetApplyVersion().GetVersion() != 2 {
		t.Fatalf("log %v, want one SetApplyVersion 2", h.log)
	}
	h.now = h.now.Add(time.Millisecond)
	h.commit()
	if held, err := batch.LoadApplyVersion(h.state.mem); err != nil || held != 2 {
		t.Fatalf("the partition holds apply version %d (%v), want 2", held, err)
	}
	if h.answeredApplied != 0 {
		t.Fatal("the SetApplyVersion reply counted as a caller's")
	}
	h.e = New(Config{Partition: 0, Partitions: 1, Applier: h.applier, MaxPending: 100, MaxWaiters: 10,
		MaxWait: 30 * time.Second, HousekeepEvery: 10 * time.Second, Logger: quiet,
		VotersApplyVersion: func() (uint32, bool) { return 2, true }}, h.state)
	if rd := h.e.Step(h.now, Open{}); len(rd.Propose) != 0 {
		t.Fatalf("a leader opened on a partition at its version proposed %d commands", len(rd.Propose))
	}
}

// TestALeaderNeverProposesAVersionItsBinaryDoesNotKnow: voters that know version 3 do not make
// a binary that knows 1 propose anything.
func TestALeaderNeverProposesAVersionItsBinaryDoesNotKnow(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Applier.KnownApplyVersion = 1
		c.VotersApplyVersion = func() (uint32, bool) { return 3, true }
	})
	h.fire(HousekeepTimer)
	for _, e := range h.log {
		if e.cmd.GetBatch().GetMutations()[0].GetSetApplyVersion() != nil {
			t.Fatalf("a binary knowing version 1 proposed %v", e.cmd)
		}
	}
}
