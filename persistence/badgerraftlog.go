package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
)

// BadgerRaftLog is the RaftLog of a SiloStore: partition n's log entries, hard state, snapshot
// and truncation point under r/<n>/ (doc.go, "The Raft log"). Groups are the partitions,
// 0 to SiloStore.Partitions()-1.
//
// It keeps each group's bounds in memory (raftBounds: the index and term just before the first
// entry, the last index and term, the snapshot's index), loaded when the store opens and
// replaced by each write once it is durable, so FirstIndex, LastIndex and the terms at the
// bounds read no disk. It keeps the last entries each group persisted too, up to
// DefaultRaftTailBytes a group (raftTail), so that the entries a leader reads back to apply or
// to send answer from memory. Other entries and terms, the hard state and the snapshot are
// read from Badger, at the version of the last durable write: a reader sees every Persist that
// returned and nothing of one still running.
type BadgerRaftLog struct {
	store *SiloStore
	// mu guards groups, tails and readAt. Writers replace them under writeMu and mu together.
	mu     sync.RWMutex
	groups []raftBounds
	tails  []raftTail
	readAt uint64
	// tailBytes bounds each group's tail (DefaultRaftTailBytes).
	tailBytes int
	// storeReads counts the Entries calls that read Badger (for tests).
	storeReads atomic.Int64
	// setKeys and setBytes count what set wrote since a persist began (SiloStore.Written);
	// only writers, which hold writeMu, touch them.
	setKeys, setBytes int
}

var _ RaftLog = (*BadgerRaftLog)(nil)

// raftBounds is what BadgerRaftLog keeps in memory of one group: its log holds the entries
// (truncatedIndex, lastIndex], and the entry at truncatedIndex had term truncatedTerm.
type raftBounds struct {
	truncatedIndex, truncatedTerm uint64
	lastIndex, lastTerm           uint64
	snapshotIndex                 uint64 // 0: no snapshot
	// hardTerm and hardVote are the persisted hard state's term and vote: a hard state that
	// changes neither needs no sync of its own (raft.MustSync).
	hardTerm, hardVote uint64
}

func (b raftBounds) firstIndex() uint64 { return b.truncatedIndex + 1 }

// term is the term of entry i if the bounds answer it (ok): outside them, the error
// raft.MemoryStorage.Term returns, at them, the term they keep.
func (b raftBounds) term(i uint64) (term uint64, ok bool, err error) {
	switch {
	case i < b.truncatedIndex:
		return 0, true, raft.ErrCompacted
	case i > b.lastIndex:
		return 0, true, raft.ErrUnavailable
	case i == b.truncatedIndex:
		return b.truncatedTerm, true, nil
	case i == b.lastIndex:
		return b.lastTerm, true, nil
	}
	return 0, false, nil
}

// openBadgerRaftLog loads every group's bounds, and deletes the entries a crash left behind
// below a group's first index (a compaction deletes them after it moved the first index).
func openBadgerRaftLog(s *SiloStore) (*BadgerRaftLog, error) {
	l := &BadgerRaftLog{store: s, groups: make([]raftBounds, s.partitions), tails: make([]raftTail, s.partitions),
		readAt: s.versions.durable, tailBytes: DefaultRaftTailBytes}
	for n := range s.partitions {
		txn, done := s.read(l.readAt)
		b, lowest, err := loadRaftBounds(txn, n)
		done()
		if err != nil {
			return nil, orrery.Wrap(orrery.CodeUnavailable, err, "silo store %s: raft group %d", s.dir, n)
		}
		l.groups[n] = b
		if lowest != 0 && lowest < b.firstIndex() {
			if err := l.deleteEntries(n, lowest, b.truncatedIndex); err != nil {
				return nil, err
			}
		}
	}
	return l, nil
}

// loadRaftBounds reads group n's bounds and its lowest entry index on disk (0: none).
func loadRaftBounds(txn *badger.Txn, n int) (b raftBounds, lowest uint64, err error) {
	truncated, found, err := getRaw(txn, raftTruncatedKey(n))
	if err != nil {
		return b, 0, err
	}
	if found {
		if len(truncated) != 16 {
			return b, 0, fmt.Errorf("%q holds %d bytes, want 16", raftTruncatedKey(n), len(truncated))
		}
		b.truncatedIndex = binary.BigEndian.Uint64(truncated)
		b.truncatedTerm = binary.BigEndian.Uint64(truncated[8:])
	}
	snap, err := loadSnapshot(txn, n)
	if err != nil {
		return b, 0, err
	}
	b.snapshotIndex = snap.GetMetadata().GetIndex()
	if value, found, err := getRaw(txn, raftHardStateKey(n)); err != nil {
		return b, 0, err
	} else if found {
		hs := &raftpb.HardState{}
		if err := proto.Unmarshal(value, hs); err != nil {
			return b, 0, fmt.Errorf("decode the hard state of raft group %d: %w", n, err)
		}
		b.hardTerm, b.hardVote = hs.GetTerm(), hs.GetVote()
	}
	b.lastIndex, b.lastTerm = b.truncatedIndex, b.truncatedTerm

	prefix := raftEntryPrefix(n)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
	it.Seek(raftEntryKey(n, math.MaxUint64))
	if it.Valid() {
		if last := raftEntryIndex(it.Item().Key()); last > b.truncatedIndex {
			e, err := decodeEntry(it.Item())
			if err != nil {
				it.Close()
				return b, 0, err
			}
			b.lastIndex, b.lastTerm = last, e.GetTerm()
		}
	}
	it.Close()
	it = txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	it.Seek(prefix)
	if it.Valid() {
		lowest = raftEntryIndex(it.Item().Key())
	}
	return b, lowest, nil
}

func loadSnapshot(txn *badger.Txn, n int) (*raftpb.Snapshot, error) {
	value, found, err := getRaw(txn, raftSnapshotKey(n))
	if err != nil || !found {
		return raftpb.EnsureSnapshot(nil), err
	}
	snap := &raftpb.Snapshot{}
	if err := proto.Unmarshal(value, snap); err != nil {
		return nil, fmt.Errorf("decode the snapshot of raft group %d: %w", n, err)
	}
	return raftpb.EnsureSnapshot(snap), nil
}

func decodeEntry(item *badger.Item) (*raftpb.Entry, error) {
	e := &raftpb.Entry{}
	err := item.Value(func(value []byte) error { return proto.Unmarshal(value, e) })
	if err != nil {
		return nil, fmt.Errorf("decode raft entry %q: %w", item.Key(), err)
	}
	return e, nil
}

// checkGroup refuses a group that is not a partition of the store.
func (l *BadgerRaftLog) checkGroup(group int) error {
	if group < 0 || group >= len(l.groups) {
		return orrery.Errorf(orrery.CodeInternal, "raft group %d: not a partition of the silo store (0 to %d)",
			group, len(l.groups)-1)
	}
	return nil
}

// Storage implements RaftLog.
func (l *BadgerRaftLog) Storage(group int) (raft.Storage, error) {
	if err := l.checkGroup(group); err != nil {
		return nil, err
	}
	return &badgerRaftStorage{log: l, group: group}, nil
}

// Persist implements RaftLog: one Badger transaction for every write, then one sync, and only
// then the writes are visible to Storage. A Persist whose only changes are hard states' commit
// indexes is not synced (raft.MustSync): it is durable with the next synced write (the
// write-ahead log is one sequence), and a crash that takes it back leaves commit indexes Raft
// learns again, while every write after it, an apply included, is taken back with it. A write that cannot apply (an entry that leaves a
// gap, entries out of order, a snapshot not newer than the stored one, a transaction too big)
// fails the whole Persist before anything is written. Entries below a new snapshot's index are
// deleted after the synced write, in transactions of their own: they are below the group's
// first index already, and a crash before they are gone leaves them to the next open.
func (l *BadgerRaftLog) Persist(writes []RaftWrite) error {
	empty := true
	for _, w := range writes {
		if err := l.checkGroup(w.Group); err != nil {
			return err
		}
		if !raft.IsEmptySnap(w.Snapshot) || len(w.Entries) > 0 || !raft.IsEmptyHardState(w.HardState) {
			empty = false
		}
	}
	if empty {
		return nil
	}
	stale, err := l.persist(writes)
	if err != nil {
		return err
	}
	for _, r := range stale {
		if err := l.deleteEntries(r.group, r.from, r.to); err != nil {
			return err
		}
	}
	return nil
}

// entryRange is group's entries from..to (inclusive).
type entryRange struct {
	group    int
	from, to uint64
}

// persist is Persist's synced write; it returns the entries that went below a group's first
// index, for Persist to delete.
func (l *BadgerRaftLog) persist(writes []RaftWrite) (stale []entryRange, err error) {
	s := l.store
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.lifeMu.RLock()
	defer s.lifeMu.RUnlock()
	next := map[int]raftBounds{}
	tails := map[int]raftTail{}
	l.setKeys, l.setBytes = 0, 0
	sync := false
	for _, w := range writes {
		b := l.groups[w.Group]
		hs := w.HardState
		if !raft.IsEmptySnap(w.Snapshot) || len(w.Entries) > 0 ||
			(!raft.IsEmptyHardState(hs) && (hs.GetTerm() != b.hardTerm || hs.GetVote() != b.hardVote)) {
			sync = true
		}
	}
	at, err := s.writeSynced(sync, func(txn *badger.Txn) error {
		for _, w := range writes {
			b, ok := next[w.Group]
			if !ok {
				b = l.groups[w.Group] // only writers change it, and this one holds writeMu
			}
			if !raft.IsEmptySnap(w.Snapshot) {
				before := b
				var err error
				if b, err = l.persistSnapshot(txn, w.Group, w.Snapshot, b); err != nil {
					return err
				}
				if from, to := before.firstIndex(), min(before.lastIndex, b.truncatedIndex); from <= to {
					stale = append(stale, entryRange{w.Group, from, to})
				}
			}
			if len(w.Entries) > 0 {
				var err error
				if b, err = l.persistEntries(txn, w.Group, w.Entries, b); err != nil {
					return err
				}
				tail, ok := tails[w.Group]
				if !ok {
					tail = l.tails[w.Group] // only writers change it, and this one holds writeMu
				}
				tails[w.Group] = appendTail(tail, w.Entries, l.tailBytes).within(b.truncatedIndex, b.lastIndex)
			}
			if !raft.IsEmptyHardState(w.HardState) {
				if err := l.set(txn, raftHardStateKey(w.Group), w.HardState); err != nil {
					return fmt.Errorf("raft group %d: hard state: %w", w.Group, err)
				}
				b.hardTerm, b.hardVote = w.HardState.GetTerm(), w.HardState.GetVote()
			}
			next[w.Group] = b
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.written.addLog(l.setKeys, l.setBytes)
	l.publish(at, next, tails)
	return stale, nil
}

// persistSnapshot writes snap as group's snapshot and makes the log start after it: the
// entries after its index are deleted in txn (the ones at or before it by the caller).
func (l *BadgerRaftLog) persistSnapshot(txn *badger.Txn, group int, snap *raftpb.Snapshot, b raftBounds) (raftBounds, error) {
	index, term := snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
	if b.snapshotIndex != 0 && b.snapshotIndex >= index {
		return b, fmt.Errorf("raft group %d: snapshot at %d: %w", group, index, raft.ErrSnapOutOfDate)
	}
	if err := l.set(txn, raftSnapshotKey(group), snap); err != nil {
		return b, fmt.Errorf("raft group %d: snapshot at %d: %w", group, index, err)
	}
	if err := setTruncated(txn, group, index, term); err != nil {
		return b, err
	}
	for i := max(index+1, b.firstIndex()); i <= b.lastIndex; i++ {
		if err := txn.Delete(raftEntryKey(group, i)); err != nil {
			return b, err
		}
	}
	return raftBounds{truncatedIndex: index, truncatedTerm: term, lastIndex: index, lastTerm: term, snapshotIndex: index}, nil
}

// persistEntries appends ents to group's log as raft.MemoryStorage.Append does: entries before
// the first index are skipped, and the persisted entries from the first new index on are
// replaced (the ones past the last new entry deleted).
func (l *BadgerRaftLog) persistEntries(txn *badger.Txn, group int, ents []*raftpb.Entry, b raftBounds) (raftBounds, error) {
	first := b.firstIndex()
	lastNew := ents[0].GetIndex() + uint64(len(ents)) - 1
	if lastNew < first {
		return b, nil
	}
	if ents[0].GetIndex() < first {
		ents = ents[first-ents[0].GetIndex():]
	}
	if ents[0].GetIndex() > b.lastIndex+1 {
		return b, fmt.Errorf("raft group %d: append at %d: the log ends at %d", group, ents[0].GetIndex(), b.lastIndex)
	}
	for i, e := range ents {
		if want := ents[0].GetIndex() + uint64(i); e.GetIndex() != want {
			return b, fmt.Errorf("raft group %d: append at %d: entry %d has index %d, want %d",
				group, ents[0].GetIndex(), i, e.GetIndex(), want)
		}
		if err := l.set(txn, raftEntryKey(group, e.GetIndex()), e); err != nil {
			return b, fmt.Errorf("raft group %d: entry %d: %w", group, e.GetIndex(), err)
		}
	}
	for i := lastNew + 1; i <= b.lastIndex; i++ {
		if err := txn.Delete(raftEntryKey(group, i)); err != nil {
			return b, err
		}
	}
	b.lastIndex, b.lastTerm = lastNew, ents[len(ents)-1].GetTerm()
	return b, nil
}

// set writes m under key, refusing a value the LSM tree would not keep inline. The caller
// holds writeMu.
func (l *BadgerRaftLog) set(txn *badger.Txn, key []byte, m proto.Message) error {
	value, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	if limit := l.store.opts.ValueThresholdBytes - 1; int64(len(value)) > limit {
		return fmt.Errorf("%w: %d bytes, the largest is %d", ErrValueTooBig, len(value), limit)
	}
	if err := txn.Set(key, value); err != nil {
		return err
	}
	l.setKeys, l.setBytes = l.setKeys+1, l.setBytes+len(key)+len(value)
	return nil
}

func setTruncated(txn *badger.Txn, group int, index, term uint64) error {
	value := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, index), term)
	return txn.Set(raftTruncatedKey(group), value)
}

// publish shows a durable write at version at, with the groups' new bounds and the new tails
// of those that appended entries, to readers. Every tail of a group whose bounds moved is cut
// to them.
func (l *BadgerRaftLog) publish(at uint64, bounds map[int]raftBounds, tails map[int]raftTail) {
	l.mu.Lock()
	for group, b := range bounds {
		l.groups[group] = b
		tail, ok := tails[group]
		if !ok {
			tail = l.tails[group]
		}
		l.tails[group] = tail.within(b.truncatedIndex, b.lastIndex)
	}
	l.readAt = at
	l.mu.Unlock()
	l.store.published(at)
}

// Compact implements RaftLog. It moves the group's first index to index and records the
// snapshot at index-1 in one synced write, with the first of the deletions; the rest follow in
// transactions of their own (a crash between them leaves entries below the first index, which
// the next open deletes).
func (l *BadgerRaftLog) Compact(group int, index uint64, conf *raftpb.ConfState) error {
	if err := l.checkGroup(group); err != nil {
		return err
	}
	s := l.store
	s.writeMu.Lock()
	s.lifeMu.RLock()
	b := l.groups[group]
	oldFirst := b.firstIndex()
	if index <= oldFirst {
		s.lifeMu.RUnlock()
		s.writeMu.Unlock()
		return nil
	}
	err := func() error {
		if index > b.lastIndex+1 {
			return fmt.Errorf("raft group %d: compact before %d: the log ends at %d", group, index, b.lastIndex)
		}
		if err := s.usable(); err != nil {
			return err
		}
		term := b.lastTerm
		if index-1 < b.lastIndex {
			txn, done := s.read(l.readAt)
			item, err := txn.Get(raftEntryKey(group, index-1))
			var e *raftpb.Entry
			if err == nil {
				e, err = decodeEntry(item)
			}
			done()
			if err != nil {
				return orrery.Wrap(orrery.CodeUnavailable, err, "raft group %d: read entry %d", group, index-1)
			}
			term = e.GetTerm()
		}
		snap := &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
			Index: new(index - 1), Term: new(term), ConfState: raftpb.EnsureConfState(conf),
		}}
		at, err := s.write(func(txn *badger.Txn) error {
			if err := l.set(txn, raftSnapshotKey(group), snap); err != nil {
				return fmt.Errorf("raft group %d: snapshot record at %d: %w", group, index-1, err)
			}
			return setTruncated(txn, group, index-1, term)
		})
		if err != nil {
			return err
		}
		b.truncatedIndex, b.truncatedTerm, b.snapshotIndex = index-1, term, index-1
		l.publish(at, map[int]raftBounds{group: b}, nil)
		return nil
	}()
	s.lifeMu.RUnlock()
	s.writeMu.Unlock()
	if err != nil {
		return err
	}
	return l.deleteEntries(group, oldFirst, index-1)
}

// deleteEntries deletes group's entries from..to (inclusive), all below its first index, in
// synced transactions of a bounded number of deletions each.
func (l *BadgerRaftLog) deleteEntries(group int, from, to uint64) error {
	s := l.store
	chunk := uint64(max(1, s.db.MaxBatchCount()/2))
	for from <= to {
		end := min(to, from+chunk-1)
		err := func() error {
			s.writeMu.Lock()
			defer s.writeMu.Unlock()
			s.lifeMu.RLock()
			defer s.lifeMu.RUnlock()
			at, err := s.write(func(txn *badger.Txn) error {
				for i := from; i <= end; i++ {
					if err := txn.Delete(raftEntryKey(group, i)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			l.publish(at, nil, nil)
			return nil
		}()
		if err != nil {
			return fmt.Errorf("raft group %d: delete entries %d to %d below the first index: %w", group, from, end, err)
		}
		from = end + 1
	}
	return nil
}

// view returns group's bounds and a transaction reading the Raft log as the last durable write
// left it; done releases it.
func (l *BadgerRaftLog) view(group int) (b raftBounds, txn *badger.Txn, done func(), err error) {
	s := l.store
	s.lifeMu.RLock()
	if s.closed {
		s.lifeMu.RUnlock()
		return b, nil, nil, orrery.Errorf(orrery.CodeUnavailable, "silo store %s is closed", s.dir)
	}
	l.mu.RLock()
	b, at := l.groups[group], l.readAt
	txn, release := s.read(at) // held before mu is released, so compaction keeps at
	l.mu.RUnlock()
	return b, txn, func() { release(); s.lifeMu.RUnlock() }, nil
}

func (l *BadgerRaftLog) bounds(group int) raftBounds {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.groups[group]
}

// badgerRaftStorage is one group's raft.Storage on a BadgerRaftLog. Its errors follow
// raft.MemoryStorage's: ErrCompacted for an index before the first one (Term: before the one
// just before it), ErrUnavailable past the last one.
type badgerRaftStorage struct {
	log   *BadgerRaftLog
	group int
}

// InitialState implements raft.Storage: the persisted hard state (nil if none) and the conf
// state of the persisted snapshot (empty if none).
func (st *badgerRaftStorage) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	_, txn, done, err := st.log.view(st.group)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	var hard *raftpb.HardState
	value, found, err := getRaw(txn, raftHardStateKey(st.group))
	if err != nil {
		return nil, nil, err
	}
	if found {
		hard = &raftpb.HardState{}
		if err := proto.Unmarshal(value, hard); err != nil {
			return nil, nil, orrery.Wrap(orrery.CodeInternal, err, "raft group %d: decode the hard state", st.group)
		}
	}
	snap, err := loadSnapshot(txn, st.group)
	if err != nil {
		return nil, nil, err
	}
	return hard, raftpb.EnsureConfState(snap.GetMetadata().GetConfState()), nil
}

// Entries implements raft.Storage. The group's tail answers when it holds them all.
func (st *badgerRaftStorage) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	st.log.mu.RLock()
	b, tail := st.log.groups[st.group], st.log.tails[st.group]
	st.log.mu.RUnlock()
	if lo > b.truncatedIndex && hi <= b.lastIndex+1 && tail.covers(lo, hi) {
		return tail.slice(lo, hi, maxSize), nil
	}
	st.log.storeReads.Add(1)
	b, txn, done, err := st.log.view(st.group)
	if err != nil {
		return nil, err
	}
	defer done()
	if lo <= b.truncatedIndex {
		return nil, raft.ErrCompacted
	}
	if hi > b.lastIndex+1 {
		return nil, fmt.Errorf("raft group %d: entries [%d, %d) past the last index %d: %w",
			st.group, lo, hi, b.lastIndex, raft.ErrUnavailable)
	}
	if b.lastIndex == b.truncatedIndex {
		return nil, raft.ErrUnavailable
	}
	ents := make([]*raftpb.Entry, 0, min(hi-lo, 64))
	it := txn.NewIterator(badger.IteratorOptions{Prefix: raftEntryPrefix(st.group)})
	defer it.Close()
	var size uint64
	next := lo
	for it.Seek(raftEntryKey(st.group, lo)); next < hi; it.Next() {
		if !it.Valid() || raftEntryIndex(it.Item().Key()) != next {
			return nil, fmt.Errorf("raft group %d: entry %d missing: %w", st.group, next, raft.ErrUnavailable)
		}
		e, err := decodeEntry(it.Item())
		if err != nil {
			return nil, orrery.Wrap(orrery.CodeInternal, err, "raft group %d", st.group)
		}
		size += uint64(proto.Size(e))
		if len(ents) > 0 && size > maxSize {
			break
		}
		ents = append(ents, e)
		next++
	}
	return ents, nil
}

// Term implements raft.Storage.
func (st *badgerRaftStorage) Term(i uint64) (uint64, error) {
	st.log.mu.RLock()
	b, tail := st.log.groups[st.group], st.log.tails[st.group]
	st.log.mu.RUnlock()
	if term, ok, err := b.term(i); ok {
		return term, err
	}
	if term, ok := tail.term(i); ok {
		return term, nil
	}
	b, txn, done, err := st.log.view(st.group)
	if err != nil {
		return 0, err
	}
	defer done()
	if term, ok, err := b.term(i); ok { // a write moved the bounds meanwhile
		return term, err
	}
	item, err := txn.Get(raftEntryKey(st.group, i))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, fmt.Errorf("raft group %d: entry %d missing: %w", st.group, i, raft.ErrUnavailable)
	}
	if err != nil {
		return 0, orrery.Wrap(orrery.CodeUnavailable, err, "raft group %d: read entry %d", st.group, i)
	}
	e, err := decodeEntry(item)
	if err != nil {
		return 0, orrery.Wrap(orrery.CodeInternal, err, "raft group %d", st.group)
	}
	return e.GetTerm(), nil
}

// LastIndex implements raft.Storage.
func (st *badgerRaftStorage) LastIndex() (uint64, error) {
	return st.log.bounds(st.group).lastIndex, nil
}

// FirstIndex implements raft.Storage.
func (st *badgerRaftStorage) FirstIndex() (uint64, error) {
	return st.log.bounds(st.group).firstIndex(), nil
}

// Snapshot implements raft.Storage: the persisted snapshot's metadata and data, or an empty
// snapshot.
func (st *badgerRaftStorage) Snapshot() (*raftpb.Snapshot, error) {
	_, txn, done, err := st.log.view(st.group)
	if err != nil {
		return nil, err
	}
	defer done()
	snap, err := loadSnapshot(txn, st.group)
	if err != nil {
		return nil, orrery.Wrap(orrery.CodeInternal, err, "silo store")
	}
	return snap, nil
}
