package replication

import (
	"fmt"
	"slices"
	"testing"
)

// The driver's barrier is per group: a group whose entries are still applying sits out the
// rounds (its next committed entry is not handed over), while another group's proposals
// commit and apply; once its apply ends, it goes on.
func TestABusyGroupSitsOutRoundsWhileTheOthersGoOn(t *testing.T) {
	c := newCluster(t, 1, 2, 21)
	r := c.replica(1)
	c.awaitLeaders(electionBound)
	runRounds := func() {
		t.Helper()
		for range 20 {
			did, err := r.driver.RunRound()
			if err != nil {
				t.Fatal(err)
			}
			if !did {
				return
			}
		}
	}
	r.mu.Lock()
	r.deferGroups = map[int]bool{0: true}
	r.mu.Unlock()
	if _, err := r.driver.Propose(0, "tenant-a", []byte("first")); err != nil {
		t.Fatal(err)
	}
	runRounds()
	if n := len(r.deferred); n != 1 {
		t.Fatalf("group 0's first entry: %d hand-overs waiting, want 1", n)
	}
	second, err := r.driver.Propose(0, "tenant-a", []byte("second"))
	if err != nil {
		t.Fatal(err)
	}
	beside, err := r.driver.Propose(1, "tenant-a", []byte("beside"))
	if err != nil {
		t.Fatal(err)
	}
	runRounds()
	if got := commands(r.appliedOf(1)); !slices.Contains(got, "beside") {
		t.Fatalf("group 1 applied %q while group 0 applied, want its entry", got)
	}
	if o, ok := r.outcomeOf(beside); !ok || !o.Committed {
		t.Fatalf("group 1's outcome: %+v (settled %v)", o, ok)
	}
	if n := len(r.deferred); n != 1 {
		t.Fatalf("group 0 was handed %d more entries while its first applied, want none", n-1)
	}
	if _, ok := r.outcomeOf(second); ok {
		t.Fatal("group 0's second proposal was settled while its first entry applied")
	}
	r.finishApplies()
	c.settle()
	if got := commands(r.appliedOf(0)); !slices.Equal(got, []string{"first", "second"}) {
		t.Fatalf("group 0 applied %q once its apply ended, want [first second]", got)
	}
}

// A snapshot the leader must send while its group is still applying the entries the same
// round handed over is sent by a round after those applies end, read at the applied index
// Groups recorded: the far-behind follower installs it and catches up.
func TestASnapshotAskedForWhileTheGroupAppliesIsSentOnceItHasApplied(t *testing.T) {
	c := newClusterCompacting(t, 3, 1, 12, snapshotBound)
	leader := c.awaitLeader(0, electionBound)
	want := c.proposeMany(0, "before", 3)
	victim := c.follower(0)
	c.net.Isolate(victim.id)
	want = append(want, c.proposeMany(0, "while-cut", 3*snapshotBound)...)
	if l := c.awaitLeader(0, electionBound); l != leader {
		t.Fatalf("the leader changed while the follower was cut off")
	}
	leader.mu.Lock()
	leader.deferGroups = map[int]bool{0: true}
	leader.mu.Unlock()
	c.net.Rejoin(victim.id)
	for i := 0; leader.driver.snapshotsDeferred == 0; i++ {
		if i > 3*electionBound {
			t.Fatal("the leader sent every snapshot at once: none was asked for while its group applied")
		}
		c.propose(0, fmt.Sprintf("during-%d", i))
		want = append(want, fmt.Sprintf("during-%d", i))
		for _, r := range c.replicas {
			if _, err := r.driver.RunRound(); err != nil {
				t.Fatal(err)
			}
		}
		c.net.Deliver(c.receiver)
		c.tick()
	}
	c.awaitApplied(t, 0, want, 3*electionBound)
	if victim.installsOf(0) == 0 {
		t.Fatal("the victim caught up without installing a snapshot")
	}
}
