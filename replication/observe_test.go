package replication

import (
	"sync"
	"testing"
	"time"

	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/persistence"
)

// slowLog makes every Persist take persistTook on its replica's fake clock.
type slowLog struct {
	persistence.RaftLog
	clock       *clock.Fake
	persistTook time.Duration
}

func (l slowLog) Persist(writes []persistence.RaftWrite) error {
	l.clock.Advance(l.persistTook)
	return l.RaftLog.Persist(writes)
}

// ObserveRounds hands the observer each round's Persist time, the entries it persisted and
// those it committed, as the driver's clock measured them; after ObserveRounds(nil) it hears
// nothing.
func TestObserveRoundsReportsPersistAndCommits(t *testing.T) {
	c := newCluster(t, 3, 1, 41)
	l := c.awaitLeader(0, electionBound)
	const persistTook = 7 * time.Millisecond
	l.driver.cfg.Log = slowLog{RaftLog: l.driver.cfg.Log, clock: l.clock, persistTook: persistTook}
	var mu sync.Mutex
	var rounds []RoundTiming
	l.driver.ObserveRounds(func(rt RoundTiming) {
		mu.Lock()
		rounds = append(rounds, rt)
		mu.Unlock()
	})
	c.proposeMany(0, "observed", 4)
	mu.Lock()
	var persisted, committed int
	for _, rt := range rounds {
		if rt.PersistedEntries > 0 && rt.Persist != persistTook {
			t.Errorf("a round persisting %d entries took %v to persist, want %v", rt.PersistedEntries, rt.Persist, persistTook)
		}
		if rt.Duration < rt.Persist {
			t.Errorf("round of %v shorter than its persist of %v", rt.Duration, rt.Persist)
		}
		persisted += rt.PersistedEntries
		committed += rt.Committed
	}
	seen := len(rounds)
	mu.Unlock()
	if persisted != 4 || committed != 4 {
		t.Fatalf("rounds persisted %d and committed %d entries, want 4 and 4 (%d rounds)", persisted, committed, seen)
	}
	l.driver.ObserveRounds(nil)
	c.proposeMany(0, "unobserved", 2)
	mu.Lock()
	defer mu.Unlock()
	if len(rounds) != seen {
		t.Fatalf("the observer heard %d rounds after ObserveRounds(nil)", len(rounds)-seen)
	}
}

// Status counts the leader's pending proposals until a round settles them, reports the
// commit index, and counts each replica's leadership transitions: one for the first leader,
// two once it handed the leadership over, one for its successor.
func TestStatusReportsPendingCommitAndLeaderTransitions(t *testing.T) {
	c := newCluster(t, 3, 1, 42)
	l := c.awaitLeader(0, electionBound)
	if got := l.status(t, 0).LeaderTransitions; got != 1 {
		t.Fatalf("the first leader counts %d transitions, want 1", got)
	}
	c.propose(0, "pending-1")
	c.propose(0, "pending-2")
	if got := l.status(t, 0).PendingProposals; got != 2 {
		t.Fatalf("pending proposals before a round: %d, want 2", got)
	}
	c.settle()
	st := l.status(t, 0)
	if st.PendingProposals != 0 {
		t.Fatalf("pending proposals after the rounds: %d, want 0", st.PendingProposals)
	}
	if st.CommitIndex < st.AppliedIndex || st.CommitIndex == 0 {
		t.Fatalf("commit index %d, applied index %d", st.CommitIndex, st.AppliedIndex)
	}
	var next *replica
	for _, r := range c.replicas {
		if r != l {
			next = r
			break
		}
	}
	before := next.status(t, 0).LeaderTransitions
	if err := l.driver.TransferLeadership(0, next.id); err != nil {
		t.Fatal(err)
	}
	c.await(t, electionBound, "the leadership moved", func() bool { return c.leader(0) == next })
	if got := l.status(t, 0).LeaderTransitions; got != 2 {
		t.Fatalf("the deposed leader counts %d transitions, want 2", got)
	}
	if got := next.status(t, 0).LeaderTransitions; got != before+1 {
		t.Fatalf("the new leader counts %d transitions, want %d", got, before+1)
	}
}
