package replication

import (
	"encoding/binary"
	"fmt"

	"go.etcd.io/raft/v3/raftpb"
)

// MaxSnapshotChunkBytes bounds one chunk of a state snapshot: a SnapshotReader returns chunks
// of at most this many bytes, and a Driver fails a snapshot whose reader returns a bigger one.
const MaxSnapshotChunkBytes = 1 << 20

// StateMachine is the state side of a Driver: every hosted group's state. Its methods run on
// the driver's goroutine and must not call back into the Driver.
type StateMachine interface {
	// Apply takes a group's committed entries of a round, in log order, once they are in the
	// persisted log (before the round persists its own Writes when an earlier round did, after
	// it and after the round's messages are sent otherwise), to apply them and record
	// c.AppliedIndex with their writes. It may return before they are applied, so that groups
	// apply at the same time and while rounds persist; it calls applied once they are (or
	// with the error that failed them, which is fatal to the driver), from any goroutine,
	// exactly once. A group's calls come in log order, and the next one only after applied
	// was called for the one before (the driver keeps a group out of its rounds meanwhile).
	// An error return is fatal to the driver.
	Apply(c Committed, applied func(error)) error
	// Settle receives a round's Outcomes: answer the committed proposals once applied, fail
	// the lost ones with Unavailable.
	Settle(outcomes []Outcome)
	// Snapshot returns a consistent read of group's state as of its applied index (the last
	// AppliedIndex applied or installed). The read stays consistent while Apply and Install
	// go on; the transport reads it, possibly from another goroutine, and closes it.
	Snapshot(group int) (SnapshotReader, error)
	// Install replaces group's state with a snapshot's: the chunks, read in order until
	// io.EOF, and meta's Index and LoggedTimeMicros as its applied index and logged time.
	// It runs before the round that makes Raft's log start after meta.Index is persisted.
	//
	// Install is atomic across crashes. Until it returns nil, the state read and the state a
	// restart reopens are the old one with its old applied index; once it returns nil, they
	// are the new one. A half-written state is never read: an implementation writes the
	// chunks apart from the served state (under an "installing" marker naming meta.Index) and
	// switches to them in one durable write at the end; a restart that finds the marker
	// discards what was staged and reopens the old state, and the leader sends the snapshot
	// again, since this replica's log still does not reach it. When chunks fails (a lost
	// chunk, a broken stream), Install leaves the old state as well and returns an error
	// wrapping the chunks' error: the driver reports the snapshot as failed and goes on. Any
	// other error is fatal to the driver.
	Install(group int, meta SnapshotMeta, chunks Chunks) error
}

// Chunks is a state snapshot's data as it streams: Next returns the chunks in order, io.EOF
// after the last one, or the error that broke the stream.
type Chunks interface {
	Next() ([]byte, error)
}

// SnapshotReader is a consistent read of one group's state, in chunks of at most
// MaxSnapshotChunkBytes.
type SnapshotReader interface {
	Chunks
	// AppliedIndex is the applied index the read is at.
	AppliedIndex() uint64
	// Close releases the read.
	Close() error
}

// SnapshotMeta describes a state snapshot: the log position of the last entry its state
// covers, the logged time of the last PartitionEntry applied, and the group's conf state there.
type SnapshotMeta struct {
	Index            uint64
	Term             uint64
	LoggedTimeMicros int64
	ConfState        *raftpb.ConfState
}

// raftSnapshot is meta as the raft.Snapshot of a MsgSnap: Raft's metadata, and as data only
// the logged time (8 bytes, big endian). The state itself travels as chunks, never in it.
func (m SnapshotMeta) raftSnapshot() *raftpb.Snapshot {
	return &raftpb.Snapshot{
		Metadata: &raftpb.SnapshotMetadata{
			Index:     new(m.Index),
			Term:      new(m.Term),
			ConfState: raftpb.EnsureConfState(m.ConfState),
		},
		Data: binary.BigEndian.AppendUint64(nil, uint64(m.LoggedTimeMicros)),
	}
}

// snapshotMeta decodes what raftSnapshot encodes.
func snapshotMeta(s *raftpb.Snapshot) (SnapshotMeta, error) {
	md := s.GetMetadata()
	meta := SnapshotMeta{Index: md.GetIndex(), Term: md.GetTerm(), ConfState: raftpb.EnsureConfState(md.GetConfState())}
	switch data := s.GetData(); len(data) {
	case 8:
		meta.LoggedTimeMicros = int64(binary.BigEndian.Uint64(data))
	default:
		return SnapshotMeta{}, fmt.Errorf("snapshot at %d: %d bytes of data, want 8 (the logged time)", meta.Index, len(data))
	}
	return meta, nil
}
