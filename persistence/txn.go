package persistence

import (
	"bytes"
	"errors"

	"github.com/dgraph-io/badger/v4"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/grains/kv"
)

// ErrCommitFailed is in the chain of the error a write returns when Badger failed to commit or
// sync it. The write may or may not be on disk, and Badger may already show it to readers, so
// the store refuses every later call with it: the silo must stop and recover from disk.
var ErrCommitFailed = errors.New("commit not durable")

// ErrBatchTooBig is in the chain of the error a Txn write (or PartitionState.Apply) returns
// when the transaction exceeds Badger's limit (PartitionState.MaxBatchBytes). Nothing is
// written; callers split the batch.
var ErrBatchTooBig = errors.New("batch exceeds the store's transaction limit")

// ErrValueTooBig is in the chain of the error a Txn write returns for a value longer than
// PartitionState.MaxValueBytes. Nothing is written; callers bound payloads well below it.
var ErrValueTooBig = errors.New("value exceeds the store's largest value")

// Txn is one apply of a partition's state: a kv.View over a Badger read-write transaction,
// scoped to the partition's keys (d/<n>/<gen>/, which it neither shows nor accepts in keys:
// the state machines' key "x" is stored as d/<n>/<gen>/x). A Txn is valid only inside the function
// given to PartitionState.Apply.
type Txn struct {
	state  *PartitionState
	prefix []byte // the partition's state keys' prefix, d/<n>/<gen>/
	txn    *badger.Txn
	// finished is set when Apply's fn returns; the Txn must not be used after that.
	finished bool
	// writeErr is the first refused write: a batch that lost a write never commits, even if
	// fn ignored the error.
	writeErr error
	// keys and bytes count the writes made (SiloStore.Written), keys as stored.
	keys, bytes int
}

var _ kv.View = (*Txn)(nil)

// Get implements kv.Reader. The returned value is a copy.
func (t *Txn) Get(key []byte) ([]byte, bool, error) {
	if t.finished {
		return nil, false, errFinished
	}
	return scopedGet(t.txn, t.prefix, key)
}

// Scan implements kv.Reader: keys in [start, end) in ascending order, including this batch's
// own writes made before the call (writes made during the scan are not seen by it).
func (t *Txn) Scan(start, end []byte, fn func(key, value []byte) (bool, error)) error {
	if t.finished {
		return errFinished
	}
	return scopedScan(t.txn, t.prefix, start, end, fn)
}

// Set implements kv.View. Values must stay inline in the LSM tree: a larger one would go to
// the value log, whose sync errors Badger only logs.
func (t *Txn) Set(key, value []byte) error {
	if len(key) == 0 {
		return t.refuse(orrery.Errorf(orrery.CodeInternal, "empty key"))
	}
	if int64(len(value)) > t.state.MaxValueBytes() {
		return t.refuse(orrery.Wrap(orrery.CodeInternal, ErrValueTooBig,
			"partition %d: value of %d bytes under key %q; the largest is %d bytes",
			t.state.n, len(value), key, t.state.MaxValueBytes()))
	}
	stored := t.key(key)
	if err := t.txn.Set(stored, value); err != nil {
		return t.writeError(err, key)
	}
	t.keys, t.bytes = t.keys+1, t.bytes+len(stored)+len(value)
	return nil
}

// Delete implements kv.View.
func (t *Txn) Delete(key []byte) error {
	if len(key) == 0 {
		return t.refuse(orrery.Errorf(orrery.CodeInternal, "empty key"))
	}
	stored := t.key(key)
	if err := t.txn.Delete(stored); err != nil {
		return t.writeError(err, key)
	}
	t.keys, t.bytes = t.keys+1, t.bytes+len(stored)
	return nil
}

// key is the store key of the state key k.
func (t *Txn) key(k []byte) []byte {
	return append(append(make([]byte, 0, len(t.prefix)+len(k)), t.prefix...), k...)
}

func (t *Txn) writeError(err error, key []byte) error {
	if errors.Is(err, badger.ErrTxnTooBig) {
		return t.refuse(t.state.store.errBatchTooBig(err))
	}
	return t.refuse(orrery.Wrap(orrery.CodeInternal, err, "partition %d: write key %q", t.state.n, key))
}

// refuse records the first refused write, which keeps the batch from committing.
func (t *Txn) refuse(err error) error {
	if t.writeErr == nil {
		t.writeErr = err
	}
	return err
}

// errFinished is returned by a Txn or View reader used after its function returned.
var errFinished = orrery.Errorf(orrery.CodeInternal, "transaction used after its function returned")

// reader is a kv.Reader over a read-only Badger transaction, scoped to one partition.
type reader struct {
	txn      *badger.Txn
	prefix   []byte
	finished bool
}

func (r *reader) Get(key []byte) ([]byte, bool, error) {
	if r.finished {
		return nil, false, errFinished
	}
	return scopedGet(r.txn, r.prefix, key)
}

func (r *reader) Scan(start, end []byte, fn func(key, value []byte) (bool, error)) error {
	if r.finished {
		return errFinished
	}
	return scopedScan(r.txn, r.prefix, start, end, fn)
}

// scopedGet reads the state key key of the partition whose keys start with prefix.
func scopedGet(txn *badger.Txn, prefix, key []byte) ([]byte, bool, error) {
	if len(key) == 0 {
		return nil, false, nil
	}
	return getRaw(txn, append(bytes.Clone(prefix), key...))
}

// scopedScan iterates the state keys in [start, end) of the partition whose keys start with
// prefix, handing fn the keys without it; a nil end is the end of the partition's keys.
func scopedScan(txn *badger.Txn, prefix, start, end []byte, fn func(key, value []byte) (bool, error)) error {
	from := append(bytes.Clone(prefix), start...)
	to := kv.PrefixEnd(prefix)
	if end != nil {
		to = append(bytes.Clone(prefix), end...)
	}
	return iterate(txn, from, to, func(key, value []byte) (bool, error) {
		return fn(key[len(prefix):], value)
	})
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

// iterate calls fn for every key in [start, end) ascending; a nil end means no bound. Errors
// from fn are returned unchanged; Badger's are wrapped.
func iterate(txn *badger.Txn, start, end []byte, fn func(key, value []byte) (bool, error)) error {
	if end != nil && bytes.Compare(start, end) >= 0 {
		return nil
	}
	// Prefetching would copy values the caller may not want (scans usually stop early). Every
	// key of [start, end) begins with their common prefix; naming it lets Badger leave out
	// the tables that hold no such key instead of opening and seeking one iterator per table.
	it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: commonPrefix(start, end)})
	defer it.Close()
	for it.Seek(start); it.Valid(); it.Next() {
		item := it.Item()
		key := item.Key()
		if end != nil && bytes.Compare(key, end) >= 0 {
			return nil
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

// openBadger opens the Badger database in dir in managed mode with the project's options
// (badgerOptions). Every failure is Unavailable; what names the store in the message, and a
// held directory lock says the store is held elsewhere.
func openBadger(dir string, opts Options, what string) (*badger.DB, error) {
	db, err := badger.OpenManaged(badgerOptions(dir, opts))
	if err != nil {
		// Badger flattens the flock error into a string, so ask the lock itself.
		if directoryLockHeld(dir) {
			return nil, orrery.Wrap(orrery.CodeUnavailable, err,
				"%s store %s is held elsewhere: another process has its directory lock", what, dir)
		}
		return nil, orrery.Wrap(orrery.CodeUnavailable, err, "open %s store %s", what, dir)
	}
	return db, nil
}
