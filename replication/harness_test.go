package replication

import (
	"bytes"
	"fmt"
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
	kind   string // "persist-begin", "persist-end", "send"
	writes int    // groups in the Persist call
}

// recordingLog is a RaftLog that counts Persist calls and records when they begin and end.
type recordingLog struct {
	*persistence.MemoryRaftLog
	events *[]event
	mu     *sync.Mutex
}

func (l recordingLog) Persist(writes []persistence.RaftWrite) error {
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

// replica is one silo of a test cluster: its engine, driver, log and what it applied.
type replica struct {
	id     uint64
	clock  *clock.Fake
	log    *persistence.MemoryRaftLog
	groups *Groups
	driver *Driver
	down   bool // paused: neither ticked, stepped nor run

	mu       sync.Mutex
	events   []event
	applied  map[int][]Entry
	index    map[int]Applied // what a restart hands Open
	outcomes []Outcome
}

// Apply implements Applier: it records the entries.
func (r *replica) Apply(c Committed) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied[c.Group] = append(r.applied[c.Group], c.Entries...)
	a := r.index[c.Group]
	a.Index = c.AppliedIndex
	if n := len(c.Entries); n > 0 {
		a.LoggedTimeMicros = c.Entries[n-1].GetLoggedTimeUnixMicros()
	}
	r.index[c.Group] = a
	return nil
}

// Settle implements Applier: it records the outcomes.
func (r *replica) Settle(outcomes []Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes = append(r.outcomes, outcomes...)
}

func (r *replica) appliedOf(group int) []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Entry(nil), r.applied[group]...)
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
	replicas []*replica
	groups   []int
}

// newCluster starts n replicas (ids 1..n) hosting groups 0..groups-1, each bootstrapped.
func newCluster(t failer, n, groups int, seed uint64) *cluster {
	c := &cluster{t: t, net: NewNetwork(seed)}
	var peers []uint64
	for i := range n {
		peers = append(peers, uint64(i+1))
	}
	for g := range groups {
		c.groups = append(c.groups, g)
	}
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, id := range peers {
		r := &replica{id: id, clock: clock.NewFake(start), log: persistence.NewMemoryRaftLog(), applied: map[int][]Entry{}, index: map[int]Applied{}}
		if err := Bootstrap(r.log, peers, c.groups); err != nil {
			t.Fatal(err)
		}
		c.open(r, map[int]Applied{})
		c.replicas = append(c.replicas, r)
	}
	return c
}

// open gives r a fresh engine and driver on its log, as a restart would.
func (c *cluster) open(r *replica, applied map[int]Applied) {
	groups, err := New(Config{ReplicaID: r.id}, r.log)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, g := range c.groups {
		if err := groups.Open(g, applied[g]); err != nil {
			c.t.Fatal(err)
		}
	}
	rl := recordingLog{MemoryRaftLog: r.log, events: &r.events, mu: &r.mu}
	r.groups = groups
	r.driver = NewDriver(DriverConfig{
		Groups:       groups,
		Log:          rl,
		Transport:    recordingTransport{Transport: c.net.Transport(r.id), log: rl},
		Applier:      r,
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
				did, err := r.driver.RunRound()
				if err != nil {
					c.t.Fatalf("replica %d: %v", r.id, err)
				}
				if !did {
					break
				}
				moved = true
			}
		}
		delivered := c.net.Deliver(func(to uint64, msgs []Message) {
			if r := c.replica(to); !r.down {
				r.driver.Receive(msgs)
			}
		})
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
