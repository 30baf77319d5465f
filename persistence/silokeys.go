package persistence

import "encoding/binary"

// Keys of the silo store (doc.go, "The silo store"). A partition number is written as 4 bytes
// big-endian, so the keys of one partition are contiguous and partitions sort by number; an
// index as 8 bytes big-endian, so a group's entries sort by index.
var (
	siloIDKey         = []byte("s/silo-id")
	siloPartitionsKey = []byte("s/partitions")
	siloClusterIDKey  = []byte("s/cluster-id")
	siloRetiredKey    = []byte("s/retired")
)

// groupPrefix is where partition n's keys of one kind start: kind, then n.
func groupPrefix(kind byte, n int) []byte {
	return binary.BigEndian.AppendUint32([]byte{kind, '/'}, uint32(n))
}

// raftPrefix is the start of partition n's Raft keys: "r/" n "/".
func raftPrefix(n int) []byte { return append(groupPrefix('r', n), '/') }

// statePrefix is the start of partition n's state keys, of every generation: "d/" n "/".
func statePrefix(n int) []byte { return append(groupPrefix('d', n), '/') }

// generationPrefix is the start of partition n's state keys of generation gen (8 bytes
// big-endian): "d/" n "/" gen "/".
func generationPrefix(n int, gen uint64) []byte {
	return append(binary.BigEndian.AppendUint64(statePrefix(n), gen), '/')
}

// raftEntryPrefix is the start of partition n's log entries: "r/" n "/e/".
func raftEntryPrefix(n int) []byte { return append(raftPrefix(n), 'e', '/') }

// raftEntryKey is the key of partition n's log entry at index: "r/" n "/e/" index.
func raftEntryKey(n int, index uint64) []byte {
	return binary.BigEndian.AppendUint64(raftEntryPrefix(n), index)
}

// raftEntryIndex is the index in a key raftEntryKey built.
func raftEntryIndex(key []byte) uint64 { return binary.BigEndian.Uint64(key[len(key)-8:]) }

// raftHardStateKey holds partition n's hard state (a raftpb.HardState): "r/" n "/hard-state".
func raftHardStateKey(n int) []byte { return append(raftPrefix(n), "hard-state"...) }

// raftSnapshotKey holds partition n's last snapshot (a raftpb.Snapshot: metadata with the conf
// state, and data): "r/" n "/snapshot".
func raftSnapshotKey(n int) []byte { return append(raftPrefix(n), "snapshot"...) }

// raftTruncatedKey holds the index and term (8 bytes big-endian each) of the entry just before
// partition n's first log entry, the last one compacted away or covered by the snapshot:
// "r/" n "/truncated".
func raftTruncatedKey(n int) []byte { return append(raftPrefix(n), "truncated"...) }

// raftAppliedKey holds partition n's applied mark (AppliedMark: index and logged time, 8 bytes
// big-endian each), written with each apply of its state: "r/" n "/applied".
func raftAppliedKey(n int) []byte { return append(raftPrefix(n), "applied"...) }

// raftGenerationKey holds the generation of partition n's state (8 bytes big-endian; absent:
// 0), whose keys are under generationPrefix: "r/" n "/generation".
func raftGenerationKey(n int) []byte { return append(raftPrefix(n), "generation"...) }
