package replication

import (
	"fmt"
	"slices"
	"testing"
)

// snapshotBound is the MaxLogEntries of the snapshot tests.
const snapshotBound = 20

// proposeMany proposes n commands named prefix-i to group, settling every few.
func (c *cluster) proposeMany(group int, prefix string, n int) []string {
	c.t.Helper()
	var cmds []string
	for i := range n {
		cmd := fmt.Sprintf("%s-%d", prefix, i)
		c.propose(group, cmd)
		cmds = append(cmds, cmd)
		if i%5 == 4 {
			c.settle()
		}
	}
	c.settle()
	return cmds
}

// follower returns a live replica that does not lead group.
func (c *cluster) follower(group int) *replica {
	c.t.Helper()
	l := c.awaitLeader(group, electionBound)
	for _, r := range c.replicas {
		if r != l && !r.down {
			return r
		}
	}
	c.t.Fatal("no follower")
	return nil
}

// firstIndex is r's log's first index for group.
func (r *replica) firstIndex(t *testing.T, group int) uint64 {
	t.Helper()
	st, err := r.log.Storage(group)
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	return first
}

// awaitApplied ticks until every replica's state of group holds want's commands, within
// bound ticks.
func (c *cluster) awaitApplied(t *testing.T, group int, want []string, bound int) {
	t.Helper()
	for range bound {
		done := true
		for _, r := range c.replicas {
			if !slices.Equal(commands(r.appliedOf(group)), want) {
				done = false
			}
		}
		if done {
			return
		}
		c.tick()
	}
	for _, r := range c.replicas {
		if got := commands(r.appliedOf(group)); !slices.Equal(got, want) {
			t.Fatalf("group %d replica %d holds %d commands %q, want %d", group, r.id, len(got), got, len(want))
		}
	}
}

// A follower cut off while the leader commits more than the log bound finds the leader's log
// compacted past it, is caught up by a snapshot, and then applies the same entries as the
// others. The leader's log stays within the bound meanwhile, instead of waiting for it.
func TestFarBehindReplicaCatchesUpBySnapshot(t *testing.T) {
	c := newClusterCompacting(t, 3, 1, 11, snapshotBound)
	c.awaitLeader(0, electionBound)
	want := c.proposeMany(0, "before", 3)
	victim := c.follower(0)
	c.net.Isolate(victim.id)
	want = append(want, c.proposeMany(0, "while-cut", 3*snapshotBound)...)
	leader := c.awaitLeader(0, electionBound)
	behind, _ := victim.driver.Status(0)
	if first := leader.firstIndex(t, 0); first <= behind.AppliedIndex+1 {
		t.Fatalf("leader's log starts at %d, the victim applied %d: not compacted past it", first, behind.AppliedIndex)
	}
	c.net.Rejoin(victim.id)
	c.awaitApplied(t, 0, want, 3*electionBound)
	if victim.installsOf(0) == 0 {
		t.Fatal("the victim caught up without installing a snapshot")
	}
	want = append(want, c.proposeMany(0, "after", 5)...)
	c.awaitApplied(t, 0, want, electionBound)
	c.sameApplied(0, leader.appliedOf(0), 1, 2, 3)
	for _, r := range c.replicas {
		st, _ := r.driver.Status(0)
		if last := r.appliedOf(0)[len(want)-1]; st.AppliedLoggedTimeMicros != last.GetLoggedTimeUnixMicros() {
			t.Fatalf("replica %d: status logged time %d, last applied %d", r.id, st.AppliedLoggedTimeMicros, last.GetLoggedTimeUnixMicros())
		}
	}
}

// A replica restarted on an empty disk (its log bootstrapped again, its state empty) is caught
// up by a snapshot, the leader's log no longer reaching back to its start. Raft requires a
// replica's log to survive, so a wiped replica stands for a new one only where no leader
// remembers what it matched: every replica restarts, as after a power loss of the cluster.
func TestWipedReplicaCatchesUpBySnapshot(t *testing.T) {
	c := newClusterCompacting(t, 3, 2, 12, snapshotBound)
	c.awaitLeaders(electionBound)
	want := map[int][]string{}
	for _, g := range c.groups {
		want[g] = c.proposeMany(g, fmt.Sprintf("g%d", g), 2*snapshotBound)
	}
	victim := c.follower(0)
	c.wipe(victim, []uint64{1, 2, 3})
	c.net.Restarted(victim.id)
	for _, r := range c.replicas {
		if r != victim {
			c.restart(r)
		}
	}
	for _, g := range c.groups {
		c.awaitApplied(t, g, want[g], 3*electionBound)
		if victim.installsOf(g) == 0 {
			t.Fatalf("group %d: the wiped replica caught up without installing a snapshot", g)
		}
		want[g] = append(want[g], c.proposeMany(g, fmt.Sprintf("g%d-after", g), 3)...)
		c.awaitApplied(t, g, want[g], electionBound)
	}
}

// A replica that crashes in the middle of installing a snapshot reopens with its old state
// (a prefix of the group's entries, never a mix), is sent the snapshot again, installs it,
// and applies the same entries as the others.
func TestCrashInTheMiddleOfAnInstallInstallsAgain(t *testing.T) {
	c := newClusterCompacting(t, 3, 1, 13, snapshotBound)
	c.awaitLeader(0, electionBound)
	want := c.proposeMany(0, "before", 3)
	victim := c.follower(0)
	old := victim.appliedOf(0)
	oldStatus, _ := victim.driver.Status(0)
	c.net.Isolate(victim.id)
	want = append(want, c.proposeMany(0, "while-cut", 3*snapshotBound)...)
	victim.mu.Lock()
	victim.crashInstallAfter = 2 // the snapshot has more than 2 chunks of 200 bytes
	victim.mu.Unlock()
	c.net.Rejoin(victim.id)
	for i := 0; !victim.isCrashed(); i++ {
		if i > 3*electionBound {
			t.Fatal("the victim never began installing a snapshot")
		}
		c.tick()
	}
	if got := victim.appliedOf(0); len(got) != len(old) || samePrefix(got, old) != nil {
		t.Fatalf("after the crash the victim holds %d entries, want its old %d", len(got), len(old))
	}
	c.restart(victim)
	if st, _ := victim.driver.Status(0); st.AppliedIndex != oldStatus.AppliedIndex {
		t.Fatalf("reopened at applied index %d, want the old %d", st.AppliedIndex, oldStatus.AppliedIndex)
	}
	c.awaitApplied(t, 0, want, 3*electionBound)
	if victim.installsOf(0) != 1 {
		t.Fatalf("installed %d snapshots, want 1 after the crashed one", victim.installsOf(0))
	}
	want = append(want, c.proposeMany(0, "after", 3)...)
	c.awaitApplied(t, 0, want, electionBound)
}

// A replica that crashes once a snapshot is installed but before its round reaches the log
// reopens with a state ahead of its log's commit: it is not handed the entries the state
// holds again, and catches up with the others.
func TestCrashBetweenInstallAndPersistSkipsWhatTheStateHolds(t *testing.T) {
	c := newClusterCompacting(t, 3, 1, 14, snapshotBound)
	c.awaitLeader(0, electionBound)
	want := c.proposeMany(0, "before", 3)
	victim := c.follower(0)
	c.net.Isolate(victim.id)
	want = append(want, c.proposeMany(0, "while-cut", 3*snapshotBound)...)
	victim.mu.Lock()
	victim.crashBeforeRestorePersist = true
	victim.mu.Unlock()
	c.net.Rejoin(victim.id)
	for i := 0; !victim.isCrashed(); i++ {
		if i > 3*electionBound {
			t.Fatal("the victim never installed a snapshot")
		}
		c.tick()
	}
	if victim.installsOf(0) != 1 {
		t.Fatalf("installed %d snapshots before the crash, want 1", victim.installsOf(0))
	}
	installed := victim.appliedOf(0)
	c.restart(victim)
	if st, _ := victim.driver.Status(0); st.AppliedIndex != installed[len(installed)-1].Index {
		t.Fatalf("reopened at applied index %d, want the installed %d", st.AppliedIndex, installed[len(installed)-1].Index)
	}
	want = append(want, c.proposeMany(0, "after", 3)...)
	c.awaitApplied(t, 0, want, 3*electionBound)
}

// With chunks lost, duplicated, delayed and reordered, snapshots fail and are retried until
// one arrives whole: the victim installs it and applies the same entries as the others.
func TestLostChunksFailTheSnapshotUntilARetrySucceeds(t *testing.T) {
	c := newClusterCompacting(t, 3, 1, 15, snapshotBound)
	c.awaitLeader(0, electionBound)
	want := c.proposeMany(0, "before", 3)
	victim := c.follower(0)
	c.net.Isolate(victim.id)
	want = append(want, c.proposeMany(0, "while-cut", 3*snapshotBound)...)
	c.net.SetFaults(NetworkFaults{DropPercent: 10, DuplicatePercent: 10, MaxDelaySteps: 2, Reorder: true})
	c.net.Rejoin(victim.id)
	c.awaitApplied(t, 0, want, 30*electionBound)
	c.mu.Lock()
	failed, reported := c.snapshotsFailed, c.snapshotsInstalled
	c.mu.Unlock()
	if failed == 0 || reported == 0 || victim.installsOf(0) == 0 {
		t.Fatalf("%d snapshot streams failed, %d reported installed, %d installed; want some of each", failed, reported, victim.installsOf(0))
	}
	c.net.SetFaults(NetworkFaults{})
	want = append(want, c.proposeMany(0, "after", 3)...)
	c.awaitApplied(t, 0, want, 3*electionBound)
}

// With every replica keeping up, each log is compacted to stay near the bound and no follower
// needs a snapshot, not even one cut off for fewer entries than the bound; a single replica
// compacts up to its applied index.
func TestLogsStayNearTheBoundWithoutSnapshots(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d replicas", n), func(t *testing.T) {
			c := newClusterCompacting(t, n, 1, 16, snapshotBound)
			c.awaitLeader(0, electionBound)
			want := c.proposeMany(0, "cmd", 5*snapshotBound)
			if n > 1 {
				victim := c.follower(0)
				c.net.Isolate(victim.id)
				want = append(want, c.proposeMany(0, "while-cut", snapshotBound-2)...)
				c.net.Rejoin(victim.id)
			}
			c.awaitApplied(t, 0, want, electionBound)
			for _, r := range c.replicas {
				st, err := r.log.Storage(0)
				if err != nil {
					t.Fatal(err)
				}
				first, last := r.firstIndex(t, 0), uint64(0)
				if last, err = st.LastIndex(); err != nil {
					t.Fatal(err)
				}
				if held := last - first + 1; first <= 2 || held > 2*snapshotBound {
					t.Fatalf("replica %d holds entries %d to %d: not compacted to the bound of %d", r.id, first, last, snapshotBound)
				}
				snap, err := st.Snapshot()
				if err != nil || snap.GetMetadata().GetIndex() != first-1 {
					t.Fatalf("replica %d: snapshot record %v %v, want it at %d", r.id, snap.GetMetadata(), err, first-1)
				}
				if r.installsOf(0) != 0 {
					t.Fatalf("replica %d installed %d snapshots while keeping up", r.id, r.installsOf(0))
				}
			}
		})
	}
}
