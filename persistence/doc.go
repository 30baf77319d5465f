// Package persistence owns a silo's storage: the silo store (one Badger database holding the
// silo metadata and every partition's Raft log, BadgerRaftLog) and, for now, one Badger
// database per partition directory, opened under Badger's directory lock (the single-writer
// fence), with the activation epoch, the durable group-commit transaction the state machines
// apply through (a kv.View), the journal, the persisted logged time and applied index, read
// views with budgets, the free-disk floor, value-log GC, and the data root's cluster metadata
// (cluster.json). The per-partition databases coexist with the silo store until partitions
// move onto it (their state under d/<n>/), which removes them.
//
// # Layout
//
//	<data root>/cluster.json          {"partitions": N, "created": ...}, written once (EnsureClusterMeta)
//	<data root>/store/                the silo store's Badger database (SiloStoreDir)
//	<data root>/partitions/<n>/       partition n's Badger database (PartitionDir)
//
// # The silo store
//
// OpenSiloStore opens one Badger database with the same options and the same write-ahead-log
// sync as a partition store (below). Its keys (silokeys.go) write a partition number n as 4
// bytes big-endian and a log index as 8 bytes big-endian, so one partition's keys are
// contiguous, partitions sort by number and entries by index:
//
//	s/silo-id                 8-byte big-endian random non-zero id, created by the first open (SiloID)
//	s/partitions              8-byte big-endian partition count given at creation; another count fails the open
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
// readers and returns. Writes are serialized; a commit or sync error poisons the store, like a
// partition store's. A snapshot makes the group's log start after its index; the entries at or
// before it, and those a Compact discards, are deleted after the write that moved the first
// index, in synced transactions of bounded size, and the next open deletes any a crash left.
//
// For each group it keeps in memory the index and term just before the first entry, the last
// index and term, and the snapshot's index: loaded at open, replaced by each write once it is
// durable. FirstIndex, LastIndex and the terms at those bounds read no disk; entries, other
// terms, the hard state and the snapshot are read from Badger at the version of the last
// durable write, so a reader sees every Persist that returned and nothing of one running.
//
// Inside a database the state machines own every key except the "p/" prefix (keys.Persistence),
// which this package keeps for itself and hides from them (Txn and View neither show nor accept
// it):
//
//	p/activation-epoch   8-byte big-endian, incremented and synced by every Open
//	p/logged-time        8-byte big-endian Unix microseconds of the last batch
//	p/applied-index      8-byte big-endian index of the last batch
//	p/journal/<index>    JournalRecord of the batch with that applied index (8-byte big-endian)
//
// # Durability of a partition store
//
// A batch is applied, then made durable. Store.Apply runs one batch in one Badger
// transaction and returns once Badger has taken it into its memtable and write-ahead log
// (SyncWrites is off): the store's writer (the next Apply, ViewApplied) reads it at once.
// Store.Sync makes every batch applied before it began durable: it fdatasyncs the current
// write-ahead log, and every older log still on disk once, because Badger rotates
// a full memtable into its flush queue without syncing its log, so the tail of the applied
// batches may sit in a log that is no longer current. One Sync covers any number of batches,
// so a writer that applies while the previous Sync runs groups its syncs. Store.Update is
// Apply then Sync. Every reader other than the writer (View) reads the last durable version,
// so nothing a crash could take back is shown; the writer must not let what it applied reach
// anyone else (a receipt) before a Sync covers it. The write-ahead log is one sequence, so a
// crash takes back a suffix of the applied batches, never one in the middle.
//
// # Versions
//
// The database is opened in Badger's managed mode: the store is its only writer, so it
// numbers its own commits (continuing after the database's highest version on open), every
// transaction reads without waiting (the writer at the last applied version, everyone else at
// the last durable one), and the store tells Badger's compaction which old versions no open
// read still needs, never past the last durable version (SetDiscardTs). In the
// default mode each new transaction first waits for Badger's oracle goroutine to mark the
// previous commit done; under load that goroutine ran late and each group commit waited
// about 2 ms for it. A View reads one version: what had committed when it began.
//
// The journal is trimmed from its front. Trimming starts at the index the last committed trim
// reached, so it never walks the deleted records an LSM tree keeps until compaction.
//
// Every value stays inline in the LSM tree. A Txn refuses values longer than
// Store.MaxValueBytes, so the value log stays out of the write path: Badger only logs its sync
// errors.
//
// A commit error is fatal to the activation. The batch may or may not be on disk, and Badger
// may already show it to the writer. Apply, Sync and Update report it with ErrCommitFailed in
// the chain (code Unavailable), and the Store refuses every later call. The caller closes it and stops the
// activation, and the next activation recovers from disk. Never continue after a failed sync.
//
// Below Options.MinFreeBytes of free disk, Open and Apply refuse with Unavailable before
// writing. Otherwise a memtable flush on a full disk kills the whole process with SIGBUS.
//
// # Many databases per process
//
// A silo may hold every partition, so Badger is sized down: two 8 MiB memtables (batches up to
// 15 % of one, about 1.2 MiB: Store.MaxBatchBytes), a 1 MiB block cache, no compression, two
// compactors, four level-0 tables before compaction, 16 MiB value-log files, no metrics, and
// its log routed to slog at WARN. Options.FlushStagger shrinks a partition's memtable by up to
// 7/32 (6.25 MiB, batches up to about 0.93 MiB: MinMaxBatchBytes) so that partitions filled
// at the same rate flush at different moments.
//
// The cost was measured by BenchmarkIdlePartitions (32 partitions open in one process,
// /proc/self/status, Linux VM with 2 cores, Go 1.26, Badger v4.9.6):
//   - freshly opened and idle: 0.15–0.25 MiB RSS per partition (0.14–0.20 MiB anonymous),
//     14 goroutines, 6 file descriptors;
//   - after 4 MiB written to each: 8.6 MiB RSS per partition. That is 4.5 MiB anonymous (the
//     filled part of the memtable) and 4.1 MiB file-backed (the mmapped write-ahead log).
//
// Resident memory grows with use up to a bound, not with time. Anonymous memory is at most two
// memtables of about 10.6 MiB each, plus Badger's table-builder buffers while flushing (about
// 16 MiB, released about 2 s each after the flushes stop), plus the block cache. The
// file-backed part is page cache of the mmapped tables and log. The kernel can reclaim it.
// In a separate run, 8 partitions each had 30 MiB written and then sat idle for 15 s. Each
// then held 12 MiB anonymous and 31 MiB file-backed. With Badger's default options, 32
// databases cost 16 goroutines each. They could also grow to five 64 MiB memtables and a
// 256 MiB block cache each.
package persistence
