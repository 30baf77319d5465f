package replication

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"go.etcd.io/raft/v3"

	"github.com/orreryhq/orrery"
)

// propose proposes command to group at its current leader, failing the test if it refuses.
func (c *cluster) propose(group int, command string) (*replica, Proposal) {
	c.t.Helper()
	l := c.leader(group)
	if l == nil {
		c.t.Fatalf("group %d: no leader to propose to", group)
	}
	p, err := l.driver.Propose(group, "tenant-a", []byte(command))
	if err != nil {
		c.t.Fatalf("group %d: propose %q at replica %d: %v", group, command, l.id, err)
	}
	return l, p
}

func commands(entries []Entry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, string(e.GetCommand()))
	}
	return out
}

func TestLeadersElectedAndEntriesAppliedEverywhereInOrder(t *testing.T) {
	c := newCluster(t, 3, 4, 1)
	c.awaitLeaders(electionBound)
	var props []Proposal
	var proposers []*replica
	for i := range 5 {
		for _, g := range c.groups {
			l, p := c.propose(g, fmt.Sprintf("g%d-cmd%d", g, i))
			props = append(props, p)
			proposers = append(proposers, l)
		}
	}
	c.settle()
	c.ticks(2)
	for _, g := range c.groups {
		want := c.replica(1).appliedOf(g)
		if got := commands(want); !slices.Equal(got, []string{
			fmt.Sprintf("g%d-cmd0", g), fmt.Sprintf("g%d-cmd1", g), fmt.Sprintf("g%d-cmd2", g), fmt.Sprintf("g%d-cmd3", g), fmt.Sprintf("g%d-cmd4", g),
		}) {
			t.Fatalf("group %d applied %q", g, got)
		}
		c.sameApplied(g, want, 1, 2, 3)
	}
	for i, p := range props {
		o, ok := proposers[i].outcomeOf(p)
		if !ok || !o.Committed {
			t.Fatalf("proposal %+v: outcome %+v (settled %v), want committed", p, o, ok)
		}
	}
}

func TestLeaderKilledNewLeaderKeepsCommittedAndOldProposalsAreLost(t *testing.T) {
	c := newCluster(t, 3, 1, 2)
	old := c.awaitLeader(0, electionBound)
	for i := range 5 {
		c.propose(0, fmt.Sprintf("before-%d", i))
	}
	c.settle()
	committed := old.appliedOf(0)
	if len(committed) != 5 {
		t.Fatalf("leader applied %d entries before the kill, want 5", len(committed))
	}
	// Mid-stream: three more proposals, persisted by the old leader, whose messages are lost.
	var lost []Proposal
	for i := range 3 {
		_, p := c.propose(0, fmt.Sprintf("lost-%d", i))
		lost = append(lost, p)
	}
	c.net.Isolate(old.id)
	if _, err := old.driver.RunRound(); err != nil {
		t.Fatal(err)
	}
	old.down = true

	var others []uint64
	for _, r := range c.replicas {
		if r != old {
			others = append(others, r.id)
		}
	}
	newLeader := c.awaitLeader(0, electionBound)
	if newLeader == old {
		t.Fatal("the killed replica is still the leader")
	}
	c.sameApplied(0, committed, others...)
	for i := range 2 {
		c.propose(0, fmt.Sprintf("after-%d", i))
	}
	c.settle()

	// The old leader comes back: it steps down, its uncommitted proposals are settled as lost,
	// and it converges on the new leader's log.
	old.down = false
	c.net.Rejoin(old.id)
	c.ticks(electionBound)
	want := newLeader.appliedOf(0)
	if got := commands(want); !slices.Equal(got, []string{"before-0", "before-1", "before-2", "before-3", "before-4", "after-0", "after-1"}) {
		t.Fatalf("applied %q", got)
	}
	c.sameApplied(0, want, 1, 2, 3)
	for _, p := range lost {
		o, ok := old.outcomeOf(p)
		if !ok || o.Committed {
			t.Fatalf("old leader's proposal %+v: outcome %+v (settled %v), want lost", p, o, ok)
		}
	}
}

func TestCutOffLeaderCommitsNothingAndConvergesAfterHealing(t *testing.T) {
	c := newCluster(t, 3, 1, 3)
	old := c.awaitLeader(0, electionBound)
	c.propose(0, "before")
	c.settle()
	c.net.Isolate(old.id)
	var cutOff []Proposal
	for i := range 3 {
		p, err := old.driver.Propose(0, "tenant-a", fmt.Appendf(nil, "cut-off-%d", i))
		if err != nil {
			t.Fatalf("the cut-off leader does not know yet and accepts: %v", err)
		}
		cutOff = append(cutOff, p)
	}
	// Both sides keep ticking: the majority elects, the cut-off leader steps down (CheckQuorum).
	var newLeader *replica
	for range electionBound {
		c.tick()
		for _, r := range c.replicas {
			if st, _ := r.driver.Status(0); r != old && st.CanPropose {
				newLeader = r
			}
		}
		if st, _ := old.driver.Status(0); newLeader != nil && !st.CanPropose {
			break
		}
	}
	if newLeader == nil {
		t.Fatal("the majority elected no leader")
	}
	if st, _ := old.driver.Status(0); st.CanPropose || old.groups.groups[0].node.BasicStatus().RaftState == raft.StateLeader {
		t.Fatal("the cut-off leader still leads")
	}
	if _, err := old.driver.Propose(0, "tenant-a", []byte("refused")); !errors.Is(err, ErrNotLeader) || !errors.Is(err, orrery.ErrUnavailable) {
		t.Fatalf("propose on the deposed leader: %v, want Unavailable (not leader)", err)
	}
	for _, p := range cutOff {
		if o, ok := old.outcomeOf(p); !ok || o.Committed {
			t.Fatalf("cut-off proposal %+v: outcome %+v (settled %v), want lost", p, o, ok)
		}
	}
	_, served := newLeader.driver.Propose(0, "tenant-a", []byte("majority"))
	if served != nil {
		t.Fatal(served)
	}
	c.settle()

	c.net.Rejoin(old.id)
	c.ticks(electionBound)
	want := []string{"before", "majority"}
	for _, r := range c.replicas {
		if got := commands(r.appliedOf(0)); !slices.Equal(got, want) {
			t.Fatalf("replica %d applied %q, want %q", r.id, got, want)
		}
	}
	c.sameApplied(0, newLeader.appliedOf(0), 1, 2, 3)
	stOld, _ := old.driver.Status(0)
	stNew, _ := newLeader.driver.Status(0)
	if stOld.Leader != stNew.Leader || stOld.Term != stNew.Term {
		t.Fatalf("after healing the old leader sees leader %d term %d, the others leader %d term %d", stOld.Leader, stOld.Term, stNew.Leader, stNew.Term)
	}
}

func TestLoggedTimeNeverDecreasesAcrossLeaderChange(t *testing.T) {
	c := newCluster(t, 3, 1, 4)
	old := c.awaitLeader(0, electionBound)
	// The first leader's clock runs 10 minutes ahead of the others'.
	old.clock.Advance(10 * time.Minute)
	for i := range 3 {
		c.propose(0, fmt.Sprintf("fast-%d", i))
	}
	c.settle()
	fastStamp := old.appliedOf(0)[2].GetLoggedTimeUnixMicros()
	c.net.Isolate(old.id)
	old.down = true

	// Step the others finely, so the instant between winning the election and applying the
	// new term's empty entry is seen: a leader there must refuse to stamp.
	refused := false
	var newLeader *replica
	for range electionBound * 10 {
		for _, r := range c.replicas {
			if !r.down {
				r.clock.Advance(tickInterval)
				r.driver.Tick()
			}
		}
		for range 10 {
			for _, r := range c.replicas {
				if r.down {
					continue
				}
				if r.groups.groups[0].node.BasicStatus().RaftState == raft.StateLeader {
					st, _ := r.driver.Status(0)
					if !st.CanPropose {
						_, err := r.driver.Propose(0, "tenant-a", []byte("too-early"))
						if !errors.Is(err, ErrNotCaughtUp) || !errors.Is(err, orrery.ErrUnavailable) {
							t.Fatalf("new leader before applying its term: %v, want Unavailable (not caught up)", err)
						}
						refused = true
					} else {
						newLeader = r
					}
				}
				if _, err := r.driver.RunRound(); err != nil {
					t.Fatal(err)
				}
			}
			c.net.Deliver(c.receiver)
		}
		if newLeader != nil {
			break
		}
	}
	if newLeader == nil || !refused {
		t.Fatalf("new leader %v, refused before catching up %v", newLeader != nil, refused)
	}
	behind := newLeader.clock.Now().UnixMicro()
	if behind >= fastStamp-int64(9*time.Minute/time.Microsecond) {
		t.Fatalf("the new leader's clock (%d) is not far behind the old stamps (%d)", behind, fastStamp)
	}
	_, p := c.propose(0, "slow-0")
	if p.LoggedTimeMicros != fastStamp+1 {
		t.Fatalf("new leader stamped %d, want the last applied %d + 1", p.LoggedTimeMicros, fastStamp)
	}
	c.propose(0, "slow-1")
	c.settle()
	applied := newLeader.appliedOf(0)
	if got := commands(applied); !slices.Equal(got, []string{"fast-0", "fast-1", "fast-2", "slow-0", "slow-1"}) {
		t.Fatalf("applied %q", got)
	}
	for i := 1; i < len(applied); i++ {
		if applied[i].GetLoggedTimeUnixMicros() <= applied[i-1].GetLoggedTimeUnixMicros() {
			t.Fatalf("logged time goes from %d to %d at entry %d", applied[i-1].GetLoggedTimeUnixMicros(), applied[i].GetLoggedTimeUnixMicros(), i)
		}
	}
	if st, _ := newLeader.driver.Status(0); st.AppliedLoggedTimeMicros != applied[len(applied)-1].GetLoggedTimeUnixMicros() {
		t.Fatalf("status logged time %d, last applied %d", st.AppliedLoggedTimeMicros, applied[len(applied)-1].GetLoggedTimeUnixMicros())
	}
}

func TestOneRoundPersistsEveryGroupOnceBeforeSending(t *testing.T) {
	c := newCluster(t, 3, 4, 5)
	leaders := c.awaitLeaders(electionBound)
	c.settle()
	for _, g := range c.groups {
		c.propose(g, fmt.Sprintf("g%d", g))
	}
	// Every leader's round persists its groups' new entries at once, then sends the appends;
	// every follower's next round persists the appends of all the groups it follows at once.
	for _, phase := range []string{"leaders", "followers"} {
		if phase == "followers" {
			c.net.Deliver(c.receiver)
		}
		for _, r := range c.replicas {
			wantGroups := 0
			for _, g := range c.groups {
				if (leaders[g] == r) == (phase == "leaders") {
					wantGroups++
				}
			}
			if wantGroups == 0 {
				continue
			}
			r.mu.Lock()
			r.events = nil
			r.mu.Unlock()
			if did, err := r.driver.RunRound(); !did || err != nil {
				t.Fatalf("%s: replica %d ran no round: %v", phase, r.id, err)
			}
			r.mu.Lock()
			events := slices.DeleteFunc(slices.Clone(r.events), func(e event) bool { return e.kind == "apply" })
			r.mu.Unlock()
			if len(events) < 3 || events[0] != (event{kind: "persist-begin", writes: wantGroups}) ||
				events[1] != (event{kind: "persist-end", writes: wantGroups}) {
				t.Fatalf("%s: replica %d: round events %+v, want one Persist of %d groups first", phase, r.id, events, wantGroups)
			}
			for _, e := range events[2:] {
				if e.kind != "send" {
					t.Fatalf("%s: replica %d: round events %+v, want one Persist then sends", phase, r.id, events)
				}
			}
		}
	}
}

// An entry persisted in one round and committed in the next applies before that next round
// persists its own new entries: its command waits for the sync that made it durable, not for
// an unrelated one after it.
func TestACommittedEntryAppliesBeforeTheNextRoundPersists(t *testing.T) {
	c := newCluster(t, 1, 1, 11)
	c.awaitLeaders(electionBound)
	c.settle()
	r := c.replica(1)
	run := func(what string) []event {
		t.Helper()
		r.mu.Lock()
		r.events = nil
		r.mu.Unlock()
		if did, err := r.driver.RunRound(); !did || err != nil {
			t.Fatalf("%s: no round: %v", what, err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		return slices.Clone(r.events)
	}
	if _, err := r.driver.Propose(0, "tenant-a", []byte("first")); err != nil {
		t.Fatal(err)
	}
	if events := run("the first entry's round"); len(events) != 2 || events[0].kind != "persist-begin" {
		t.Fatalf("the first entry's round: %+v, want it persisted and nothing applied", events)
	}
	if _, err := r.driver.Propose(0, "tenant-a", []byte("second")); err != nil {
		t.Fatal(err)
	}
	events := run("the second entry's round")
	want := []event{{kind: "apply", writes: 1}, {kind: "persist-begin", writes: 1}, {kind: "persist-end", writes: 1}}
	if !slices.Equal(events, want) {
		t.Fatalf("the round that commits the first entry and appends the second: %+v, want %+v", events, want)
	}
	if got := commands(r.appliedOf(0)); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("applied %q", got)
	}
}

// A replica restarted from its persisted log and its applied state rejoins without applying
// anything twice, and applies what committed while it was down.
func TestRestartedReplicaResumesFromItsAppliedIndex(t *testing.T) {
	c := newCluster(t, 3, 2, 7)
	c.awaitLeaders(electionBound)
	for _, g := range c.groups {
		c.propose(g, fmt.Sprintf("g%d-before", g))
	}
	c.settle()
	victim := c.replica(3)
	if l := c.leader(0); l == victim {
		victim = c.replica(2)
	}
	victim.down = true
	c.net.Isolate(victim.id)
	c.awaitLeaders(electionBound)
	for _, g := range c.groups {
		c.propose(g, fmt.Sprintf("g%d-while-down", g))
	}
	c.settle()
	victim.mu.Lock()
	applied := maps.Clone(victim.index)
	victim.mu.Unlock()
	c.open(victim, applied)
	victim.down = false
	c.net.Rejoin(victim.id)
	c.ticks(electionBound)
	for _, g := range c.groups {
		want := []string{fmt.Sprintf("g%d-before", g), fmt.Sprintf("g%d-while-down", g)}
		for _, r := range c.replicas {
			if got := commands(r.appliedOf(g)); !slices.Equal(got, want) {
				t.Fatalf("group %d replica %d applied %q, want %q", g, r.id, got, want)
			}
		}
		if st, _ := victim.driver.Status(g); st.AppliedLoggedTimeMicros != victim.appliedOf(g)[1].GetLoggedTimeUnixMicros() {
			t.Fatalf("group %d: restarted status logged time %d", g, st.AppliedLoggedTimeMicros)
		}
	}
}
