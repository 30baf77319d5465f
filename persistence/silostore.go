package persistence

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"

	"github.com/orreryhq/orrery"
)

// SiloStoreDir is the directory of a silo's store: <dataRoot>/store.
func SiloStoreDir(dataRoot string) string { return filepath.Join(dataRoot, "store") }

// SiloStore is a silo's one Badger database, holding every partition replica the silo hosts:
// the silo metadata, each partition's Raft log (RaftLog) and each partition's state
// (PartitionState); see doc.go. It is opened under Badger's directory lock. Its commits are
// serialized; the Raft log's writes are synced before they are shown to readers, the state's
// applies are not (see PartitionState). It is safe for concurrent use.
type SiloStore struct {
	dir        string
	opts       Options
	freeSpace  *freeSpaceCheck
	db         *badger.DB
	siloID     uint64
	partitions int
	// clusterID is the stored cluster id (0: none yet); SetClusterID writes it under writeMu.
	clusterID atomic.Uint64
	// retired are the retired silos' ids, ascending (RecordRetired writes them under writeMu).
	retiredMu sync.Mutex
	retired   []uint64
	raftLog   *BadgerRaftLog

	// versions numbers commits and reads (the database is opened in managed mode).
	versions versions
	// writeMu serializes the synced writes (write); wals syncs them (used under writeMu).
	// commitMu serializes the hand-over of every commit, synced or not (PartitionState.Apply),
	// so versions reach Badger in order (see commit).
	writeMu  sync.Mutex
	commitMu sync.Mutex
	wals     walSyncer
	// states are the partitions' states, by partition.
	states []*PartitionState
	// failed poisons the store after a commit or sync error.
	failed atomic.Pointer[orrery.Error]

	// lifeMu guards closed: calls that use db hold it shared, Close holds it exclusively.
	lifeMu sync.RWMutex
	closed bool

	// written counts what the applies and the Raft rounds wrote (Written).
	written writeCounters
}

// OpenSiloStore opens the silo store in dir (SiloStoreDir), creating it if needed. The first
// open creates the silo id and records partitions; a later open with another partition count
// is a Validation error naming both counts. Failures to open are Unavailable, and a store held
// by another process (its directory lock) says so.
func OpenSiloStore(dir string, partitions int, opts Options) (*SiloStore, error) {
	if partitions < 1 {
		return nil, orrery.Invalid("partitions", "must be at least 1, got %d", partitions)
	}
	opts = opts.withDefaults()
	opts.Logger = opts.Logger.With("silo_store", dir)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, orrery.Wrap(orrery.CodeUnavailable, err, "create silo store directory %s", dir)
	}
	if err := checkFreeSpace(dir, opts); err != nil {
		return nil, err
	}
	db, err := openBadger(dir, opts, "silo")
	if err != nil {
		return nil, err
	}
	s := &SiloStore{dir: dir, opts: opts, freeSpace: &freeSpaceCheck{dir: dir, opts: opts}, db: db, partitions: partitions, wals: newWALSyncer(dir)}
	s.versions.last = db.MaxVersion()
	s.versions.durable = s.versions.last
	if err := s.loadMeta(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if s.raftLog, err = openBadgerRaftLog(s); err != nil {
		_ = db.Close()
		return nil, err
	}
	if s.states, err = openPartitionStates(s); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// loadMeta reads the silo metadata, or creates it on the first open.
func (s *SiloStore) loadMeta() error {
	txn, done := s.read(s.versions.durable)
	defer done()
	id, idFound, err := getRaw(txn, siloIDKey)
	if err != nil {
		return orrery.Wrap(orrery.CodeUnavailable, err, "silo store %s: read the silo id", s.dir)
	}
	count, countFound, err := getRaw(txn, siloPartitionsKey)
	if err != nil {
		return orrery.Wrap(orrery.CodeUnavailable, err, "silo store %s: read the partition count", s.dir)
	}
	switch {
	case idFound && countFound:
		if len(id) != 8 || len(count) != 8 || binary.BigEndian.Uint64(id) == 0 {
			return orrery.Errorf(orrery.CodeInternal, "silo store %s: damaged silo metadata", s.dir)
		}
		if stored := binary.BigEndian.Uint64(count); stored != uint64(s.partitions) {
			return orrery.Invalid("partitions",
				"the silo store %s was created with %d partitions and the silo is configured with %d; "+
					"the count cannot change for an existing store", s.dir, stored, s.partitions)
		}
		s.siloID = binary.BigEndian.Uint64(id)
		if err := s.loadClusterID(txn); err != nil {
			return err
		}
		return s.loadRetired(txn)
	case idFound || countFound:
		return orrery.Errorf(orrery.CodeInternal, "silo store %s: damaged silo metadata (silo id or partition count missing)", s.dir)
	}
	newID, err := randomSiloID()
	if err != nil {
		return orrery.Wrap(orrery.CodeInternal, err, "silo store %s: create a silo id", s.dir)
	}
	_, err = s.write(func(txn *badger.Txn) error {
		if err := txn.Set(siloIDKey, binary.BigEndian.AppendUint64(nil, newID)); err != nil {
			return err
		}
		return txn.Set(siloPartitionsKey, binary.BigEndian.AppendUint64(nil, uint64(s.partitions)))
	})
	if err != nil {
		return err
	}
	s.siloID = newID
	return nil
}

// randomSiloID is a random non-zero 64-bit id.
func randomSiloID() (uint64, error) {
	for {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			return id, nil
		}
	}
}

// Dir is the store's directory.
func (s *SiloStore) Dir() string { return s.dir }

// SiloID is the silo's id: random, non-zero, created by the first open of the store and never
// changed. A silo's Raft replica ids are its silo id.
func (s *SiloStore) SiloID() uint64 { return s.siloID }

// Partitions is the partition count the store was created with.
func (s *SiloStore) Partitions() int { return s.partitions }

// CheckFreeSpace is nil unless the store's disk has less free space than
// Options.MinFreeBytes, when it is an Unavailable error naming the floor: the partitions refuse
// new commands with it. The store's own writes do not check it (they are what the commands
// already accepted need, a bounded amount, and refusing a Raft write is fatal to the silo).
// The file system is read at most every FreeSpaceRecheck.
func (s *SiloStore) CheckFreeSpace() error { return s.freeSpace.check() }

// CheckDrainSpace is CheckFreeSpace against the drain floor, half of Options.MinFreeBytes:
// the partitions take commands that only drain or stop work (engine.Drains) down to it, so that
// a queue can still be consumed and a flood stopped while the disk is below the floor. The
// margin between the two floors is what those commands may still write.
func (s *SiloStore) CheckDrainSpace() error { return s.freeSpace.checkDrain() }

// DiskBytes is the size of the files in the store's directory (Badger's tables, value log,
// write-ahead memtables and manifest), as the file system reports them now.
func (s *SiloStore) DiskBytes() (int64, error) {
	var total int64
	err := filepath.WalkDir(s.dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil // a file Badger removed during the walk
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		total += info.Size()
		return nil
	})
	return total, err
}

// FreeDiskBytes is the space available on the file system holding the store (Options.
// FreeBytesFunc, FreeBytes by default), which the free-space floor is judged against.
func (s *SiloStore) FreeDiskBytes() (uint64, error) { return s.opts.FreeBytesFunc(s.dir) }

// MaxValueBytes is the longest value the store keeps: every value stays inline in the LSM
// tree, below Options.ValueThresholdBytes. A Raft log entry, encoded, must fit in it.
func (s *SiloStore) MaxValueBytes() int64 { return s.opts.ValueThresholdBytes - 1 }

// RaftLog is the Raft log of every partition, kept in this store.
func (s *SiloStore) RaftLog() *BadgerRaftLog { return s.raftLog }

// Close closes the database and releases the directory lock. It waits for running calls.
// Closing twice is not an error.
//
// Below the free-disk floor (Options.MinFreeBytes, read from the file system now) it does not
// close Badger, whose Close flushes the memtable into a new table written through a memory
// mapping: on a full disk that write kills the process with SIGBUS. It syncs the write-ahead
// logs instead, so every apply committed is durable, and returns an Unavailable error saying
// so; the process should exit (the store keeps its directory lock until then), and the next
// open replays the logs as after a crash.
func (s *SiloStore) Close() error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.writeMu.Lock()
	low := checkFreeSpace(s.dir, s.opts)
	var syncErr error
	if low != nil {
		syncErr = s.wals.sync()
	}
	s.wals.close()
	s.writeMu.Unlock()
	if low != nil {
		if syncErr != nil {
			return orrery.Wrap(orrery.CodeUnavailable, errors.Join(low, syncErr),
				"silo store %s left open without a flush, and its write-ahead log did not sync: the applies since the last Raft round are taken back at the next open", s.dir)
		}
		return orrery.Wrap(orrery.CodeUnavailable, low,
			"silo store %s left open without a flush (Badger's flush would write a table on a disk this full): its write-ahead log is synced, and the next open replays it", s.dir)
	}
	if err := s.db.Close(); err != nil {
		return orrery.Wrap(orrery.CodeInternal, err, "close silo store %s", s.dir)
	}
	return nil
}

// read starts a read-only transaction at version at; done discards it and releases at.
func (s *SiloStore) read(at uint64) (txn *badger.Txn, done func()) {
	s.versions.hold(at)
	txn = s.db.NewTransactionAt(at, false)
	return txn, func() {
		txn.Discard()
		s.versions.endRead(at)
	}
}

// readApplied starts a read-only transaction at the last applied version; done discards it and
// releases the version.
func (s *SiloStore) readApplied() (txn *badger.Txn, done func()) {
	at := s.versions.beginRead(true)
	txn = s.db.NewTransactionAt(at, false)
	return txn, func() {
		txn.Discard()
		s.versions.endRead(at)
	}
}

// commitUnsynced commits the longest prefix of writes that one Badger transaction takes (at
// least one write), unsynced, and returns its length: its writes are applied, and durable
// once a later synced write returns. The caller serializes it with the other writers of the
// keys. A single write beyond the transaction limit is ErrBatchTooBig; a failed commit poisons
// the store.
func (s *SiloStore) commitUnsynced(writes []storeWrite) (int, error) {
	s.lifeMu.RLock()
	defer s.lifeMu.RUnlock()
	if err := s.usable(); err != nil {
		return 0, err
	}
	if err := s.freeSpace.check(); err != nil {
		return 0, err
	}
	readAt := s.versions.beginRead(true)
	defer s.versions.endRead(readAt)
	txn := s.db.NewTransactionAt(readAt, true)
	defer txn.Discard()
	n := 0
	for ; n < len(writes); n++ {
		var err error
		if w := writes[n]; w.delete {
			err = txn.Delete(w.key)
		} else {
			err = txn.Set(w.key, w.value)
		}
		if errors.Is(err, badger.ErrTxnTooBig) && n > 0 {
			break
		}
		if errors.Is(err, badger.ErrTxnTooBig) {
			return 0, s.errBatchTooBig(err)
		}
		if err != nil {
			return 0, orrery.Wrap(orrery.CodeInternal, err, "silo store %s: write key %q", s.dir, writes[n].key)
		}
	}
	if _, err := s.commit(txn); err != nil {
		return 0, err
	}
	return n, nil
}

// write runs fn in one Badger transaction, commits it and syncs the write-ahead logs: when it
// returns nil the transaction is durable, at the returned version. The caller holds writeMu
// (or is OpenSiloStore, before the store is shared) and lifeMu, and publishes the version to
// its readers. A write fn refuses because the transaction grew too big is ErrBatchTooBig and
// writes nothing; a failed commit or sync poisons the store (ErrCommitFailed).
func (s *SiloStore) write(fn func(txn *badger.Txn) error) (uint64, error) {
	return s.writeSynced(true, fn)
}

// writeSynced is write, syncing the write-ahead logs only when sync is set: an unsynced write
// is durable with the next synced one (the log is one sequence).
func (s *SiloStore) writeSynced(sync bool, fn func(txn *badger.Txn) error) (uint64, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	readAt := s.versions.beginRead(true)
	defer s.versions.endRead(readAt)
	txn := s.db.NewTransactionAt(readAt, true)
	defer txn.Discard()
	if err := fn(txn); err != nil {
		if errors.Is(err, badger.ErrTxnTooBig) {
			return 0, s.errBatchTooBig(err)
		}
		return 0, err
	}
	at, err := s.commit(txn)
	if err != nil {
		return 0, err
	}
	if !sync {
		return at, nil
	}
	if err := s.wals.sync(); err != nil {
		return 0, s.poison(err, "sync failed")
	}
	return at, nil
}

// commit hands txn to Badger at the next version and returns once Badger has applied it, and
// with it every commit before (readable at that version, in the write-ahead log but not
// synced; see versions). It holds commitMu only to hand the transaction over, so that versions
// reach Badger in order; the wait is outside it, so the commits of several partitions' applies
// are in Badger at once and its writer applies them as one batch. A failed commit poisons the
// store.
func (s *SiloStore) commit(txn *badger.Txn) (uint64, error) {
	ended := make(chan error, 1)
	s.commitMu.Lock()
	at := s.versions.next()
	err := txn.CommitAt(at, func(err error) { ended <- err })
	s.commitMu.Unlock()
	if err == nil {
		err = <-ended
	}
	if err != nil {
		if errors.Is(err, badger.ErrTxnTooBig) {
			return 0, s.errBatchTooBig(err)
		}
		return 0, s.poison(err, "commit failed")
	}
	s.versions.applied(at)
	return at, nil
}

// errBatchTooBig is the error of a write beyond Badger's transaction limit; nothing is written.
func (s *SiloStore) errBatchTooBig(err error) error {
	return orrery.Wrap(orrery.CodeInternal, fmt.Errorf("%w: %w", ErrBatchTooBig, err),
		"silo store %s: the write exceeds %d bytes or %d writes", s.dir, s.db.MaxBatchSize(), s.db.MaxBatchCount())
}

// published records that the readers now read at version at (durable: write returned it).
func (s *SiloStore) published(at uint64) {
	s.db.SetDiscardTs(s.versions.synced(at))
}

// poison records a commit or sync error: the store refuses every later call with it.
func (s *SiloStore) poison(err error, what string) error {
	failed := orrery.Wrap(orrery.CodeUnavailable, fmt.Errorf("%w: %w", ErrCommitFailed, err),
		"silo store %s: %s; the silo must stop and recover from disk", s.dir, what)
	s.failed.Store(failed)
	return failed
}

// usable is nil unless the store is closed or poisoned. The caller holds lifeMu.
func (s *SiloStore) usable() error {
	if s.closed {
		return orrery.Errorf(orrery.CodeUnavailable, "silo store %s is closed", s.dir)
	}
	if failed := s.failed.Load(); failed != nil {
		return failed
	}
	return nil
}
