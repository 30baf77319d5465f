package replication

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/persistence"
)

// status is r's status of group, failing the test if r does not host it.
func (r *replica) status(t *testing.T, group int) Status {
	t.Helper()
	st, ok := r.driver.Status(group)
	if !ok {
		t.Fatalf("replica %d does not host group %d", r.id, group)
	}
	return st
}

// await ticks until cond holds, at most bound ticks.
func (c *cluster) await(t *testing.T, bound int, what string, cond func() bool) {
	t.Helper()
	for range bound {
		if cond() {
			return
		}
		c.tick()
	}
	if !cond() {
		t.Fatalf("not within %d ticks: %s", bound, what)
	}
}

// awaitAppliedOn ticks until the listed replicas' states of group hold exactly want's
// commands, within bound ticks.
func (c *cluster) awaitAppliedOn(t *testing.T, group int, want []string, bound int, ids ...uint64) {
	t.Helper()
	for _, id := range ids {
		r := c.replica(id)
		c.await(t, bound, fmt.Sprintf("replica %d applies %d commands to group %d (holds %q)", id, len(want), group, commands(r.appliedOf(group))), func() bool {
			return slices.Equal(commands(r.appliedOf(group)), want)
		})
	}
}

// sameConf fails unless r's group has exactly voters and learners.
func sameConf(t *testing.T, r *replica, group int, voters, learners []uint64) {
	t.Helper()
	st := r.status(t, group)
	if !slices.Equal(st.Voters, voters) || !slices.Equal(st.Learners, learners) {
		t.Fatalf("replica %d group %d: voters %v learners %v, want %v and %v", r.id, group, st.Voters, st.Learners, voters, learners)
	}
}

// change calls one membership change at the leader l and settles, failing the test if it
// refuses; the change has applied on l afterwards.
func (c *cluster) change(t *testing.T, l *replica, group int, what string, call func(*Driver) error) {
	t.Helper()
	if err := call(l.driver); err != nil {
		t.Fatalf("group %d: %s at replica %d: %v", group, what, l.id, err)
	}
	c.await(t, electionBound, what+" applies at the leader", func() bool { return !l.status(t, group).ConfChangePending })
}

// join makes replica id a voter of group: added as a learner at the leader l, promoted once
// l sees it caught up.
func (c *cluster) join(t *testing.T, l *replica, group int, id uint64) {
	t.Helper()
	c.change(t, l, group, fmt.Sprintf("AddLearner(%d)", id), func(d *Driver) error { return d.AddLearner(group, id) })
	c.await(t, 3*electionBound, fmt.Sprintf("replica %d caught up", id), func() bool { return l.status(t, group).Progress[id].CaughtUp })
	c.change(t, l, group, fmt.Sprintf("PromoteLearner(%d)", id), func(d *Driver) error { return d.PromoteLearner(group, id) })
}

// isUnavailable fails unless err, what returned, is sentinel wrapped in an *orrery.Error of
// code Unavailable.
func isUnavailable(t *testing.T, what string, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) || !errors.Is(err, orrery.ErrUnavailable) {
		t.Fatalf("%s: %v, want %v as Unavailable", what, err, sentinel)
	}
}

// A group bootstrapped on replica 1 alone grows to three voters: each replica, opened with
// nothing persisted, is added as a learner, caught up by a snapshot of the state and then
// from the log, and promoted once the leader sees it caught up. Proposals commit at every
// step, and every replica ends with the same configuration and entries.
func TestGroupGrowsFromOneVoterByLearnersCaughtUpAndPromoted(t *testing.T) {
	c := newGrowingCluster(t, 3, 1, 21, snapshotBound)
	if err := c.replica(2).driver.Campaign(0); err == nil {
		t.Fatal("replica 2, opened empty, campaigned")
	}
	l := c.awaitLeader(0, electionBound)
	if l.id != 1 {
		t.Fatalf("replica %d leads, want the founding replica 1", l.id)
	}
	sameConf(t, l, 0, []uint64{1}, nil)
	sameConf(t, c.replica(2), 0, nil, nil)
	want := c.proposeMany(0, "alone", 3)

	if err := l.driver.AddLearner(0, 2); err != nil {
		t.Fatal(err)
	}
	if !l.status(t, 0).ConfChangePending {
		t.Fatal("AddLearner(2) proposed, yet no conf change is pending")
	}
	c.settle()
	st := l.status(t, 0)
	if st.ConfChangePending {
		t.Fatal("AddLearner(2) applied at the single voter, yet still pending")
	}
	sameConf(t, l, 0, []uint64{1}, []uint64{2})
	l.mu.Lock()
	stateIndex := l.index[0].Index
	l.mu.Unlock()
	if stateIndex != st.AppliedIndex || !slices.Equal(commands(l.appliedOf(0)), want) {
		t.Fatalf("leader's state at %d holding %q, its status at %d: the conf change must count in the applied index and not be applied as an entry", stateIndex, commands(l.appliedOf(0)), st.AppliedIndex)
	}
	if err := l.driver.AddLearner(0, 2); err != nil {
		t.Fatalf("AddLearner of a learner: %v", err)
	}
	c.awaitAppliedOn(t, 0, want, 3*electionBound, 2)
	if n := c.replica(2).installsOf(0); n != 1 {
		t.Fatalf("replica 2 installed %d snapshots, want 1", n)
	}
	want = append(want, c.proposeMany(0, "with-learner", 5)...)
	c.awaitAppliedOn(t, 0, want, electionBound, 1, 2)
	if n := c.replica(2).installsOf(0); n != 1 {
		t.Fatalf("replica 2 installed %d snapshots after the first, want entries from the log", n)
	}
	c.await(t, electionBound, "replica 2 caught up", func() bool { return l.status(t, 0).Progress[2].CaughtUp })
	if p := l.status(t, 0).Progress[2]; !p.Learner || !p.Active {
		t.Fatalf("leader's progress of replica 2: %+v, want an active learner", p)
	}
	if err := l.driver.PromoteLearner(0, 2); err != nil {
		t.Fatal(err)
	}
	c.settle()
	sameConf(t, l, 0, []uint64{1, 2}, nil)
	sameConf(t, c.replica(2), 0, []uint64{1, 2}, nil)
	if err := l.driver.AddLearner(0, 2); !errors.Is(err, orrery.ErrValidation) {
		t.Fatalf("AddLearner of a voter: %v, want Invalid", err)
	}
	want = append(want, c.proposeMany(0, "two-voters", 5)...)

	c.join(t, l, 0, 3)
	want = append(want, c.proposeMany(0, "three-voters", 5)...)
	c.awaitAppliedOn(t, 0, want, electionBound, 1, 2, 3)
	for _, r := range c.replicas {
		sameConf(t, r, 0, []uint64{1, 2, 3}, nil)
	}
	if n := c.replica(3).installsOf(0); n != 1 {
		t.Fatalf("replica 3 installed %d snapshots, want 1", n)
	}
	st = l.status(t, 0)
	for _, id := range []uint64{1, 2, 3} {
		if p := st.Progress[id]; !p.Active || !p.CaughtUp || p.Learner {
			t.Fatalf("leader's progress of replica %d: %+v", id, p)
		}
	}
	if fs := c.replica(2).status(t, 0); fs.Progress != nil {
		t.Fatalf("a follower's status has progress %v", fs.Progress)
	}
}

// While a conf change the leader proposed has not applied, the next is refused; once it
// applied, the next is accepted.
func TestSecondConfChangeWhileOnePendsIsRefused(t *testing.T) {
	c := newGrowingCluster(t, 3, 1, 22, 0)
	l := c.awaitLeader(0, electionBound)
	c.join(t, l, 0, 2)
	// Two voters: the next change commits only once replica 2 acknowledges it.
	c.net.Isolate(2)
	if err := l.driver.AddLearner(0, 3); err != nil {
		t.Fatal(err)
	}
	c.ticks(3)
	if !l.status(t, 0).ConfChangePending {
		t.Fatal("no conf change pending while it cannot commit")
	}
	for name, call := range map[string]func(*Driver) error{
		"AddLearner":     func(d *Driver) error { return d.AddLearner(0, 3) },
		"PromoteLearner": func(d *Driver) error { return d.PromoteLearner(0, 3) },
		"RemoveReplica":  func(d *Driver) error { return d.RemoveReplica(0, 2) },
	} {
		isUnavailable(t, name, call(l.driver), ErrConfChangePending)
	}
	c.net.Rejoin(2)
	c.await(t, electionBound, "the pending change applies", func() bool { return !l.status(t, 0).ConfChangePending })
	sameConf(t, l, 0, []uint64{1, 2}, []uint64{3})
	c.await(t, 3*electionBound, "replica 3 caught up", func() bool { return l.status(t, 0).Progress[3].CaughtUp })
	if err := l.driver.PromoteLearner(0, 3); err != nil {
		t.Fatal(err)
	}
}

// A learner is not caught up before the leader has replicated to it from the log: just added
// (Raft counts it active, but probes it and will send it a snapshot), or cut off from the
// leader. Its promotion is refused until it has caught up.
func TestPromotingALearnerBehindIsRefused(t *testing.T) {
	c := newGrowingCluster(t, 3, 1, 23, 0)
	l := c.awaitLeader(0, electionBound)
	want := c.proposeMany(0, "before", 3)
	// The leader alone applies the change; nothing reaches replica 3 yet.
	if err := l.driver.AddLearner(0, 3); err != nil {
		t.Fatal(err)
	}
	for l.status(t, 0).ConfChangePending {
		if did, err := l.driver.RunRound(); err != nil || !did {
			t.Fatalf("the leader's rounds stopped (%v) before AddLearner(3) applied", err)
		}
	}
	if p := l.status(t, 0).Progress[3]; !p.Learner || !p.Active || p.CaughtUp {
		t.Fatalf("leader's progress of a learner just added: %+v, want active, not caught up", p)
	}
	isUnavailable(t, "PromoteLearner(3) just added", l.driver.PromoteLearner(0, 3), ErrLearnerBehind)
	c.awaitAppliedOn(t, 0, want, 3*electionBound, 3)
	c.await(t, electionBound, "replica 3 caught up", func() bool { return l.status(t, 0).Progress[3].CaughtUp })
	c.change(t, l, 0, "RemoveReplica(3)", func(d *Driver) error { return d.RemoveReplica(0, 3) })
	sameConf(t, l, 0, []uint64{1}, nil)

	c.net.Isolate(2)
	c.change(t, l, 0, "AddLearner(2)", func(d *Driver) error { return d.AddLearner(0, 2) })
	c.ticks(electionBound)
	isUnavailable(t, "PromoteLearner(2)", l.driver.PromoteLearner(0, 2), ErrLearnerBehind)
	if p := l.status(t, 0).Progress[2]; p.CaughtUp || p.Active {
		t.Fatalf("leader's progress of the cut-off learner: %+v", p)
	}
	c.net.Rejoin(2)
	c.awaitAppliedOn(t, 0, want, 3*electionBound, 2)
	c.await(t, electionBound, "replica 2 caught up", func() bool { return l.status(t, 0).Progress[2].CaughtUp })
	c.change(t, l, 0, "PromoteLearner(2)", func(d *Driver) error { return d.PromoteLearner(0, 2) })
	sameConf(t, c.replica(2), 0, []uint64{1, 2}, nil)
	if err := l.driver.PromoteLearner(0, 3); !errors.Is(err, orrery.ErrValidation) {
		t.Fatalf("PromoteLearner of a replica outside the group: %v, want Invalid", err)
	}
	if err := l.driver.PromoteLearner(0, 2); err != nil {
		t.Fatalf("PromoteLearner of a voter: %v", err)
	}
}

// A voter that stopped answering can be removed once the leader saw it inactive for an
// election timeout, as the remaining voters are live; removing a live voter instead, which
// would leave the dead one needed for a quorum, is refused; so is removing the leader.
func TestRemovingADeadVoterLeavesALiveQuorum(t *testing.T) {
	c := newGrowingCluster(t, 3, 1, 24, 0)
	l := c.awaitLeader(0, electionBound)
	c.join(t, l, 0, 2)
	c.join(t, l, 0, 3)
	isUnavailable(t, "RemoveReplica(leader)", l.driver.RemoveReplica(0, l.id), ErrRemoveLeader)
	dead := c.replica(3)
	dead.down = true
	c.net.Isolate(dead.id)
	c.await(t, 3*10, "the leader sees replica 3 inactive", func() bool { return !l.status(t, 0).Progress[3].Active })
	if c.leader(0) != l {
		t.Fatal("the leader lost its leadership with one voter of three down")
	}
	isUnavailable(t, "RemoveReplica(2)", l.driver.RemoveReplica(0, 2), ErrNoLiveQuorum)
	c.change(t, l, 0, "RemoveReplica(3)", func(d *Driver) error { return d.RemoveReplica(0, 3) })
	sameConf(t, l, 0, []uint64{1, 2}, nil)
	sameConf(t, c.replica(2), 0, []uint64{1, 2}, nil)
	if err := l.driver.RemoveReplica(0, 3); err != nil {
		t.Fatalf("RemoveReplica of a replica outside the group: %v", err)
	}
	want := c.proposeMany(0, "after", 3)
	c.awaitAppliedOn(t, 0, want, electionBound, 1, 2)
}

// With two voters of three dead, removing either is refused (one live voter is no quorum of
// the two that would remain), while removing a learner is allowed.
func TestRemovingAVoterWithoutALiveQuorumIsRefused(t *testing.T) {
	c := newGrowingCluster(t, 4, 1, 25, 0)
	l := c.awaitLeader(0, electionBound)
	c.join(t, l, 0, 2)
	c.join(t, l, 0, 3)
	c.change(t, l, 0, "AddLearner(4)", func(d *Driver) error { return d.AddLearner(0, 4) })
	for _, id := range []uint64{2, 3} {
		c.replica(id).down = true
		c.net.Isolate(id)
	}
	// The leader steps down at the first quorum check that finds both inactive; in the
	// election timeout before, it sees them inactive and still leads.
	c.await(t, 3*10, "the leader sees replicas 2 and 3 inactive", func() bool {
		p := l.status(t, 0).Progress
		return p != nil && !p[2].Active && !p[3].Active
	})
	for _, id := range []uint64{2, 3} {
		isUnavailable(t, fmt.Sprintf("RemoveReplica(%d)", id), l.driver.RemoveReplica(0, id), ErrNoLiveQuorum)
	}
	if err := l.driver.RemoveReplica(0, 4); err != nil {
		t.Fatalf("RemoveReplica of a learner: %v", err)
	}
}

// TransferLeadership hands the leadership to the voter named, which then can propose.
func TestTransferLeadershipMovesTheLeadership(t *testing.T) {
	c := newGrowingCluster(t, 3, 1, 26, 0)
	l := c.awaitLeader(0, electionBound)
	c.join(t, l, 0, 2)
	c.change(t, l, 0, "AddLearner(3)", func(d *Driver) error { return d.AddLearner(0, 3) })
	if err := l.driver.TransferLeadership(0, 3); !errors.Is(err, orrery.ErrValidation) {
		t.Fatalf("TransferLeadership to a learner: %v, want Invalid", err)
	}
	isUnavailable(t, "TransferLeadership at a follower", c.replica(2).driver.TransferLeadership(0, 2), ErrNotLeader)
	if err := l.driver.TransferLeadership(0, 2); err != nil {
		t.Fatal(err)
	}
	c.await(t, electionBound, "replica 2 leads", func() bool { return c.leader(0) == c.replica(2) })
	want := c.proposeMany(0, "under-2", 3)
	c.awaitAppliedOn(t, 0, want, electionBound, 1, 2, 3)
}

// A replica restarted right after a conf change applied, on its log (the change after the
// log's snapshot record) and its state, keeps the configuration the change made, and hands
// its state machine none of the entries it already applied. The founding replica, whose log
// starts at its bootstrap record naming it the only voter, would otherwise lead alone.
func TestRestartRightAfterAConfChangeKeepsTheConfiguration(t *testing.T) {
	c := newGrowingCluster(t, 3, 1, 27, 0)
	l := c.awaitLeader(0, electionBound)
	want := c.proposeMany(0, "alone", 3)
	c.join(t, l, 0, 2)
	want = append(want, c.proposeMany(0, "two", 3)...)
	c.change(t, l, 0, "AddLearner(3)", func(d *Driver) error { return d.AddLearner(0, 3) })
	want = append(want, c.proposeMany(0, "learner", 3)...)
	c.await(t, 3*electionBound, "replica 3 caught up", func() bool { return l.status(t, 0).Progress[3].CaughtUp })
	if err := l.driver.PromoteLearner(0, 3); err != nil {
		t.Fatal(err)
	}
	r3 := c.replica(3)
	c.await(t, electionBound, "replica 3 applies its promotion", func() bool {
		return slices.Equal(r3.status(t, 0).Voters, []uint64{1, 2, 3})
	})
	if r3.installsOf(0) != 1 {
		t.Fatalf("replica 3 installed %d snapshots, want 1", r3.installsOf(0))
	}
	for _, r := range []*replica{r3, c.replica(2), c.replica(1)} {
		c.restart(r)
		c.settle()
		sameConf(t, r, 0, []uint64{1, 2, 3}, nil)
		if got := commands(r.appliedOf(0)); !slices.Equal(got, want) {
			t.Fatalf("replica %d after its restart holds %q, want %q", r.id, got, want)
		}
	}
	c.awaitLeader(0, electionBound)
	want = append(want, c.proposeMany(0, "restarted", 3)...)
	c.awaitAppliedOn(t, 0, want, electionBound, 1, 2, 3)
}

// A leader compacts its log no further than a follower within MaxLogEntries of its end has
// matched, which can be before the last conf change it applied: the compaction record names
// the configuration current at its own index, not the leader's.
func TestCompactionRecordsTheConfigurationAtItsIndex(t *testing.T) {
	c := newGrowingCluster(t, 4, 1, 28, snapshotBound)
	c.net.Isolate(4)
	l := c.awaitLeader(0, electionBound)
	c.join(t, l, 0, 2)
	c.join(t, l, 0, 3)
	// Right after a compaction the log starts at the applied index; replica 3 cut off a few
	// entries later keeps the next compaction at its Match, inside the log.
	first := l.firstIndex(t, 0)
	for n := 0; l.firstIndex(t, 0) == first; n++ {
		if n > 2*snapshotBound {
			t.Fatal("the leader's log is not compacted")
		}
		c.propose(0, fmt.Sprintf("fill-%d", n))
		c.settle()
	}
	c.proposeMany(0, "before-cut", 2)
	c.net.Isolate(3)
	c.change(t, l, 0, "AddLearner(4)", func(d *Driver) error { return d.AddLearner(0, 4) })
	added := l.status(t, 0).AppliedIndex
	first = l.firstIndex(t, 0)
	for n := 0; l.firstIndex(t, 0) == first; n++ {
		if n > snapshotBound {
			t.Fatal("the leader's log is not compacted again")
		}
		c.propose(0, fmt.Sprintf("after-add-%d", n))
		c.settle()
	}
	storage, err := l.log.Storage(0)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := storage.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	md := snap.GetMetadata()
	if md.GetIndex() >= added {
		t.Fatalf("compaction record at %d, not before the AddLearner(4) at %d: the test's premise failed", md.GetIndex(), added)
	}
	if cs := md.GetConfState(); !slices.Equal(cs.GetVoters(), []uint64{1, 2, 3}) || len(cs.GetLearners()) != 0 {
		t.Fatalf("compaction record at %d names voters %v learners %v, want the configuration there: voters [1 2 3]", md.GetIndex(), cs.GetVoters(), cs.GetLearners())
	}
	sameConf(t, l, 0, []uint64{1, 2, 3}, []uint64{4})
}

// On the silo store's Badger Raft log, a group with nothing persisted opens as on the
// in-memory twin: no configuration, no campaign, and a leader's snapshot is what it waits for.
func TestEmptyGroupOpensOnTheBadgerRaftLog(t *testing.T) {
	store, err := persistence.OpenSiloStore(t.TempDir(), 1, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	groups, err := New(Config{ReplicaID: 2}, store.RaftLog())
	if err != nil {
		t.Fatal(err)
	}
	if err := groups.Open(0, Applied{}); err != nil {
		t.Fatalf("open a group with nothing persisted: %v", err)
	}
	if err := groups.Campaign(0); err == nil {
		t.Fatal("a replica outside the group's configuration campaigned")
	}
	for range 30 {
		groups.Tick()
	}
	if groups.HasReady() {
		t.Fatal("a replica outside the group's configuration has work without a leader")
	}
	st, _ := groups.Status(0)
	if len(st.Voters) != 0 || len(st.Learners) != 0 || st.Leader != 0 || st.AppliedIndex != 0 {
		t.Fatalf("status of an empty group: %+v", st)
	}
}
