package persistence

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"
)

// TestRaftTailAnswersTheLastEntriesWithoutBadger: the entries a group persisted last, within
// its tail's bound, are read back (Entries, Term) without reading Badger, and are the entries
// persisted; older entries, and ranges that start before the tail, come from Badger.
func TestRaftTailAnswersTheLastEntriesWithoutBadger(t *testing.T) {
	t.Parallel()
	s := openSiloStore(t, t.TempDir(), 2)
	log := s.RaftLog()
	log.tailBytes = 5 * entryBytes(entries(1, 1, 1)[0]) // five of entries()'s entries
	persist(t, log, RaftWrite{Group: 1, Entries: entries(1, 8, 1)}, RaftWrite{Group: 0, Entries: entries(1, 2, 1)})
	st, err := log.Storage(1)
	if err != nil {
		t.Fatal(err)
	}
	read := func(lo, hi uint64) ([]*raftpb.Entry, int64) {
		t.Helper()
		before := log.storeReads.Load()
		ents, err := st.Entries(lo, hi, math.MaxUint64)
		if err != nil {
			t.Fatalf("Entries(%d, %d): %v", lo, hi, err)
		}
		want := entries(lo, hi-1, 1)
		if len(ents) != len(want) {
			t.Fatalf("Entries(%d, %d) returned %d entries, want %d", lo, hi, len(ents), len(want))
		}
		for i := range want {
			if !proto.Equal(ents[i], want[i]) {
				t.Fatalf("Entries(%d, %d)[%d] = %v, want %v", lo, hi, i, ents[i], want[i])
			}
		}
		return ents, log.storeReads.Load() - before
	}
	if _, reads := read(4, 9); reads != 0 {
		t.Errorf("Entries(4, 9), the last five entries persisted, read Badger %d times, want 0", reads)
	}
	if _, reads := read(7, 8); reads != 0 {
		t.Errorf("Entries(7, 8) read Badger %d times, want 0", reads)
	}
	if _, reads := read(3, 9); reads != 1 {
		t.Errorf("Entries(3, 9), from before the tail, read Badger %d times, want 1", reads)
	}
	if term, err := st.Term(5); err != nil || term != 1 {
		t.Errorf("Term(5) = %d, %v; want 1", term, err)
	}
	// A caller's append to what Entries returned leaves the tail alone.
	ents, _ := read(4, 6)
	_ = append(ents, entries(100, 100, 9)...)
	read(4, 9)
}

// TestRaftTailMatchesTheLogUnderAnyWrites runs random appends (overwriting ones too),
// snapshots and compactions on a BadgerRaftLog whose tails hold only a few entries, and on a
// MemoryRaftLog, and checks after each that every range and term reads the same from both.
func TestRaftTailMatchesTheLogUnderAnyWrites(t *testing.T) {
	t.Parallel()
	// Each run writes a group of its own, of a store opened anew every groups runs: opening
	// Badger for each run would take most of the test's time.
	const groups = 256
	var s *SiloStore
	runs := 0
	rapid.Check(t, func(rt *rapid.T) {
		if runs%groups == 0 {
			s = openSiloStore(t, t.TempDir(), groups)
		}
		group := runs % groups
		runs++
		badgerLog := s.RaftLog()
		badgerLog.tailBytes = rapid.IntRange(0, 6).Draw(rt, "tail entries") * entryBytes(entries(1, 1, 1)[0])
		model := NewMemoryRaftLog()
		term := uint64(1)
		last, first := uint64(0), uint64(1)
		for step := range rapid.IntRange(1, 25).Draw(rt, "steps") {
			var w RaftWrite
			switch op := rapid.IntRange(0, 9).Draw(rt, fmt.Sprint("op ", step)); {
			case op < 7: // append, from anywhere after the first index up to the end
				from := rapid.Uint64Range(first, last+1).Draw(rt, "from")
				to := from + rapid.Uint64Range(0, 4).Draw(rt, "count")
				if rapid.Bool().Draw(rt, "new term") {
					term++
				}
				w = RaftWrite{Entries: entries(from, to, term)}
				last = to
			case op < 8: // a snapshot past the end replaces the log
				index := last + rapid.Uint64Range(1, 3).Draw(rt, "past")
				term++
				w = RaftWrite{Snapshot: snapshot(index, term, 1)}
				last, first = index, index+1
			default: // compact
				if last < first {
					continue
				}
				index := rapid.Uint64Range(first, last+1).Draw(rt, "compact")
				for _, l := range []RaftLog{badgerLog, model} {
					if err := l.Compact(group, index, &raftpb.ConfState{Voters: []uint64{1}}); err != nil {
						rt.Fatalf("Compact(%d): %v", index, err)
					}
				}
				first = max(first, index)
				checkSameLog(rt, badgerLog, model, group, first, last)
				checkTailWithin(rt, badgerLog, group, first, last)
				continue
			}
			w.Group = group
			for _, l := range []RaftLog{badgerLog, model} {
				if err := l.Persist([]RaftWrite{w}); err != nil {
					rt.Fatalf("Persist: %v", err)
				}
			}
			checkSameLog(rt, badgerLog, model, group, first, last)
			checkTailWithin(rt, badgerLog, group, first, last)
		}
	})
}

// checkTailWithin checks that group's tail holds nothing outside its log, [first, last]: what
// a compaction or a snapshot removed is not kept in memory.
func checkTailWithin(rt *rapid.T, l *BadgerRaftLog, group int, first, last uint64) {
	tail := l.tails[group]
	if n := uint64(len(tail.ents)); n > 0 && (tail.first() < first || tail.first()+n-1 > last) {
		rt.Fatalf("the tail holds entries %d..%d, outside the log's %d..%d", tail.first(), tail.first()+n-1, first, last)
	}
}

// checkSameLog checks that group of got and want answer every Entries range within
// [first, last] (with a size limit too) and every Term alike.
func checkSameLog(rt *rapid.T, got, want RaftLog, group int, first, last uint64) {
	g, _ := got.Storage(group)
	w, _ := want.Storage(group)
	for i := first - 1; i <= last+1; i++ {
		gt, gerr := g.Term(i)
		wt, werr := w.Term(i)
		if gt != wt || (gerr == nil) != (werr == nil) || gerr != nil && !errors.Is(gerr, werr) {
			rt.Fatalf("Term(%d) = %d, %v; the model says %d, %v", i, gt, gerr, wt, werr)
		}
	}
	for lo := first; lo <= last; lo++ {
		for hi := lo + 1; hi <= last+1; hi++ {
			for _, maxSize := range []uint64{math.MaxUint64, 250} {
				ge, gerr := g.Entries(lo, hi, maxSize)
				we, werr := w.Entries(lo, hi, maxSize)
				if (gerr == nil) != (werr == nil) || gerr != nil && !errors.Is(gerr, werr) || len(ge) != len(we) {
					rt.Fatalf("Entries(%d, %d, %d) = %d entries, %v; the model says %d, %v", lo, hi, maxSize, len(ge), gerr, len(we), werr)
				}
				for k := range we {
					if !proto.Equal(ge[k], we[k]) {
						rt.Fatalf("Entries(%d, %d, %d)[%d] = %v; the model says %v", lo, hi, maxSize, k, ge[k], we[k])
					}
				}
			}
		}
	}
}

// TestAppendTailLeavesEarlierTailsAlone: replacing entries builds a new array, so a tail read
// before the write still holds the entries it had.
func TestAppendTailLeavesEarlierTailsAlone(t *testing.T) {
	t.Parallel()
	before := appendTail(raftTail{}, entries(1, 5, 1), math.MaxInt)
	after := appendTail(before, entries(3, 4, 2), math.MaxInt)
	if got := before.slice(1, 6, math.MaxUint64); len(got) != 5 || got[2].GetTerm() != 1 || got[4].GetIndex() != 5 {
		t.Errorf("the earlier tail changed: %v", got)
	}
	if got := after.slice(1, 5, math.MaxUint64); len(got) != 4 || got[2].GetTerm() != 2 || after.covers(5, 6) {
		t.Errorf("the new tail is %v, want entries 1..4 with 3 and 4 of term 2", got)
	}
	cut := before.within(0, 3)
	grown := appendTail(cut, entries(4, 4, 3), math.MaxInt)
	if got := before.slice(4, 5, math.MaxUint64); got[0].GetTerm() != 1 {
		t.Errorf("appending after a cut changed the earlier tail's entry 4 to term %d", got[0].GetTerm())
	}
	if got := grown.slice(4, 5, math.MaxUint64); got[0].GetTerm() != 3 {
		t.Errorf("the grown tail's entry 4 has term %d, want 3", got[0].GetTerm())
	}
}
