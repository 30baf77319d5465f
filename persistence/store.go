package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// Keys of the persistence layer's own records, all under keys.Persistence ("p/").
var (
	epochKey        = []byte("p/activation-epoch")
	loggedTimeKey   = []byte("p/logged-time")
	appliedIndexKey = []byte("p/applied-index")
	journalPrefix   = []byte("p/journal/")
	reservedEnd     = kv.PrefixEnd(keys.Persistence)
)

// ErrCommitFailed is in the chain of the error Update returns when Badger failed to commit or
// sync a batch. The batch may or may not be on disk, and Badger may already show it to
// readers, so the activation must stop: the Store refuses every later call, and the next
// activation recovers from disk. Never continue after a failed sync.
var ErrCommitFailed = errors.New("commit not durable")

// ErrBatchTooBig is in the chain of the error a Txn write (or Update) returns when the batch
// exceeds Badger's transaction limit (Store.MaxBatchBytes). Nothing is written; callers bound
// batches by bytes and count so this never happens.
var ErrBatchTooBig = errors.New("batch exceeds the store's transaction limit")

// ErrValueTooBig is in the chain of the error a Txn write returns for a value longer than
// Store.MaxValueBytes. Nothing is written; callers bound payloads well below it.
var ErrValueTooBig = errors.New("value exceeds the store's largest value")

// Store is one partition's Badger database, opened with the directory lock held. It is safe
// for concurrent use: Apply and Update calls are serialized (one writer), Sync calls are
// serialized with each other but run alongside Apply, and View calls run concurrently.
type Store struct {
	dir  string
	opts Options
	db   *badger.DB

	epoch uint64
	// loggedTime and appliedIndex are the last applied batch's: what the next batch follows.
	loggedTime   atomic.Int64
	appliedIndex atomic.Uint64
	// applied is the last applied batch's mark, durable the last durable one's.
	applied, durable atomic.Pointer[mark]
	// versions numbers commits and reads (the database is opened in managed mode).
	versions versions
	// journalFloor is an applied index no journal record is below (0: unknown). Trimming
	// starts there: the journal is deleted from its front, and an LSM iterator starting at
	// the front would step over every record deleted since the last compaction.
	journalFloor atomic.Uint64

	// writeMu serializes Apply; failed poisons the store after a commit or sync error.
	writeMu sync.Mutex
	failed  atomic.Pointer[orrery.Error]
	// syncMu serializes Sync, which syncs the write-ahead logs through wals.
	syncMu sync.Mutex
	wals   walSyncer

	// lifeMu guards closed: calls that use db hold it shared, Close holds it exclusively.
	lifeMu sync.RWMutex
	closed bool
}

// Open opens the partition store in dir, creating it if needed, and starts a new activation:
// the activation epoch is incremented and durably written before Open returns.
//
// Badger's directory lock (flock) is the single-writer fence. If another Store, in this
// process or another, holds dir, Open fails with an error matching orrery.ErrUnavailable that
// says the partition is held elsewhere; it succeeds once the holder has closed or died. Other
// failures to open (disk full, damaged files) are Unavailable too: the partition cannot be
// served, and nothing about the caller's request is wrong.
func Open(dir string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	opts.Logger = opts.Logger.With("partition_dir", dir)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, orrery.Wrap(orrery.CodeUnavailable, err, "create partition directory %s", dir)
	}
	if err := checkFreeSpace(dir, opts); err != nil {
		return nil, err
	}
	db, err := openBadger(dir, opts, "partition")
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, opts: opts, db: db, wals: newWALSyncer(dir)}
	s.versions.last = db.MaxVersion()
	s.versions.durable = s.versions.last
	if err := s.activate(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// openBadger opens the Badger database in dir in managed mode with the project's options
// (badgerOptions). Every failure is Unavailable; what names the store in the message
// ("partition", "silo"), and a held directory lock says the store is held elsewhere.
func openBadger(dir string, opts Options, what string) (*badger.DB, error) {
	db, err := badger.OpenManaged(badgerOptions(dir, opts))
	if err != nil {
		// Badger flattens the flock error into a string, so ask the lock itself.
		if directoryLockHeld(dir) {
			return nil, orrery.Wrap(orrery.CodeUnavailable, err,
				"%s store %s is held elsewhere: another store has its directory lock", what, dir)
		}
		return nil, orrery.Wrap(orrery.CodeUnavailable, err, "open %s store %s", what, dir)
	}
	return db, nil
}

// activate loads the persisted counters and durably writes the next activation epoch.
func (s *Store) activate() error {
	txn, done := s.newTxn(true)
	defer done()
	epoch, err := loadUint64(txn, epochKey)
	if err != nil {
		return err
	}
	logged, err := loadUint64(txn, loggedTimeKey)
	if err != nil {
		return err
	}
	applied, err := loadUint64(txn, appliedIndexKey)
	if err != nil {
		return err
	}
	epoch++
	if err := txn.Set(epochKey, binary.BigEndian.AppendUint64(nil, epoch)); err != nil {
		return orrery.Wrap(orrery.CodeInternal, err, "partition %s: write activation epoch", s.dir)
	}
	at, err := s.commit(txn)
	if err == nil {
		err = s.wals.sync()
	}
	if err != nil {
		return orrery.Wrap(orrery.CodeUnavailable, fmt.Errorf("%w: %w", ErrCommitFailed, err),
			"partition %s: persist activation epoch %d", s.dir, epoch)
	}
	s.epoch = epoch
	s.loggedTime.Store(int64(logged))
	s.appliedIndex.Store(applied)
	m := &mark{version: at, appliedIndex: applied, loggedTime: int64(logged)}
	s.applied.Store(m)
	s.durable.Store(m)
	s.db.SetDiscardTs(s.versions.synced(at))
	return nil
}

// mark is where a batch left the store: its Badger version, applied index and logged time.
type mark struct {
	version      uint64
	appliedIndex uint64
	loggedTime   int64
}

// newTxn starts a transaction; an update reads at the last applied version, a read-only one
// at the last durable version (or the last applied one, with applied). done discards it and
// releases the version.
func (s *Store) newTxn(update bool) (txn *badger.Txn, done func()) {
	return s.newTxnAt(update, update)
}

func (s *Store) newTxnAt(update, applied bool) (txn *badger.Txn, done func()) {
	at := s.versions.beginRead(applied)
	txn = s.db.NewTransactionAt(at, update)
	return txn, func() {
		txn.Discard()
		s.versions.endRead(at)
	}
}

// commit hands txn to Badger at the next version and returns once Badger has applied it
// (readable at that version, written to the write-ahead log but not synced). Only the single
// writer (Apply, or activate before the store is returned) calls it.
func (s *Store) commit(txn *badger.Txn) (uint64, error) {
	at := s.versions.next()
	if err := txn.CommitAt(at, nil); err != nil {
		return 0, err
	}
	s.versions.applied(at)
	return at, nil
}

// Dir is the partition directory.
func (s *Store) Dir() string { return s.dir }

// Epoch is this activation's epoch: 1 on the first open of a directory, one more on each
// later open.
func (s *Store) Epoch() uint64 { return s.epoch }

// LoggedTime is the last applied logged time in Unix microseconds (0 before any batch): the
// next batch's logged time must follow it, durable or not.
func (s *Store) LoggedTime() int64 { return s.loggedTime.Load() }

// AppliedIndex is the last applied index (0 before any batch), durable or not.
func (s *Store) AppliedIndex() uint64 { return s.appliedIndex.Load() }

// Durable is the applied index and logged time of the last durable batch: what a View sees.
func (s *Store) Durable() (appliedIndex uint64, loggedTime int64) {
	m := s.durable.Load()
	return m.appliedIndex, m.loggedTime
}

// MaxBatchBytes bounds one Update: a batch must stay strictly below it, in Badger's accounting
// of key + value + 12 bytes per write. Callers bound batch bytes with margin for the journal
// record, which repeats the batch's commands, and for the persistence layer's three counters.
func (s *Store) MaxBatchBytes() int64 { return s.db.MaxBatchSize() }

// MaxValueBytes is the longest value a Txn accepts: every value stays inline in the LSM tree,
// below Options.ValueThresholdBytes, so the value log is never written.
func (s *Store) MaxValueBytes() int64 { return s.opts.ValueThresholdBytes - 1 }

// MaxBatchWrites bounds one Update: a batch must make strictly fewer writes than this.
func (s *Store) MaxBatchWrites() int64 { return s.db.MaxBatchCount() }

// Close closes the database and releases the directory lock. It waits for running Update and
// View calls. Closing twice is not an error.
func (s *Store) Close() error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.syncMu.Lock()
	s.wals.close()
	s.syncMu.Unlock()
	if err := s.db.Close(); err != nil {
		return orrery.Wrap(orrery.CodeInternal, err, "close partition store %s", s.dir)
	}
	return nil
}

// RunValueLogGC rewrites value-log files until Badger finds none worth rewriting at
// discardRatio (0 < ratio < 1; 0.5 is Badger's recommendation). A GC already running elsewhere
// is not an error.
func (s *Store) RunValueLogGC(discardRatio float64) error {
	s.lifeMu.RLock()
	defer s.lifeMu.RUnlock()
	if s.closed {
		return s.errClosed()
	}
	for {
		err := s.db.RunValueLogGC(discardRatio)
		switch {
		case err == nil:
			continue
		case errors.Is(err, badger.ErrNoRewrite), errors.Is(err, badger.ErrRejected):
			return nil
		case errors.Is(err, badger.ErrInvalidRequest):
			return orrery.Wrap(orrery.CodeInternal, err, "value-log GC discard ratio %v", discardRatio)
		default:
			return orrery.Wrap(orrery.CodeUnavailable, err, "partition %s: value-log GC", s.dir)
		}
	}
}

func (s *Store) errClosed() error {
	return orrery.Errorf(orrery.CodeUnavailable, "partition store %s is closed", s.dir)
}

// loadUint64 reads an 8-byte big-endian counter; absent means 0.
func loadUint64(txn *badger.Txn, key []byte) (uint64, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, orrery.Wrap(orrery.CodeUnavailable, err, "read %s", key)
	}
	var v uint64
	err = item.Value(func(b []byte) error {
		if len(b) != 8 {
			return fmt.Errorf("%s holds %d bytes, want 8", key, len(b))
		}
		v = binary.BigEndian.Uint64(b)
		return nil
	})
	if err != nil {
		return 0, orrery.Wrap(orrery.CodeInternal, err, "decode %s", key)
	}
	return v, nil
}
