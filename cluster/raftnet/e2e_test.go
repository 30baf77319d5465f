package raftnet

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orreryhq/orrery/internal/testkit"
	"github.com/orreryhq/orrery/persistence"
	"github.com/orreryhq/orrery/replication"
)

// memState is an in-memory StateMachine: each group's applied commands, in order.
type memState struct {
	mu       sync.Mutex
	applied  map[int][]string
	index    map[int]uint64
	installs int
}

func newMemState() *memState { return &memState{applied: map[int][]string{}, index: map[int]uint64{}} }

func (s *memState) Apply(c replication.Committed, applied func(error)) error {
	s.mu.Lock()
	for _, e := range c.Entries {
		s.applied[c.Group] = append(s.applied[c.Group], string(e.GetCommand()))
	}
	s.index[c.Group] = c.AppliedIndex
	s.mu.Unlock()
	applied(nil)
	return nil
}

func (s *memState) Settle(outcomes []replication.Outcome) {}

// Snapshot reads the group's commands in chunks of three.
func (s *memState) Snapshot(group int) (replication.SnapshotReader, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &commandReader{commands: slices.Clone(s.applied[group]), index: s.index[group]}, nil
}

func (s *memState) Install(group int, meta replication.SnapshotMeta, chunks replication.Chunks) error {
	var staged []string
	for {
		chunk, err := chunks.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("install group %d: %w", group, err)
		}
		staged = append(staged, strings.Split(string(chunk), "\n")...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied[group], s.index[group] = staged, meta.Index
	s.installs++
	return nil
}

func (s *memState) commands(group int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.applied[group])
}

func (s *memState) installed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.installs
}

// commandReader reads commands in chunks of three, newline-separated.
type commandReader struct {
	commands []string
	index    uint64
}

func (r *commandReader) Next() ([]byte, error) {
	if len(r.commands) == 0 {
		return nil, io.EOF
	}
	n := min(3, len(r.commands))
	chunk := strings.Join(r.commands[:n], "\n")
	r.commands = r.commands[n:]
	return []byte(chunk), nil
}

func (r *commandReader) AppliedIndex() uint64 { return r.index }
func (r *commandReader) Close() error         { return nil }

// raftSilo is a silo running a replication.Driver over its Transport.
type raftSilo struct {
	*silo
	driver *replication.Driver
	state  *memState
	log    *persistence.MemoryRaftLog
}

// Three drivers on three actor systems, over the transport, elect leaders and commit; a
// leader cut off is replaced; a follower cut off long enough to fall behind the leader's
// compacted log is caught up by a snapshot streamed over the transport once healed.
func TestIntegrationDriversReplicateOverTheTransport(t *testing.T) {
	n := newNet(t)
	ids, groups := []uint64{1, 2, 3}, []int{0, 1}
	var silos []*raftSilo
	for _, id := range ids {
		log := persistence.NewMemoryRaftLog()
		s := &raftSilo{silo: n.start(id, Config{StallTimeout: 5 * time.Second}), state: newMemState(), log: log}
		if err := replication.Bootstrap(log, ids, groups); err != nil {
			t.Fatal(err)
		}
		engine, err := replication.New(replication.Config{ReplicaID: id, MaxLogEntries: 20}, log)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			if err := engine.Open(g, replication.Applied{}); err != nil {
				t.Fatal(err)
			}
		}
		s.driver = replication.NewDriver(replication.DriverConfig{
			Groups: engine, Log: log, Transport: s.transport, StateMachine: s.state, TickInterval: 10 * time.Millisecond,
		})
		s.transport.SetReceiver(s.driver)
		s.driver.Start()
		t.Cleanup(func() {
			if err := s.driver.Stop(); err != nil {
				t.Errorf("replica %d: %v", id, err)
			}
		})
		silos = append(silos, s)
	}
	// leader returns the one silo, not among excluded, that can propose to group g.
	leader := func(g int, excluded ...uint64) *raftSilo {
		var found *raftSilo
		for _, s := range silos {
			if st, _ := s.driver.Status(g); st.CanPropose && !slices.Contains(excluded, s.id) {
				if found != nil {
					return nil
				}
				found = s
			}
		}
		return found
	}
	var proposed [2][]string
	// propose proposes count commands to group g through its leader (not among excluded),
	// and waits until every silo in among has applied all proposed so far.
	propose := func(g, count int, among []*raftSilo, excluded ...uint64) {
		t.Helper()
		for range count {
			cmd := fmt.Sprintf("g%d-%d", g, len(proposed[g]))
			testkit.Eventually(t, 30*time.Second, fmt.Sprintf("group %d to take %s", g, cmd), func() bool {
				l := leader(g, excluded...)
				if l == nil {
					return false
				}
				_, err := l.driver.Propose(g, "tenant", []byte(cmd))
				return err == nil
			})
			proposed[g] = append(proposed[g], cmd)
		}
		for _, s := range among {
			testkit.Eventually(t, 30*time.Second, fmt.Sprintf("replica %d to apply group %d", s.id, g), func() bool {
				return slices.Equal(s.state.commands(g), proposed[g])
			})
		}
	}
	for _, g := range groups {
		propose(g, 10, silos)
	}

	// Cut group 0's leader off: the others elect one of themselves and commit without it.
	old := leader(0)
	if old == nil {
		t.Fatal("group 0 has no leader")
	}
	old.faults.Cut(old.id)
	var others []*raftSilo
	for _, s := range silos {
		if s != old {
			others = append(others, s)
		}
	}
	propose(0, 5, others, old.id)
	if l := leader(0, old.id); l == nil || l == old {
		t.Fatal("no new leader for group 0")
	}
	old.faults.Heal(old.id)
	testkit.Eventually(t, 30*time.Second, "the old leader to catch up", func() bool {
		return slices.Equal(old.state.commands(0), proposed[0])
	})

	// Cut a follower off while the leader commits beyond its log's bound: healed, the
	// follower is caught up by a snapshot over the transport.
	lead := leader(0)
	if lead == nil {
		t.Fatal("group 0 has no leader")
	}
	var behind *raftSilo
	for _, s := range silos {
		if s != lead {
			behind = s
			break
		}
	}
	behind.faults.Cut(behind.id)
	var rest []*raftSilo
	for _, s := range silos {
		if s != behind {
			rest = append(rest, s)
		}
	}
	propose(0, 60, rest, behind.id)
	// The leader compacts its log in a round after the applies: heal only once it has
	// compacted past the follower's log, so that nothing but a snapshot can catch it up.
	testkit.Eventually(t, 30*time.Second, "the leader to compact its log past the follower's", func() bool {
		l := leader(0, behind.id)
		if l == nil {
			return false
		}
		return firstIndex(t, l.log, 0) > lastIndex(t, behind.log, 0)+1
	})
	behind.faults.Heal(behind.id)
	testkit.Eventually(t, 60*time.Second, "the follower cut off to catch up", func() bool {
		return slices.Equal(behind.state.commands(0), proposed[0])
	})
	if behind.state.installed() == 0 {
		t.Fatalf("replica %d caught up without a snapshot", behind.id)
	}
	for _, s := range silos {
		st := s.transport.Stats()
		t.Logf("replica %d: %d batches, %d messages sent, %d received, %d dropped, %d faulted", s.id, st.Batches, st.Messages, st.Received, st.Dropped, st.Faulted)
	}
}

// firstIndex is the first index of group's log in log.
func firstIndex(t *testing.T, log *persistence.MemoryRaftLog, group int) uint64 {
	t.Helper()
	st, err := log.Storage(group)
	if err != nil {
		t.Fatal(err)
	}
	i, err := st.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// lastIndex is the last index of group's log in log.
func lastIndex(t *testing.T, log *persistence.MemoryRaftLog, group int) uint64 {
	t.Helper()
	st, err := log.Storage(group)
	if err != nil {
		t.Fatal(err)
	}
	i, err := st.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	return i
}
