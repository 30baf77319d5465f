package replication

import (
	"bytes"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/persistence"
)

// tickInterval is what one tick stands for on the replicas' fake clocks.
const tickInterval = 10 * time.Millisecond

// electionBound is the number of ticks within which a group that can elect has a leader that
// can propose: two randomized election timeouts (each below 2×ElectionTicks, plus a pre-vote
// round) and slack for the new leader's empty entry to commit.
const electionBound = 6 * 10

// event is one step of a replica's round, in the order it happened.
type event struct {
	kind   string // "persist-begin", "persist-end", "send", "apply"
	writes int    // groups in the Persist call; entries handed to Apply
}

// recordingLog is a RaftLog that counts Persist calls and records when they begin and end.
// crash, when set and true for a Persist's writes, makes it fail as a crash before writing.
type recordingLog struct {
	*persistence.MemoryRaftLog
	events *[]event
	mu     *sync.Mutex
	crash  func(writes []persistence.RaftWrite) bool
}

func (l recordingLog) Persist(writes []persistence.RaftWrite) error {
	if l.crash != nil && l.crash(writes) {
		return errCrashed
	}
	l.record(event{kind: "persist-begin", writes: len(writes)})
	err := l.MemoryRaftLog.Persist(writes)
	l.record(event{kind: "persist-end", writes: len(writes)})
	return err
}

func (l recordingLog) record(e event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.events = append(*l.events, e)
}

// recordingTransport records each Send before handing it to the network.
type recordingTransport struct {
	Transport
	log recordingLog
}

func (t recordingTransport) Send(to uint64, msgs []Message) {
	t.log.record(event{kind: "send"})
	t.Transport.Send(to, msgs)
}

// replica is one silo of a test cluster: its engine, driver, log and state machine (its
// StateMachine methods are in statemachine_test.go).
type replica struct {
	id     uint64
	clock  *clock.Fake
	log    *persistence.MemoryRaftLog
	groups *Groups
	driver *Driver
	down   bool // paused: neither ticked, stepped nor run
	// chunkBytes bounds the chunks of its state snapshots.
	chunkBytes int
	// deferApply makes Apply queue the entries for finishApplies to record; deferGroups does
	// for the groups it holds only.
	deferApply  bool
	deferGroups map[int]bool

	mu       sync.Mutex
	events   []event
	applied  map[int][]Entry // each group's state: its applied entries, by index
	index    map[int]Applied // what a restart hands Open
	outcomes []Outcome
	deferred []deferredApply // handed to Apply, not yet recorded (deferApply)
	installs map[int]int     // snapshots installed, per group
	// Crash points a test arms: Install crashes after reading crashInstallAfter chunks (when
	// not negative); the Persist of a round that restores a snapshot crashes when
	// crashBeforeRestorePersist. crashed is set once one fired: the harness then stops running
	// the replica until restart.
	crashInstallAfter         int
	crashBeforeRestorePersist bool
	crashed                   bool
}

func (r *replica) outcomeOf(p Proposal) (Outcome, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.outcomes {
		if o.Proposal == p {
			return o, true
		}
	}
	return Outcome{}, false
}

// failer is what the harness needs of a *testing.T or a *rapid.T.
type failer interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// cluster is several replicas hosting the same groups, connected by a Network, stepped by the
// test: no goroutine of its own, no real time.
type cluster struct {
	t        failer
	net      *Network
	size     int
	replicas []*replica
	groups   []int
	// maxLogEntries is the engines' MaxLogEntries (0: the default); chunkBytes bounds the
	// chunks of the replicas' state snapshots.
	maxLogEntries int
	chunkBytes    int

	mu                                  sync.Mutex
	snapshotsFailed, snapshotsInstalled int // outcomes reported to senders
}

// newCluster starts n replicas (ids 1..n) hosting groups 0..groups-1, each bootstrapped.
func newCluster(t failer, n, groups int, seed uint64) *cluster {
	return newClusterCompacting(t, n, groups, seed, 0)
}

// newClusterCompacting is newCluster with the engines' MaxLogEntries set to maxLogEntries.
func newClusterCompacting(t failer, n, groups int, seed uint64, maxLogEntries int) *cluster {
	c := &cluster{t: t, net: NewNetwork(seed), size: n, maxLogEntries: maxLogEntries, chunkBytes: 200}
	var peers []uint64
	for i := range n {
		peers = append(peers, uint64(i+1))
	}
	for g := range groups {
		c.groups = append(c.groups, g)
	}
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, id := range peers {
		r := &replica{id: id, clock: clock.NewFake(start), chunkBytes: c.chunkBytes}
		c.wipe(r, peers)
		c.replicas = append(c.replicas, r)
	}
	return c
}

// newGrowingCluster starts n replicas (ids 1..n) hosting groups 0..groups-1, as a cluster's
// founding silo and the silos that join it: replica 1 bootstraps every group with itself as
// the only voter, the others open them with nothing persisted.
func newGrowingCluster(t failer, n, groups int, seed uint64, maxLogEntries int) *cluster {
	c := &cluster{t: t, net: NewNetwork(seed), size: n, maxLogEntries: maxLogEntries, chunkBytes: 200}
	for g := range groups {
		c.groups = append(c.groups, g)
	}
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		r := &replica{id: uint64(i + 1), clock: clock.NewFake(start), chunkBytes: c.chunkBytes}
		var peers []uint64
		if r.id == 1 {
			peers = []uint64{1}
		}
		c.wipe(r, peers)
		c.replicas = append(c.replicas, r)
	}
	return c
}

// wipe gives r an empty disk (a log bootstrapped with peers, or nothing when peers is empty;
// an empty state) and opens it.
func (c *cluster) wipe(r *replica, peers []uint64) {
	r.mu.Lock()
	r.log = persistence.NewMemoryRaftLog()
	r.applied, r.index, r.installs = map[int][]Entry{}, map[int]Applied{}, map[int]int{}
	r.crashInstallAfter = -1
	r.mu.Unlock()
	if len(peers) > 0 {
		if err := Bootstrap(r.log, peers, c.groups); err != nil {
			c.t.Fatal(err)
		}
	}
	c.open(r, map[int]Applied{})
}

// restart reopens r from what survives a crash: its log and its state machine's state.
func (c *cluster) restart(r *replica) {
	r.mu.Lock()
	applied := maps.Clone(r.index)
	r.crashed = false
	r.mu.Unlock()
	c.net.Restarted(r.id)
	c.open(r, applied)
	r.down = false
}

// receiver is what the network delivers to: a live replica's driver, counting the snapshot
// outcomes it is told.
func (c *cluster) receiver(to uint64) Receiver {
	if r := c.replica(to); !r.down {
		return countingReceiver{r.driver, c}
	}
	return nil
}

// countingReceiver counts the snapshot outcomes reported to a driver.
type countingReceiver struct {
	*Driver
	c *cluster
}

func (r countingReceiver) ReportSnapshot(group int, to uint64, err error) {
	r.c.mu.Lock()
	if err != nil {
		r.c.snapshotsFailed++
	} else {
		r.c.snapshotsInstalled++
	}
	r.c.mu.Unlock()
	r.Driver.ReportSnapshot(group, to, err)
}

// open gives r a fresh engine and driver on its log, as a restart would.
func (c *cluster) open(r *replica, applied map[int]Applied) {
	groups, err := New(Config{ReplicaID: r.id, MaxLogEntries: c.maxLogEntries}, r.log)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, g := range c.groups {
		if err := groups.Open(g, applied[g]); err != nil {
			c.t.Fatal(err)
		}
	}
	rl := recordingLog{MemoryRaftLog: r.log, events: &r.events, mu: &r.mu, crash: r.crashPersist}
	r.groups = groups
	r.driver = NewDriver(DriverConfig{
		Groups:       groups,
		Log:          rl,
		Transport:    recordingTransport{Transport: c.net.Transport(r.id), log: rl},
		StateMachine: r,
		Clock:        r.clock,
		TickInterval: tickInterval,
	})
}

func (c *cluster) replica(id uint64) *replica { return c.replicas[id-1] }

// tick advances every live replica's clock and Raft by one tick, then settles.
func (c *cluster) tick() {
	for _, r := range c.replicas {
		if !r.down {
			r.clock.Advance(tickInterval)
			r.driver.Tick()
		}
	}
	c.settle()
}

// ticks ticks n times.
func (c *cluster) ticks(n int) {
	for range n {
		c.tick()
	}
}

// settle runs rounds and delivers messages until nothing moves (or a bound of steps passes,
// as delayed messages may stay in flight).
func (c *cluster) settle() {
	for range 50 {
		moved := false
		for _, r := range c.replicas {
			if r.down {
				continue
			}
			for {
				if r.finishApplies() {
					moved = true
				}
				did, err := r.driver.RunRound()
				if err != nil && r.isCrashed() {
					r.down = true
					break
				}
				if err != nil {
					c.t.Fatalf("replica %d: %v", r.id, err)
				}
				if !did {
					break
				}
				moved = true
			}
		}
		delivered := c.net.Deliver(c.receiver)
		if !moved && delivered == 0 && c.net.InFlight() == 0 {
			return
		}
	}
}

// leader returns the live replica that can propose to group, if exactly one can.
func (c *cluster) leader(group int) *replica {
	var found *replica
	for _, r := range c.replicas {
		if r.down {
			continue
		}
		if st, _ := r.driver.Status(group); st.CanPropose {
			if found != nil {
				return nil
			}
			found = r
		}
	}
	return found
}

// awaitLeader ticks until group has a leader that can propose, at most bound ticks.
func (c *cluster) awaitLeader(group int, bound int) *replica {
	c.t.Helper()
	for range bound {
		if l := c.leader(group); l != nil {
			return l
		}
		c.tick()
	}
	if l := c.leader(group); l != nil {
		return l
	}
	c.t.Fatalf("group %d: no leader within %d ticks", group, bound)
	return nil
}

// awaitLeaders ticks until every group has a leader, within bound ticks in all.
func (c *cluster) awaitLeaders(bound int) map[int]*replica {
	c.t.Helper()
	leaders := map[int]*replica{}
	for range bound + 1 {
		for _, g := range c.groups {
			if l := c.leader(g); l != nil {
				leaders[g] = l
			}
		}
		if len(leaders) == len(c.groups) {
			return leaders
		}
		clear(leaders)
		c.tick()
	}
	c.t.Fatalf("not every group has a leader within %d ticks", bound)
	return nil
}

// sameApplied fails unless every listed replica applied exactly want to group.
func (c *cluster) sameApplied(group int, want []Entry, ids ...uint64) {
	c.t.Helper()
	for _, id := range ids {
		got := c.replica(id).appliedOf(group)
		if err := samePrefix(got, want); err != nil || len(got) != len(want) {
			c.t.Fatalf("group %d replica %d applied %d entries, want %d: %v", group, id, len(got), len(want), err)
		}
	}
}

// samePrefix reports how got differs from a prefix of want.
func samePrefix(got, want []Entry) error {
	if len(got) > len(want) {
		return fmt.Errorf("%d entries, more than the %d of the common sequence", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Index != w.Index || g.Term != w.Term || g.GetLoggedTimeUnixMicros() != w.GetLoggedTimeUnixMicros() ||
			g.GetPrincipal() != w.GetPrincipal() || !bytes.Equal(g.GetCommand(), w.GetCommand()) {
			return fmt.Errorf("entry %d: got index %d term %d %q, want index %d term %d %q", i, g.Index, g.Term, g.GetCommand(), w.Index, w.Term, w.GetCommand())
		}
	}
	return nil
}
