// Package persistence owns a silo's storage: the silo store, one Badger database holding the
// silo metadata, every partition's Raft log (BadgerRaftLog, a RaftLog) and every partition's
// state (PartitionState: the transaction the state machines apply through, a kv.View, with the
// partition's applied mark, and read views with budgets); the free-disk floor; and the logged
// time rule (NextLoggedTime).
//
// # Layout
//
//	<data root>/store/     the silo store's Badger database (SiloStoreDir), under Badger's directory lock
//
// One silo uses a data root at a time: a second OpenSiloStore on it fails with Unavailable,
// saying the store is held elsewhere.
//
// A data root of the old layout, <data root>/cluster.json and one Badger database per
// partition under <data root>/partitions/<n>/ (the state machines' keys and the store's own
// records under p/), is imported into a new silo store by ImportPartitionStores (import.go),
// built in <data root>/store.importing and renamed to store/; the old files are renamed to
// imported-cluster.json and imported-partitions/.
//
// # Keys of the silo store
//
// The keys (silokeys.go) write a partition number n as 4 bytes big-endian and a log index as
// 8 bytes big-endian, so one partition's keys are contiguous, partitions sort by number and
// entries by index:
//
//	s/silo-id                 8-byte big-endian random non-zero id, created by the first open (SiloID)
//	s/partitions              8-byte big-endian partition count given at creation; another count fails the open
//	s/cluster-id              8-byte big-endian non-zero id of the cluster the silo belongs to, written once (SetClusterID); absent: none yet
//	s/retired                 the retired silos' ids, 8 bytes big-endian each, ascending (RecordRetired); absent: none
//	r/<n>/e/<index>           partition n's Raft log entry (raftpb.Entry)
//	r/<n>/hard-state          its Raft hard state (raftpb.HardState)
//	r/<n>/snapshot            its last snapshot (raftpb.Snapshot: metadata with the conf state; data)
//	r/<n>/truncated           index and term (8 bytes big-endian each) of the entry just before its first entry
//	r/<n>/applied             index and logged time (8 bytes big-endian each) of the last entry its state applied
//	r/<n>/generation          8-byte big-endian generation of its state (absent: 0)
//	d/<n>/<gen>/<key>         partition n's state key <key> in generation <gen> (8 bytes big-endian)
//
// Partition n's state is the keys of its current generation (PartitionState). An apply writes
// them and r/<n>/applied in one transaction. PartitionState.Snapshot reads them and the mark
// in one read transaction, as a stream of records (format byte 1, then
// uvarint(len(key)) key uvarint(len(value)) value, ascending) cut into chunks of at most
// MaxSnapshotChunkBytes. PartitionState.Install writes a snapshot's records under generation
// gen+1 in as many unsynced transactions as they need, then switches r/<n>/generation and
// r/<n>/applied in one synced transaction, then deletes generation gen's keys in bounded
// transactions. Nothing reads generation gen+1 before the switch, nor gen after it, so a crash
// leaves the old state or the new one; the open deletes the keys of generations gen-1 and
// gen+1 that a crash left, and refuses a store with state keys of any other.
//
// # The Raft log
//
// BadgerRaftLog implements RaftLog on the silo store. Persist writes every group's snapshot,
// entries (deleting the persisted entries from the first new index on) and hard state in one
// Badger transaction, syncs the write-ahead logs once, and only then shows the result to
// readers and returns. These synced writes are serialized; a commit or sync error poisons the
// store (ErrCommitFailed: every later call fails, and the silo must stop and recover from
// disk; never continue after a failed sync). A snapshot makes the group's log start after its
// index; the entries at or before it, and those a Compact discards, are deleted after the
// write that moved the first index, in synced transactions of bounded size, and the next open
// deletes any a crash left.
//
// For each group it keeps in memory the index and term just before the first entry, the last
// index and term, and the snapshot's index: loaded at open, replaced by each write once it is
// durable, and the group's last entries, up to DefaultRaftTailBytes (its tail, published with
// the bounds; a write that replaces entries builds a new one, so a reader's copy stays the log
// it read). FirstIndex, LastIndex, the terms at those bounds and the tail's entries and terms
// read no disk: the entries a leader reads back when they commit, the round after it
// persisted them, or sends to a follower a little behind. Other entries and terms, the hard
// state and the snapshot are read from Badger at the version of the last durable write, so a
// reader sees every Persist that returned and nothing of one running.
//
// # Partition state
//
// PartitionState.Apply runs one transaction over d/<n>/<gen>/ (a Txn: the state machines see their
// keys without the prefix and cannot reach any other) and commits it with the partition's
// applied mark, without a sync of its own: it applies log entries that a synced Persist made
// durable first, and the write-ahead log is one sequence, so a crash takes back a suffix of the
// applies (their marks with them) and the entries after the surviving mark are applied again.
// The next synced write (a Raft round's) makes every apply committed before it durable.
// Applies of one partition are serialized; different partitions apply at the same time, and
// only the hand-over of their commits to Badger is serialized (in version order): several are
// in Badger at once, which its writer applies as one batch, in order. Views read the last applied state: it follows committed
// entries only, so nothing a crash could take back is ever shown.
//
// # Versions
//
// The database is opened in Badger's managed mode: the store is its only writer, so it
// numbers its own commits (continuing after the database's highest version on open), every
// transaction reads without waiting, and the store tells Badger's compaction which old
// versions no open read still needs (SetDiscardTs). In the default mode each new transaction
// first waits for Badger's oracle goroutine to mark the previous commit done; under load that
// goroutine ran late and each commit waited about 2 ms for it. A view reads one version: what
// had committed when it began.
//
// Every value stays inline in the LSM tree: a Txn refuses values longer than MaxValueBytes and
// a Raft log entry longer than it is refused too, so the value log stays out of the write path
// (Badger only logs its sync errors). Below Options.MinFreeBytes of free disk, opening the store
// fails and CheckFreeSpace tells callers to refuse new work (the partitions refuse new
// commands with Unavailable), so the store's own writes stay within what was accepted before;
// otherwise a memtable flush on a full disk would kill the whole process with SIGBUS.
//
// # Badger options
//
// Two 64 MiB memtables (a transaction may be up to 15 % of one, about 9.6 MB:
// PartitionState.MaxBatchBytes), a 16 MiB block cache, Snappy-compressed tables, two compactors, four
// level-0 tables before compaction, 16 MiB value-log files, no metrics, and Badger's log routed
// to slog at WARN (badgerOptions).
package persistence
