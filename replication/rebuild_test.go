package replication

import (
	"errors"
	"slices"
	"testing"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// diverge rewrites the command of the last entry r's state of group holds, behind its state
// machine's back, and returns that entry's index.
func (r *replica) diverge(group int) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	ents := r.applied[group]
	last := &ents[len(ents)-1]
	last.PartitionEntry = &orreryv1.PartitionEntry{Command: []byte("written behind the state machine"), LoggedTimeUnixMicros: last.GetLoggedTimeUnixMicros()}
	return last.Index
}

// sendRebuild streams state (entries applied through index, the last at logged time micros)
// from replica from to replica to as a rebuild of group, and returns where its outcome lands.
func (c *cluster) sendRebuild(from, to *replica, group int, state []Entry, index uint64, micros int64) *rebuildOutcome {
	out := &rebuildOutcome{}
	meta := SnapshotMeta{Index: index, LoggedTimeMicros: micros}
	c.net.Transport(from.id).SendSnapshot(to.id, OutboundSnapshot{
		Group:   group,
		Raft:    RebuildMessage(from.id, to.id, meta),
		Chunks:  &mapReader{entries: slices.Clone(state), index: index, chunkBytes: c.chunkBytes},
		Rebuild: true,
		Done:    func(err error) { out.done, out.err = true, err },
	})
	return out
}

// rebuildOutcome is what a rebuild's sender heard.
type rebuildOutcome struct {
	done bool
	err  error
}

// stateOf returns r's state of group and the applied index and logged time it is at.
func (r *replica) stateOf(group int) ([]Entry, Applied) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.applied[group]), r.index[group]
}

// A follower whose state diverged from the others' (an entry rewritten behind its state
// machine's back) is rebuilt from the leader's state: the rebuild installs, the follower's
// state equals the leader's, and it goes on applying the same entries as the others, with its
// log and its vote intact — it still counts in the group's quorums, and it can lead.
func TestARebuildReplacesADivergedFollowersState(t *testing.T) {
	c := newClusterCompacting(t, 3, 1, 31, snapshotBound)
	leader := c.awaitLeader(0, electionBound)
	want := c.proposeMany(0, "before", 5)
	c.awaitApplied(t, 0, want, electionBound)
	victim := c.follower(0)
	at := victim.diverge(0)
	if got := commands(victim.appliedOf(0)); slices.Equal(got, want) {
		t.Fatalf("the injection at %d changed nothing: %q", at, got)
	}

	state, applied := leader.stateOf(0)
	out := c.sendRebuild(leader, victim, 0, state, applied.Index, applied.LoggedTimeMicros)
	c.settle()
	if !out.done || out.err != nil {
		t.Fatalf("rebuild outcome: done %v, err %v; want installed", out.done, out.err)
	}
	if victim.installsOf(0) != 1 {
		t.Fatalf("the victim installed %d states, want 1", victim.installsOf(0))
	}
	c.sameApplied(0, leader.appliedOf(0), 1, 2, 3)

	want = append(want, c.proposeMany(0, "after", 5)...)
	c.awaitApplied(t, 0, want, electionBound)
	// Its vote still counts: with the third replica cut off, the leader and the rebuilt
	// replica commit alone, and the rebuilt one can lead.
	for _, r := range c.replicas {
		if r != leader && r != victim {
			c.net.Isolate(r.id)
		}
	}
	want = append(want, c.proposeMany(0, "pair", 3)...)
	for _, r := range []*replica{leader, victim} {
		if got := commands(r.appliedOf(0)); !slices.Equal(got, want) {
			t.Fatalf("replica %d with the third cut off holds %q, want %q", r.id, got, want)
		}
	}
	if err := leader.driver.TransferLeadership(0, victim.id); err != nil {
		t.Fatal(err)
	}
	for i := 0; c.leader(0) != victim; i++ {
		if i == electionBound {
			t.Fatalf("the rebuilt replica %d does not lead %d ticks after the transfer", victim.id, electionBound)
		}
		c.tick()
	}
	want = append(want, c.proposeMany(0, "rebuilt-leads", 3)...)
	for _, r := range []*replica{leader, victim} {
		if got := commands(r.appliedOf(0)); !slices.Equal(got, want) {
			t.Fatalf("replica %d under the rebuilt leader holds %q, want %q", r.id, got, want)
		}
	}
}

// A rebuild whose state is older than what the follower applied, but within its log, takes
// the follower back to that state and hands it the committed entries after it again: it ends
// with the same state as the others, each entry applied once.
func TestARebuildBehindTheFollowerAppliesTheEntriesAfterItAgain(t *testing.T) {
	c := newClusterCompacting(t, 3, 1, 32, 0)
	leader := c.awaitLeader(0, electionBound)
	want := c.proposeMany(0, "before", 5)
	c.awaitApplied(t, 0, want, electionBound)
	state, applied := leader.stateOf(0)
	want = append(want, c.proposeMany(0, "later", 5)...)
	c.awaitApplied(t, 0, want, electionBound)
	victim := c.follower(0)
	victim.diverge(0)

	out := c.sendRebuild(leader, victim, 0, state, applied.Index, applied.LoggedTimeMicros)
	c.settle()
	if !out.done || out.err != nil {
		t.Fatalf("rebuild outcome: done %v, err %v; want installed", out.done, out.err)
	}
	c.awaitApplied(t, 0, want, electionBound)
	c.sameApplied(0, leader.appliedOf(0), 1, 2, 3)
	want = append(want, c.proposeMany(0, "after", 3)...)
	c.awaitApplied(t, 0, want, electionBound)
}

// A rebuild is refused, and the state left as it was, when it would go to the group's leader
// (ErrRebuildLeader) or when its state is older than the replica's log reaches back
// (ErrRebuildTooOld).
func TestARebuildIsRefusedByALeaderAndBelowTheLog(t *testing.T) {
	c := newClusterCompacting(t, 3, 1, 33, snapshotBound)
	leader := c.awaitLeader(0, electionBound)
	want := c.proposeMany(0, "before", 3)
	c.awaitApplied(t, 0, want, electionBound)
	victim := c.follower(0)
	state, applied := victim.stateOf(0)

	out := c.sendRebuild(victim, leader, 0, state, applied.Index, applied.LoggedTimeMicros)
	c.settle()
	if !out.done || !errors.Is(out.err, ErrRebuildLeader) {
		t.Fatalf("rebuild of the leader: done %v, err %v; want ErrRebuildLeader", out.done, out.err)
	}

	want = append(want, c.proposeMany(0, "compacted", 3*snapshotBound)...)
	c.awaitApplied(t, 0, want, electionBound)
	if first := victim.firstIndex(t, 0); first <= applied.Index+1 {
		t.Fatalf("the victim's log starts at %d: not compacted past %d", first, applied.Index)
	}
	before := victim.appliedOf(0)
	out = c.sendRebuild(leader, victim, 0, state, applied.Index, applied.LoggedTimeMicros)
	c.settle()
	if !out.done || !errors.Is(out.err, ErrRebuildTooOld) {
		t.Fatalf("rebuild below the log: done %v, err %v; want ErrRebuildTooOld", out.done, out.err)
	}
	if victim.installsOf(0) != 0 || leader.installsOf(0) != 0 {
		t.Fatal("a refused rebuild installed a state")
	}
	if err := samePrefix(victim.appliedOf(0), before); err != nil || len(victim.appliedOf(0)) != len(before) {
		t.Fatalf("a refused rebuild changed the state: %v", err)
	}
}
