package persistence

import (
	"fmt"
	"sync"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// RaftLog persists the Raft state of many groups (one per partition) in one store, so that a
// silo's Raft loop makes every group's new entries, hard state and snapshot of a round durable
// with one synced write (docs/design.md §3). The real implementation keeps them in the silo's Badger
// store under r/<n>/; MemoryRaftLog is its in-memory twin. Both pass the same conformance
// suite.
type RaftLog interface {
	// Storage is group's raft.Storage, what its RawNode reads: entries, terms, first and last
	// index, hard state, and the conf state and snapshot persisted last. It reflects every
	// Persist that returned.
	Storage(group int) (raft.Storage, error)
	// Persist makes every write durable at once (one synced write), or none of them (a Persist
	// that changes nothing but hard states' commit indexes may leave its durability to the
	// next synced write, as raft.MustSync allows; BadgerRaftLog does): for each
	// group, in order, its snapshot (which replaces the whole log, as raft.MemoryStorage does), its
	// entries (each entry at index i discards every persisted entry at i or after) and its hard
	// state. Empty parts (raft.IsEmptySnap, raft.IsEmptyHardState, no entries) are skipped.
	Persist(writes []RaftWrite) error
	// Compact discards group's log entries before index (they are applied, and covered by the
	// replicas' states or by a state snapshot) and records, in the same write, the snapshot
	// that stands for them: metadata only, at index-1 with that entry's term and conf, the
	// group's conf state as of index-1 (a reopened group applies the conf changes after it
	// again). Storage's Snapshot
	// therefore is never empty once entries were compacted, as Raft requires when it must
	// catch a follower up past the log's start. Compacting at or below the first index is a
	// no-op; compacting past the last index + 1 is an error.
	Compact(group int, index uint64, conf *raftpb.ConfState) error
}

// RaftWrite is what one group's Ready asks to persist.
type RaftWrite struct {
	Group     int
	Snapshot  *raftpb.Snapshot // nil or empty: none
	Entries   []*raftpb.Entry
	HardState *raftpb.HardState // nil or empty: unchanged
}

// MemoryRaftLog is RaftLog's in-memory twin, on raft.MemoryStorage: what Persist wrote stays
// until the process ends. It is safe for concurrent use.
type MemoryRaftLog struct {
	mu     sync.Mutex
	groups map[int]*raft.MemoryStorage
}

// NewMemoryRaftLog returns an empty in-memory Raft log.
func NewMemoryRaftLog() *MemoryRaftLog {
	return &MemoryRaftLog{groups: map[int]*raft.MemoryStorage{}}
}

var _ RaftLog = (*MemoryRaftLog)(nil)

// Storage implements RaftLog.
func (m *MemoryRaftLog) Storage(group int) (raft.Storage, error) {
	if group < 0 {
		return nil, fmt.Errorf("raft group %d: must not be negative", group)
	}
	return m.group(group), nil
}

func (m *MemoryRaftLog) group(group int) *raft.MemoryStorage {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.groups[group]
	if !ok {
		s = raft.NewMemoryStorage()
		m.groups[group] = s
	}
	return s
}

// Persist implements RaftLog. Writes are applied one group after another; a failing write
// (an entry that leaves a gap, a snapshot older than the log) leaves the earlier ones applied,
// which the twin reports but does not undo.
func (m *MemoryRaftLog) Persist(writes []RaftWrite) error {
	for _, w := range writes {
		if w.Group < 0 {
			return fmt.Errorf("raft group %d: must not be negative", w.Group)
		}
		s := m.group(w.Group)
		if !raft.IsEmptySnap(w.Snapshot) {
			if err := s.ApplySnapshot(w.Snapshot); err != nil {
				return fmt.Errorf("raft group %d: snapshot at %d: %w", w.Group, w.Snapshot.GetMetadata().GetIndex(), err)
			}
		}
		if len(w.Entries) > 0 {
			if err := s.Append(w.Entries); err != nil {
				return fmt.Errorf("raft group %d: append at %d: %w", w.Group, w.Entries[0].GetIndex(), err)
			}
		}
		if !raft.IsEmptyHardState(w.HardState) {
			if err := s.SetHardState(w.HardState); err != nil {
				return fmt.Errorf("raft group %d: hard state: %w", w.Group, err)
			}
		}
	}
	return nil
}

// Compact implements RaftLog.
func (m *MemoryRaftLog) Compact(group int, index uint64, conf *raftpb.ConfState) error {
	s := m.group(group)
	first, err := s.FirstIndex()
	if err != nil {
		return err
	}
	if index <= first {
		return nil
	}
	last, err := s.LastIndex()
	if err != nil {
		return err
	}
	if index > last+1 {
		return fmt.Errorf("raft group %d: compact before %d: the log ends at %d", group, index, last)
	}
	if _, err := s.CreateSnapshot(index-1, raftpb.EnsureConfState(conf), nil); err != nil {
		return fmt.Errorf("raft group %d: snapshot record at %d: %w", group, index-1, err)
	}
	if err := s.Compact(index - 1); err != nil && err != raft.ErrCompacted {
		return fmt.Errorf("raft group %d: compact before %d: %w", group, index, err)
	}
	return nil
}
