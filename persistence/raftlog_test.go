package persistence

import (
	"errors"
	"fmt"
	"math"
	"os"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// raftLogImpl opens an empty RaftLog of at least 4 groups; reopen, nil where the log does not
// outlive the process, closes it and opens it again on the same storage.
type raftLogImpl struct {
	name string
	open func(t *testing.T) (log RaftLog, reopen func() RaftLog)
}

var raftLogImpls = []raftLogImpl{
	{"memory", func(*testing.T) (RaftLog, func() RaftLog) { return NewMemoryRaftLog(), nil }},
	{"badger", func(t *testing.T) (RaftLog, func() RaftLog) {
		dir := t.TempDir()
		s := openSiloStore(t, dir, 4)
		return s.RaftLog(), func() RaftLog {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openSiloStore(t, dir, 4)
			return s.RaftLog()
		}
	}},
}

// openSiloStore opens a silo store in dir and closes it when the test ends.
func openSiloStore(t testing.TB, dir string, partitions int) *SiloStore {
	t.Helper()
	s, err := OpenSiloStore(dir, partitions, quietOptions())
	if err != nil {
		t.Fatalf("OpenSiloStore(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// entries are entries from..to (inclusive) of term, with 100 bytes of data naming them.
func entries(from, to, term uint64) []*raftpb.Entry {
	var ents []*raftpb.Entry
	for i := from; i <= to; i++ {
		data := fmt.Appendf(nil, "entry %d of term %d ", i, term)
		for len(data) < 100 {
			data = append(data, 'x')
		}
		ents = append(ents, &raftpb.Entry{Index: new(i), Term: new(term), Type: raftpb.EntryType_EntryNormal.Enum(), Data: data})
	}
	return ents
}

func hardState(term, vote, commit uint64) *raftpb.HardState {
	return &raftpb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

func snapshot(index, term uint64, voters ...uint64) *raftpb.Snapshot {
	return &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
		Index: new(index), Term: new(term), ConfState: raftpb.EnsureConfState(&raftpb.ConfState{Voters: voters}),
	}}
}

// raftGroup is one group's storage in a test, with assertions that fail the test.
type raftGroup struct {
	t  *testing.T
	st raft.Storage
}

func group(t *testing.T, log RaftLog, n int) raftGroup {
	t.Helper()
	st, err := log.Storage(n)
	if err != nil {
		t.Fatalf("Storage(%d): %v", n, err)
	}
	return raftGroup{t, st}
}

func persist(t *testing.T, log RaftLog, writes ...RaftWrite) {
	t.Helper()
	if err := log.Persist(writes); err != nil {
		t.Fatalf("Persist: %v", err)
	}
}

// bounds checks FirstIndex and LastIndex.
func (g raftGroup) bounds(first, last uint64) {
	g.t.Helper()
	gotFirst, err1 := g.st.FirstIndex()
	gotLast, err2 := g.st.LastIndex()
	if gotFirst != first || gotLast != last || err1 != nil || err2 != nil {
		g.t.Errorf("FirstIndex, LastIndex = %d %v, %d %v; want %d, %d", gotFirst, err1, gotLast, err2, first, last)
	}
}

// entries checks that Entries(lo, hi, maxSize) returns want.
func (g raftGroup) entries(lo, hi, maxSize uint64, want []*raftpb.Entry) {
	g.t.Helper()
	got, err := g.st.Entries(lo, hi, maxSize)
	if err != nil {
		g.t.Errorf("Entries(%d, %d, %d): %v", lo, hi, maxSize, err)
		return
	}
	if len(got) != len(want) {
		g.t.Errorf("Entries(%d, %d, %d) returned %d entries, want %d", lo, hi, maxSize, len(got), len(want))
		return
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			g.t.Errorf("Entries(%d, %d, %d)[%d] = %v, want %v", lo, hi, maxSize, i, got[i], want[i])
		}
	}
}

// entriesErr checks that Entries(lo, hi, ∞) fails with want.
func (g raftGroup) entriesErr(lo, hi uint64, want error) {
	g.t.Helper()
	if got, err := g.st.Entries(lo, hi, math.MaxUint64); !errors.Is(err, want) {
		g.t.Errorf("Entries(%d, %d) = %d entries, %v; want %v", lo, hi, len(got), err, want)
	}
}

// term checks Term(i); wantErr nil means it succeeds with want.
func (g raftGroup) term(i, want uint64, wantErr error) {
	g.t.Helper()
	got, err := g.st.Term(i)
	if !errors.Is(err, wantErr) || (wantErr == nil && got != want) {
		g.t.Errorf("Term(%d) = %d, %v; want %d, %v", i, got, err, want, wantErr)
	}
}

// initialState checks InitialState; a nil hard state means an empty one.
func (g raftGroup) initialState(hard *raftpb.HardState, conf *raftpb.ConfState) {
	g.t.Helper()
	gotHard, gotConf, err := g.st.InitialState()
	if err != nil {
		g.t.Fatalf("InitialState: %v", err)
	}
	if hard == nil && !raft.IsEmptyHardState(gotHard) || hard != nil && !proto.Equal(gotHard, hard) {
		g.t.Errorf("InitialState hard state = %v, want %v", gotHard, hard)
	}
	if gotConf == nil || !proto.Equal(gotConf, raftpb.EnsureConfState(conf)) {
		g.t.Errorf("InitialState conf state = %v, want %v", gotConf, conf)
	}
}

// snapshot checks Snapshot.
func (g raftGroup) snapshot(want *raftpb.Snapshot) {
	g.t.Helper()
	got, err := g.st.Snapshot()
	if err != nil || !proto.Equal(got, raftpb.EnsureSnapshot(want)) {
		g.t.Errorf("Snapshot = %v, %v; want %v", got, err, want)
	}
}

// dump is everything a group's storage shows, for comparing two of them.
func (g raftGroup) dump() string {
	g.t.Helper()
	hard, conf, err := g.st.InitialState()
	first, _ := g.st.FirstIndex()
	last, _ := g.st.LastIndex()
	firstTerm, termErr := g.st.Term(first - 1)
	snap, snapErr := g.st.Snapshot()
	out := fmt.Sprintf("hard %v conf %v %v; first %d (term before %d %v) last %d; snapshot %v %v",
		hard, conf, err, first, firstTerm, termErr, last, snap, snapErr)
	if last >= first {
		ents, err := g.st.Entries(first, last+1, math.MaxUint64)
		out += fmt.Sprintf("; %d entries %v", len(ents), err)
		for _, e := range ents {
			out += fmt.Sprintf(" [%d %d %q]", e.GetIndex(), e.GetTerm(), e.GetData())
		}
	}
	return out
}

// raftLogCases is the conformance suite: each case runs on every implementation, on a fresh
// log; reopen is nil where the log does not outlive the process.
var raftLogCases = []struct {
	name string
	run  func(t *testing.T, log RaftLog, reopen func() RaftLog)
}{
	{"empty", func(t *testing.T, log RaftLog, _ func() RaftLog) {
		g := group(t, log, 0)
		g.initialState(nil, nil)
		g.bounds(1, 0)
		g.term(0, 0, nil)
		g.term(1, 0, raft.ErrUnavailable)
		g.entriesErr(1, 1, raft.ErrUnavailable)
		g.entriesErr(0, 1, raft.ErrCompacted)
		g.snapshot(nil)
	}},
	{"append and read back", func(t *testing.T, log RaftLog, _ func() RaftLog) {
		ents := entries(1, 5, 1)
		persist(t, log, RaftWrite{Group: 0, Entries: entries(1, 2, 1)}, RaftWrite{Group: 0, Entries: entries(3, 5, 1)})
		g := group(t, log, 0)
		g.bounds(1, 5)
		g.entries(1, 6, math.MaxUint64, ents)
		g.entries(2, 4, math.MaxUint64, ents[1:3])
		g.entries(3, 3, math.MaxUint64, nil)
		g.term(0, 0, nil)
		g.term(3, 1, nil)
		g.term(5, 1, nil)
		g.term(6, 0, raft.ErrUnavailable)
		g.entriesErr(0, 2, raft.ErrCompacted)
		// maxSize: at least one entry, then as many as fit.
		size := uint64(proto.Size(ents[0]))
		g.entries(1, 6, 0, ents[:1])
		g.entries(1, 6, size, ents[:1])
		g.entries(1, 6, 2*size, ents[:2])
		g.entries(1, 6, 3*size-1, ents[:2])
		g.entries(2, 6, 3*size, ents[1:4])
	}},
	{"conflicting append truncates the suffix", func(t *testing.T, log RaftLog, _ func() RaftLog) {
		persist(t, log, RaftWrite{Group: 0, Entries: entries(1, 5, 1)})
		persist(t, log, RaftWrite{Group: 0, Entries: entries(3, 4, 2)})
		g := group(t, log, 0)
		g.bounds(1, 4)
		g.entries(1, 5, math.MaxUint64, append(entries(1, 2, 1), entries(3, 4, 2)...))
		g.term(4, 2, nil)
		g.term(5, 0, raft.ErrUnavailable)
		persist(t, log, RaftWrite{Group: 0, Entries: entries(5, 6, 3)})
		g.bounds(1, 6)
		g.entries(4, 7, math.MaxUint64, append(entries(4, 4, 2), entries(5, 6, 3)...))
		// Replacing from the first index.
		persist(t, log, RaftWrite{Group: 0, Entries: entries(1, 1, 4)})
		g.bounds(1, 1)
		g.entries(1, 2, math.MaxUint64, entries(1, 1, 4))
	}},
	{"hard state round trip", func(t *testing.T, log RaftLog, _ func() RaftLog) {
		persist(t, log, RaftWrite{Group: 1, HardState: hardState(3, 2, 0)})
		g := group(t, log, 1)
		g.initialState(hardState(3, 2, 0), nil)
		persist(t, log, RaftWrite{Group: 1, Entries: entries(1, 2, 3), HardState: hardState(3, 2, 2)})
		g.initialState(hardState(3, 2, 2), nil)
		persist(t, log, RaftWrite{Group: 1, Entries: entries(3, 3, 3)}, RaftWrite{Group: 1, HardState: &raftpb.HardState{}})
		g.initialState(hardState(3, 2, 2), nil) // an empty hard state leaves it as it was
		g.bounds(1, 3)
	}},
	{"snapshot then entries after it", func(t *testing.T, log RaftLog, _ func() RaftLog) {
		persist(t, log, RaftWrite{Group: 2, Entries: entries(1, 5, 1)})
		snap := snapshot(10, 2, 1, 2, 3)
		persist(t, log, RaftWrite{Group: 2, Snapshot: snap, Entries: entries(11, 12, 2), HardState: hardState(2, 1, 10)})
		g := group(t, log, 2)
		g.bounds(11, 12)
		g.initialState(hardState(2, 1, 10), snap.GetMetadata().GetConfState())
		g.snapshot(snap)
		g.term(10, 2, nil)
		g.term(9, 0, raft.ErrCompacted)
		g.term(12, 2, nil)
		g.entriesErr(5, 13, raft.ErrCompacted)
		g.entriesErr(10, 13, raft.ErrCompacted)
		g.entries(11, 13, math.MaxUint64, entries(11, 12, 2))
		// A snapshot not newer than the stored one is refused.
		if err := log.Persist([]RaftWrite{{Group: 2, Snapshot: snapshot(10, 2, 1)}}); !errors.Is(err, raft.ErrSnapOutOfDate) {
			t.Errorf("Persist of a snapshot at the stored index: %v, want ErrSnapOutOfDate", err)
		}
		// A snapshot inside the log replaces the whole log.
		persist(t, log, RaftWrite{Group: 2, Entries: entries(13, 20, 3)})
		snap = snapshot(15, 3, 1, 2)
		persist(t, log, RaftWrite{Group: 2, Snapshot: snap})
		g.bounds(16, 15)
		g.term(15, 3, nil)
		g.term(16, 0, raft.ErrUnavailable)
		g.entriesErr(16, 16, raft.ErrUnavailable)
		g.snapshot(snap)
		g.initialState(hardState(2, 1, 10), snap.GetMetadata().GetConfState())
		persist(t, log, RaftWrite{Group: 2, Entries: entries(16, 16, 4)})
		g.entries(16, 17, math.MaxUint64, entries(16, 16, 4))
	}},
	{"compact then ErrCompacted", func(t *testing.T, log RaftLog, _ func() RaftLog) {
		persist(t, log, RaftWrite{Group: 3, Entries: append(entries(1, 5, 1), entries(6, 10, 2)...)})
		conf := &raftpb.ConfState{Voters: []uint64{1, 2, 3}}
		if err := log.Compact(3, 6, conf); err != nil {
			t.Fatal(err)
		}
		g := group(t, log, 3)
		g.bounds(6, 10)
		g.term(5, 1, nil)
		g.term(4, 0, raft.ErrCompacted)
		g.entriesErr(5, 11, raft.ErrCompacted)
		g.entriesErr(1, 3, raft.ErrCompacted)
		g.entries(6, 11, math.MaxUint64, entries(6, 10, 2))
		g.snapshot(snapshot(5, 1, 1, 2, 3))
		if err := log.Compact(3, 3, conf); err != nil { // below the first index: a no-op
			t.Fatal(err)
		}
		g.bounds(6, 10)
		g.snapshot(snapshot(5, 1, 1, 2, 3))
		if err := log.Compact(3, 12, conf); err == nil {
			t.Error("Compact past the last index + 1 succeeded")
		}
		g.bounds(6, 10)
		if err := log.Compact(3, 11, &raftpb.ConfState{Voters: []uint64{1, 2}}); err != nil { // everything
			t.Fatal(err)
		}
		g.bounds(11, 10)
		g.term(10, 2, nil)
		g.entriesErr(11, 11, raft.ErrUnavailable)
		g.snapshot(snapshot(10, 2, 1, 2))
		g.initialState(nil, &raftpb.ConfState{Voters: []uint64{1, 2}})
		// Entries before the first index are skipped.
		persist(t, log, RaftWrite{Group: 3, Entries: entries(8, 12, 2)})
		g.bounds(11, 12)
		g.entries(11, 13, math.MaxUint64, entries(11, 12, 2))
	}},
	{"a snapshot after a compaction replaces the record", func(t *testing.T, log RaftLog, _ func() RaftLog) {
		persist(t, log, RaftWrite{Group: 1, Snapshot: snapshot(1, 1, 1, 2, 3), Entries: entries(2, 9, 1)})
		if err := log.Compact(1, 5, &raftpb.ConfState{Voters: []uint64{1, 2, 3}}); err != nil {
			t.Fatal(err)
		}
		g := group(t, log, 1)
		g.snapshot(snapshot(4, 1, 1, 2, 3))
		// A snapshot at or below the record is out of date; one past the log replaces it all.
		if err := log.Persist([]RaftWrite{{Group: 1, Snapshot: snapshot(4, 1, 1, 2, 3)}}); !errors.Is(err, raft.ErrSnapOutOfDate) {
			t.Errorf("Persist of a snapshot at the compaction record: %v, want ErrSnapOutOfDate", err)
		}
		snap := snapshot(20, 3, 1, 2, 3)
		persist(t, log, RaftWrite{Group: 1, Snapshot: snap, HardState: hardState(3, 0, 20)})
		g.snapshot(snap)
		g.bounds(21, 20)
		g.term(20, 3, nil)
		persist(t, log, RaftWrite{Group: 1, Entries: entries(21, 30, 3)})
		if err := log.Compact(1, 26, &raftpb.ConfState{Voters: []uint64{1, 2, 3}}); err != nil {
			t.Fatal(err)
		}
		g.snapshot(snapshot(25, 3, 1, 2, 3))
		g.bounds(26, 30)
	}},
	{"groups do not see each other's entries", func(t *testing.T, log RaftLog, _ func() RaftLog) {
		persist(t, log,
			RaftWrite{Group: 0, Entries: entries(1, 3, 1), HardState: hardState(1, 0, 1)},
			RaftWrite{Group: 1, Entries: entries(1, 5, 2)},
			RaftWrite{Group: 3, HardState: hardState(4, 0, 0)})
		g0, g1, g2, g3 := group(t, log, 0), group(t, log, 1), group(t, log, 2), group(t, log, 3)
		g0.bounds(1, 3)
		g0.entries(1, 4, math.MaxUint64, entries(1, 3, 1))
		g0.initialState(hardState(1, 0, 1), nil)
		g1.bounds(1, 5)
		g1.entries(1, 6, math.MaxUint64, entries(1, 5, 2))
		g1.initialState(nil, nil)
		g2.bounds(1, 0)
		g3.bounds(1, 0)
		g3.initialState(hardState(4, 0, 0), nil)
		// A conflicting append and a compaction in one group leave the others alone.
		persist(t, log, RaftWrite{Group: 1, Entries: entries(2, 2, 3)})
		if err := log.Compact(1, 2, &raftpb.ConfState{Voters: []uint64{1}}); err != nil {
			t.Fatal(err)
		}
		g1.bounds(2, 2)
		g0.bounds(1, 3)
		g0.entries(1, 4, math.MaxUint64, entries(1, 3, 1))
	}},
	{"reopen returns what was persisted", func(t *testing.T, log RaftLog, reopen func() RaftLog) {
		if reopen == nil {
			t.Skip("the log does not outlive the process")
		}
		persist(t, log,
			RaftWrite{Group: 0, Entries: entries(1, 8, 1), HardState: hardState(1, 7, 5)},
			RaftWrite{Group: 1, Entries: entries(1, 3, 1)},
			RaftWrite{Group: 2, Snapshot: snapshot(20, 4, 7, 8), Entries: entries(21, 25, 4), HardState: hardState(4, 8, 22)})
		persist(t, log, RaftWrite{Group: 0, Entries: entries(6, 6, 2)}, RaftWrite{Group: 1, HardState: hardState(2, 1, 1)})
		if err := log.Compact(0, 3, &raftpb.ConfState{Voters: []uint64{7}}); err != nil {
			t.Fatal(err)
		}
		before := make([]string, 4)
		for n := range before {
			before[n] = group(t, log, n).dump()
		}
		log = reopen()
		for n := range before {
			if after := group(t, log, n).dump(); after != before[n] {
				t.Errorf("group %d after reopening:\n%s\nwant\n%s", n, after, before[n])
			}
		}
		g0 := group(t, log, 0)
		g0.bounds(3, 6)
		g0.term(6, 2, nil)
		persist(t, log, RaftWrite{Group: 0, Entries: entries(7, 7, 2)})
		g0.bounds(3, 7)
	}},
}

// TestRaftLogConformance runs the conformance suite on MemoryRaftLog and BadgerRaftLog.
func TestRaftLogConformance(t *testing.T) {
	t.Parallel()
	for _, impl := range raftLogImpls {
		t.Run(impl.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range raftLogCases {
				t.Run(c.name, func(t *testing.T) {
					log, reopen := impl.open(t)
					c.run(t, log, reopen)
				})
			}
		})
	}
}

// TestPersistSyncsUnlessOnlyCommitIndexesMove: a Persist with entries, a snapshot, or a hard
// state whose term or vote changed syncs the write-ahead log; one that only moves commit
// indexes does not (raft.MustSync), even after a reopen, and is still read back.
func TestPersistSyncsUnlessOnlyCommitIndexesMove(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openSiloStore(t, dir, 2)
	syncs := 0
	count := func(s *SiloStore) {
		s.wals.syncLog = func(f *os.File) error { syncs++; return datasync(f) }
	}
	count(s)
	entry := func(index, term uint64) *raftpb.Entry {
		return &raftpb.Entry{Index: new(index), Term: new(term), Data: []byte("x")}
	}
	steps := []struct {
		name  string
		write RaftWrite
		sync  bool
	}{
		{"vote in a new term", RaftWrite{Group: 0, HardState: hardState(1, 7, 0)}, true},
		{"an entry", RaftWrite{Group: 0, Entries: []*raftpb.Entry{entry(1, 1)}}, true},
		{"the commit index only", RaftWrite{Group: 0, HardState: hardState(1, 7, 1)}, false},
		{"another group's first hard state", RaftWrite{Group: 1, HardState: hardState(1, 7, 0)}, true},
		{"a new term", RaftWrite{Group: 0, HardState: hardState(2, 0, 1)}, true},
	}
	for _, step := range steps {
		before := syncs
		if err := s.RaftLog().Persist([]RaftWrite{step.write}); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if synced := syncs > before; synced != step.sync {
			t.Errorf("%s: synced %v, want %v", step.name, synced, step.sync)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSiloStore(t, dir, 2)
	count(s)
	before := syncs
	if err := s.RaftLog().Persist([]RaftWrite{{Group: 0, HardState: hardState(2, 0, 1)}}); err != nil {
		t.Fatal(err)
	}
	if syncs != before {
		t.Error("after a reopen, a hard state with the persisted term and vote was synced")
	}
	storage, _ := s.RaftLog().Storage(0)
	if hs, _, err := storage.InitialState(); err != nil || hs.GetTerm() != 2 || hs.GetCommit() != 1 {
		t.Errorf("hard state after the reopen: %v, %v", hs, err)
	}
}
