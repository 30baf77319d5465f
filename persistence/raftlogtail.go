package persistence

import (
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// DefaultRaftTailBytes bounds the entries BadgerRaftLog keeps in memory for each group (its
// tail): about the last two rounds' entries of a busy partition. A leader reads its entries
// back from Storage the round after it persisted them, when they commit, and to send them to a
// follower that lags; the tail answers those reads without a Badger iterator.
const DefaultRaftTailBytes = 64 << 10

// raftTail is the end of one group's persisted log kept in memory: the entries first ..
// first+len(ents)-1, contiguous, each as the write that persisted it passed it (raft hands out
// the same entries from its unstable log, and neither side changes them). A tail is a value:
// writers build a new one and publish it under BadgerRaftLog.mu; a reader's copy keeps
// describing the log it read, because a writer never changes an element another tail shares
// (appendTail copies before it replaces entries).
type raftTail struct {
	ents  []*raftpb.Entry
	bytes int
}

// entryBytes is what an entry counts against a tail's bound: its payload and a fixed
// overhead for its index, term, type and the pointer.
func entryBytes(e *raftpb.Entry) int { return len(e.GetData()) + 32 }

// first is the index of the tail's first entry (0 when it is empty).
func (t raftTail) first() uint64 {
	if len(t.ents) == 0 {
		return 0
	}
	return t.ents[0].GetIndex()
}

// covers reports whether the tail holds every entry of [lo, hi).
func (t raftTail) covers(lo, hi uint64) bool {
	return len(t.ents) > 0 && lo >= t.first() && hi <= t.first()+uint64(len(t.ents)) && lo < hi
}

// slice returns the entries [lo, hi) (covers must hold), the first always and then as many as
// fit in maxSize encoded bytes, as raft.MemoryStorage.Entries does. The slice's capacity is
// its length, so a caller's append cannot write into the tail.
func (t raftTail) slice(lo, hi, maxSize uint64) []*raftpb.Entry {
	ents := t.ents[lo-t.first() : hi-t.first()]
	size := uint64(0)
	for i, e := range ents {
		size += uint64(proto.Size(e))
		if i > 0 && size > maxSize {
			ents = ents[:i]
			break
		}
	}
	return ents[:len(ents):len(ents)]
}

// term returns the term of entry i when the tail holds it.
func (t raftTail) term(i uint64) (uint64, bool) {
	if !t.covers(i, i+1) {
		return 0, false
	}
	return t.ents[i-t.first()].GetTerm(), true
}

// appendTail returns t with ents (contiguous, as persistEntries wrote them) appended: an entry
// at index i replaces the tail from i on. When ents do not follow on from the tail's entries,
// the tail restarts with them. Entries beyond limit bytes are dropped from the front.
func appendTail(t raftTail, ents []*raftpb.Entry, limit int) raftTail {
	if len(ents) == 0 {
		return t
	}
	start := ents[0].GetIndex()
	switch {
	case len(t.ents) == 0 || start < t.first() || start > t.first()+uint64(len(t.ents)):
		t = raftTail{}
	case start < t.first()+uint64(len(t.ents)):
		// Raft replaces entries from start on: a copy, since readers may hold the old ones.
		kept := t.ents[:start-t.first()]
		t = raftTail{ents: append(make([]*raftpb.Entry, 0, len(kept)+len(ents)), kept...)}
		for _, e := range kept {
			t.bytes += entryBytes(e)
		}
	}
	for _, e := range ents {
		t.ents = append(t.ents, e)
		t.bytes += entryBytes(e)
	}
	return t.trimBytes(limit)
}

// trimBytes drops entries from the front until the tail is within limit bytes.
func (t raftTail) trimBytes(limit int) raftTail {
	drop := 0
	for drop < len(t.ents) && t.bytes > limit {
		t.bytes -= entryBytes(t.ents[drop])
		drop++
	}
	return t.drop(drop)
}

// within returns the part of the tail inside a log holding (truncated, last]: a compaction or a
// snapshot moved the first index, or a snapshot emptied the log.
func (t raftTail) within(truncated, last uint64) raftTail {
	if len(t.ents) == 0 {
		return t
	}
	if end := t.first() + uint64(len(t.ents)) - 1; last < end {
		if last < t.first() {
			return raftTail{}
		}
		t.ents = t.ents[: last-t.first()+1 : last-t.first()+1]
		t.bytes = 0
		for _, e := range t.ents {
			t.bytes += entryBytes(e)
		}
	}
	drop := 0
	for drop < len(t.ents) && t.ents[drop].GetIndex() <= truncated {
		t.bytes -= entryBytes(t.ents[drop])
		drop++
	}
	return t.drop(drop)
}

// drop returns the tail without its first n entries; an emptied tail lets its array go.
func (t raftTail) drop(n int) raftTail {
	if n >= len(t.ents) {
		return raftTail{}
	}
	t.ents = t.ents[n:]
	return t
}
