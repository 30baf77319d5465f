package replication

import (
	"fmt"
	"testing"
)

// leads reports whether r leads group as it sees it.
func (r *replica) leads(t *testing.T, group int) bool {
	return r.status(t, group).Leader == r.id
}

// A clock-unfit replica never leads a group that has other voters able to win: through
// elections after its leaders are stopped, one after the other, the fit replicas lead every
// group, and every group keeps committing.
func TestAClockUnfitReplicaWinsNoElection(t *testing.T) {
	c := newCluster(t, 3, 4, 61)
	unfit := c.replica(1)
	unfit.driver.SetClockUnfit(true)
	for round := range 6 {
		leaders := c.awaitLeaders(4 * electionBound)
		for g, l := range leaders {
			if l == unfit || unfit.leads(t, g) {
				t.Fatalf("round %d: the clock-unfit replica leads group %d", round, g)
			}
			want := fmt.Sprintf("round-%d", round)
			c.propose(g, want)
		}
		c.settle()
		c.await(t, electionBound, "every replica applied group 0's entries", func() bool {
			return c.replica(2).status(t, 0).AppliedIndex == unfit.status(t, 0).AppliedIndex &&
				c.replica(3).status(t, 0).AppliedIndex == unfit.status(t, 0).AppliedIndex
		})
		// Stop the leader of group 0; the other fit replica must win, with the unfit one's vote.
		down := leaders[0]
		down.down = true
		l := c.awaitLeader(0, 4*electionBound)
		if l == unfit {
			t.Fatalf("round %d: the clock-unfit replica won group 0's election", round)
		}
		c.restart(down)
	}
}

// When no fit voter can win (the only fit one left is behind the unfit one's log, so the unfit
// one denies it its vote), the clock-unfit replica wins after unfitCampaignElections election
// timeouts without a leader, stamps nothing, and a transfer hands the group to the fit voter,
// which Raft catches up first.
func TestAClockUnfitReplicaLeadsOnlyToHandOverWhenNoFitVoterCanWin(t *testing.T) {
	c := newCluster(t, 3, 1, 64)
	unfit := c.replica(1)
	unfit.driver.SetClockUnfit(true)
	l := c.awaitLeader(0, 4*electionBound)
	var behind *replica
	for _, r := range c.replicas {
		if r != l && r != unfit {
			behind = r
		}
	}
	behind.down = true
	want := c.proposeMany(0, "while-behind", 3)
	c.awaitAppliedOn(t, 0, want, electionBound, unfit.id)
	c.restart(behind)
	l.down = true
	var won int
	for i := range 8 * electionBound {
		c.tick()
		if unfit.leads(t, 0) {
			won = i + 1
			break
		}
		if behind.leads(t, 0) {
			t.Fatal("the replica behind the log won an election")
		}
	}
	if won == 0 {
		t.Fatalf("no leader within %d ticks", 8*electionBound)
	}
	if min := unfitCampaignElections * 10; won < min {
		t.Fatalf("the clock-unfit replica won after %d ticks, before %d without a leader", won, min)
	}
	_, err := unfit.driver.Propose(0, "tenant-a", []byte("stamped-while-unfit"))
	isUnavailable(t, "Propose at the clock-unfit leader", err, ErrClockUnfit)
	if err := unfit.driver.TransferLeadership(0, behind.id); err != nil {
		t.Fatal(err)
	}
	c.await(t, 2*electionBound, "the fit replica leads", func() bool { return c.leader(0) == behind })
	c.propose(0, "under-the-fit-one")
	c.awaitAppliedOn(t, 0, append(want, "under-the-fit-one"), electionBound, unfit.id, behind.id)
}

// A leader whose silo becomes clock-unfit stamps nothing more in a group with other voters
// (ErrClockUnfit, Unavailable), and a leadership transfer to a clock-unfit replica is refused
// by that replica: the leader keeps leading once the transfer is abandoned. Fit again, it
// stamps and takes transfers.
func TestAClockUnfitLeaderStampsNothingAndTakesNoTransfer(t *testing.T) {
	c := newCluster(t, 3, 1, 62)
	l := c.awaitLeader(0, electionBound)
	l.driver.SetClockUnfit(true)
	_, err := l.driver.Propose(0, "tenant-a", []byte("while-unfit"))
	isUnavailable(t, "Propose at a clock-unfit leader", err, ErrClockUnfit)
	l.driver.SetClockUnfit(false)
	c.propose(0, "fit-again")
	c.settle()

	var target *replica
	for _, r := range c.replicas {
		if r != l {
			target = r
			break
		}
	}
	target.driver.SetClockUnfit(true)
	if err := l.driver.TransferLeadership(0, target.id); err != nil {
		t.Fatal(err)
	}
	c.ticks(4 * electionBound)
	if target.leads(t, 0) || c.leader(0) != l {
		t.Fatalf("after a transfer to clock-unfit replica %d, replica %d does not lead alone", target.id, l.id)
	}
	c.propose(0, "after-refused-transfer")
	target.driver.SetClockUnfit(false)
	if err := l.driver.TransferLeadership(0, target.id); err != nil {
		t.Fatal(err)
	}
	c.await(t, electionBound, "the fit target leads", func() bool { return c.leader(0) == target })
}

// A clock-unfit replica that is its group's only voter still leads it and stamps: nobody else
// can.
func TestAClockUnfitSoleVoterStillLeads(t *testing.T) {
	c := newGrowingCluster(t, 3, 1, 63, 0)
	c.replica(1).driver.SetClockUnfit(true)
	if l := c.awaitLeader(0, electionBound); l != c.replica(1) {
		t.Fatalf("replica %d leads, want the sole voter 1", l.id)
	}
	c.propose(0, "sole")
	c.awaitAppliedOn(t, 0, []string{"sole"}, electionBound, 1)
}

// A replica whose silo has not judged its clock yet wins no election a fit voter can win and
// takes no leadership transferred to it, as a clock-unfit one; a leader that becomes unjudged
// stamps as usual. Judged fit, the replica takes the transfer.
func TestAClockUnjudgedReplicaTakesNoLeadershipButStamps(t *testing.T) {
	c := newCluster(t, 3, 2, 65)
	unjudged := c.replica(1)
	unjudged.driver.SetClockUnjudged(true)
	for g, l := range c.awaitLeaders(4 * electionBound) {
		if l == unjudged {
			t.Fatalf("the unjudged replica leads group %d", g)
		}
	}
	l := c.leader(0)
	if err := l.driver.TransferLeadership(0, unjudged.id); err != nil {
		t.Fatal(err)
	}
	c.ticks(4 * electionBound)
	if unjudged.leads(t, 0) || c.leader(0) != l {
		t.Fatalf("after a transfer to unjudged replica %d, replica %d does not lead alone", unjudged.id, l.id)
	}
	l.driver.SetClockUnjudged(true)
	c.propose(0, "stamped-while-unjudged")
	c.awaitAppliedOn(t, 0, []string{"stamped-while-unjudged"}, electionBound, 1, 2, 3)
	unjudged.driver.SetClockUnjudged(false)
	if err := l.driver.TransferLeadership(0, unjudged.id); err != nil {
		t.Fatal(err)
	}
	c.await(t, electionBound, "the replica judged fit takes the transfer", func() bool { return c.leader(0) == unjudged })
}
