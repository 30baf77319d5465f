package replication

import (
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
