package persistence

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// Txn is one batch: a kv.View over a Badger read-write transaction, plus the persistence
// layer's own writes (journal, logged time, applied index). It sees the state machines' key
// space only: keys under "p/" read as absent, are skipped by Scan and cannot be written through
// the View methods. A Txn is valid only inside the function given to Update.
type Txn struct {
	store *Store
	txn   *badger.Txn
	// finished is set when Update's fn returns; the Txn must not be used after that.
	finished bool
	// writes counts Set and Delete calls; an Update without writes commits nothing.
	writes int
	// writeErr is the first refused write: a batch that lost a write never commits, even if
	// fn ignored the error.
	writeErr error

	// Values set in this batch, published to the Store only after a durable commit.
	loggedTime      int64
	appliedIndex    uint64
	setLoggedTime   bool
	setAppliedIndex bool
	// journalFloor, when set, is the Store's journal floor once this batch commits.
	journalFloor uint64
}

var _ kv.View = (*Txn)(nil)

// Update runs fn in one read-write transaction and commits it durably: Apply, then Sync. When
// Update returns nil the batch is on disk. If fn returns an error, nothing is written and
// Update returns that error unchanged. Refusals and commit errors are Apply's and Sync's.
func (s *Store) Update(fn func(txn *Txn) error) error {
	if err := s.Apply(fn); err != nil {
		return err
	}
	return s.Sync()
}

// Apply runs fn in one read-write transaction, reading at the last applied version, and hands
// the batch to Badger: when Apply returns nil the batch is applied (the next Apply and
// ViewApplied read it) but not yet durable; Sync makes it so. A crash before that Sync may lose
// it, and the batches applied after it with it (never it alone: the write-ahead log is one
// sequence). Nothing a batch caused may be shown outside the store's writer before a Sync
// returns. If fn returns an error, nothing is written and Apply returns that error unchanged.
//
// Apply refuses with Unavailable, before writing, when the store is closed or its disk has less
// free space than Options.MinFreeBytes.
//
// A commit error is different: its chain holds ErrCommitFailed, the batch may or may not be on
// disk, and the Store refuses every later call with the same error. The caller must stop the
// activation (close the Store); the next activation recovers from disk.
func (s *Store) Apply(fn func(txn *Txn) error) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.lifeMu.RLock()
	defer s.lifeMu.RUnlock()
	if err := s.usable(); err != nil {
		return err
	}
	if err := checkFreeSpace(s.dir, s.opts); err != nil {
		return err
	}
	btxn, done := s.newTxn(true)
	defer done()
	t := &Txn{store: s, txn: btxn}
	err := fn(t)
	t.finished = true
	if err != nil {
		return err
	}
	if t.writeErr != nil {
		return t.writeErr
	}
	if t.writes == 0 {
		return nil
	}
	at, err := s.commit(btxn)
	if err != nil {
		if errors.Is(err, badger.ErrTxnTooBig) { // checked before anything is written
			return s.errBatchTooBig(err)
		}
		return s.poison(err, "commit failed")
	}
	if t.setLoggedTime {
		s.loggedTime.Store(t.loggedTime)
	}
	if t.setAppliedIndex {
		s.appliedIndex.Store(t.appliedIndex)
	}
	s.applied.Store(&mark{version: at, appliedIndex: s.appliedIndex.Load(), loggedTime: s.loggedTime.Load()})
	if t.journalFloor > s.journalFloor.Load() {
		s.journalFloor.Store(t.journalFloor)
	}
	return nil
}

// Sync makes every batch applied before it began durable; batches applied meanwhile may be
// made durable too, and the next Sync covers them. One Sync makes any number of batches
// durable, which is what lets a writer group its syncs while it goes on applying. A sync
// error poisons the store like a commit error (ErrCommitFailed in its chain).
func (s *Store) Sync() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.lifeMu.RLock()
	defer s.lifeMu.RUnlock()
	if err := s.usable(); err != nil {
		return err
	}
	target := s.applied.Load()
	if target.version <= s.durable.Load().version {
		return nil
	}
	if err := s.wals.sync(); err != nil {
		return s.poison(err, "sync failed")
	}
	s.durable.Store(target)
	s.db.SetDiscardTs(s.versions.synced(target.version))
	return nil
}

// poison records a commit or sync error: the store refuses every later call with it.
func (s *Store) poison(err error, what string) error {
	failed := orrery.Wrap(orrery.CodeUnavailable, fmt.Errorf("%w: %w", ErrCommitFailed, err),
		"partition %s: %s; the activation must stop and recover from disk", s.dir, what)
	s.failed.Store(failed)
	return failed
}

// Get implements kv.Reader. The returned value is a copy.
func (t *Txn) Get(key []byte) ([]byte, bool, error) { return get(t.txn, key) }

// Scan implements kv.Reader: keys in [start, end) in ascending order, including this batch's
// own writes made before the call (writes made during the scan are not seen by it).
func (t *Txn) Scan(start, end []byte, fn func(key, value []byte) (bool, error)) error {
	if t.finished {
		return errFinished
	}
	return scan(t.txn, start, end, fn)
}

// Set implements kv.View. Keys under "p/" are refused.
func (t *Txn) Set(key, value []byte) error {
	if err := checkStateKey(key); err != nil {
		return err
	}
	return t.set(key, value)
}

// Delete implements kv.View. Keys under "p/" are refused.
func (t *Txn) Delete(key []byte) error {
	if err := checkStateKey(key); err != nil {
		return err
	}
	if err := t.txn.Delete(key); err != nil {
		return t.writeError(err, key)
	}
	t.writes++
	return nil
}

// set writes any key, including the persistence layer's own. Values must stay inline in the
// LSM tree: a larger one would go to the value log, whose sync errors Badger only logs.
func (t *Txn) set(key, value []byte) error {
	if int64(len(value)) > t.store.MaxValueBytes() {
		return t.refuse(orrery.Wrap(orrery.CodeInternal, ErrValueTooBig,
			"partition %s: value of %d bytes under key %q; the largest is %d bytes",
			t.store.dir, len(value), key, t.store.MaxValueBytes()))
	}
	if err := t.txn.Set(key, value); err != nil {
		return t.writeError(err, key)
	}
	t.writes++
	return nil
}

func (t *Txn) writeError(err error, key []byte) error {
	if errors.Is(err, badger.ErrTxnTooBig) {
		return t.refuse(t.store.errBatchTooBig(err))
	}
	return t.refuse(orrery.Wrap(orrery.CodeInternal, err, "partition %s: write key %q", t.store.dir, key))
}

// refuse records the first refused write, which keeps the batch from committing.
func (t *Txn) refuse(err error) error {
	if t.writeErr == nil {
		t.writeErr = err
	}
	return err
}

func (s *Store) errBatchTooBig(err error) error {
	return orrery.Wrap(orrery.CodeInternal, fmt.Errorf("%w: %w", ErrBatchTooBig, err),
		"partition %s: batch exceeds %d bytes or %d writes; bound batches by MaxBatchBytes",
		s.dir, s.MaxBatchBytes(), s.MaxBatchWrites())
}

// checkStateKey refuses keys the state machines may not write.
func checkStateKey(key []byte) error {
	switch {
	case len(key) == 0:
		return orrery.Errorf(orrery.CodeInternal, "empty key")
	case bytes.HasPrefix(key, keys.Persistence):
		return orrery.Errorf(orrery.CodeInternal, "key %q is in the persistence layer's prefix %q", key, keys.Persistence)
	}
	return nil
}

// errFinished is returned by a Txn or View reader used after its function returned.
var errFinished = orrery.Errorf(orrery.CodeInternal, "transaction used after its function returned")

// reader is a kv.Reader over a read-only Badger transaction.
type reader struct {
	txn      *badger.Txn
	finished bool
}

func (r *reader) Get(key []byte) ([]byte, bool, error) { return get(r.txn, key) }

func (r *reader) Scan(start, end []byte, fn func(key, value []byte) (bool, error)) error {
	if r.finished {
		return errFinished
	}
	return scan(r.txn, start, end, fn)
}

// View runs fn over a read-only snapshot of the state machines' key space (keys under "p/" are
// hidden) as of the last durable batch. Reads that must stay bounded wrap the reader with
// NewBudgetReader.
func (s *Store) View(fn func(r kv.Reader) error) error { return s.view(false, fn) }

// ViewApplied is View as of the last applied batch, durable or not: for the store's writer,
// whose decisions about the next batches must follow the batches it applied. What it reads must
// not reach anyone else before a Sync covers it.
func (s *Store) ViewApplied(fn func(r kv.Reader) error) error { return s.view(true, fn) }

func (s *Store) view(applied bool, fn func(r kv.Reader) error) error {
	s.lifeMu.RLock()
	defer s.lifeMu.RUnlock()
	if err := s.usable(); err != nil {
		return err
	}
	txn, done := s.newTxnAt(false, applied)
	defer done()
	r := &reader{txn: txn}
	defer func() { r.finished = true }()
	return fn(r)
}

// usable refuses calls on a closed or poisoned store; the caller holds lifeMu.
func (s *Store) usable() error {
	if s.closed {
		return s.errClosed()
	}
	return s.failure()
}

// failure is the commit error that poisoned the store, if any.
func (s *Store) failure() error {
	if failed := s.failed.Load(); failed != nil {
		return failed
	}
	return nil
}

// get reads a state key; keys under "p/" read as absent.
func get(txn *badger.Txn, key []byte) ([]byte, bool, error) {
	if len(key) == 0 || bytes.HasPrefix(key, keys.Persistence) {
		return nil, false, nil
	}
	return getRaw(txn, key)
}

func getRaw(txn *badger.Txn, key []byte) ([]byte, bool, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, orrery.Wrap(orrery.CodeUnavailable, err, "read key %q", key)
	}
	value, err := item.ValueCopy(nil)
	if err != nil {
		return nil, false, orrery.Wrap(orrery.CodeUnavailable, err, "read value of key %q", key)
	}
	return value, true, nil
}

// scan iterates the state keys in [start, end), skipping the "p/" range.
func scan(txn *badger.Txn, start, end []byte, fn func(key, value []byte) (bool, error)) error {
	return iterate(txn, start, end, true, fn)
}

// iterate calls fn for every key in [start, end) ascending; a nil end means no bound. With
// hideReserved, keys under "p/" are skipped by seeking past them. Errors from fn are returned
// unchanged; Badger's are wrapped.
func iterate(txn *badger.Txn, start, end []byte, hideReserved bool,
	fn func(key, value []byte) (bool, error)) error {
	if end != nil && bytes.Compare(start, end) >= 0 {
		return nil
	}
	// Prefetching would copy values the caller may not want (scans usually stop early). Every
	// key of [start, end) begins with their common prefix; naming it lets Badger leave out
	// the tables that hold no such key instead of opening and seeking one iterator per table.
	it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: commonPrefix(start, end)})
	defer it.Close()
	for it.Seek(start); it.Valid(); {
		item := it.Item()
		key := item.Key()
		if end != nil && bytes.Compare(key, end) >= 0 {
			return nil
		}
		if hideReserved && bytes.HasPrefix(key, keys.Persistence) {
			it.Seek(reservedEnd)
			continue
		}
		var more bool
		var fnErr error
		err := item.Value(func(value []byte) error {
			more, fnErr = fn(key, value)
			return fnErr
		})
		if fnErr != nil {
			return fnErr
		}
		if err != nil {
			return orrery.Wrap(orrery.CodeUnavailable, err, "read value of key %q", key)
		}
		if !more {
			return nil
		}
		it.Next()
	}
	return nil
}

// commonPrefix is the longest common prefix of start and end: every key k with
// start <= k < end begins with it (a key leaving it at some byte would sort before start or
// at or after end). A nil end (no bound) gives none.
func commonPrefix(start, end []byte) []byte {
	if end == nil {
		return nil
	}
	n := 0
	for n < len(start) && n < len(end) && start[n] == end[n] {
		n++
	}
	return start[:n:n]
}
