package persistence

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// walSyncer makes a Badger database's write-ahead logs durable, for a database opened with
// SyncWrites off (badgerOptions): Store.Sync and SiloStore's writes use it. It is not safe for
// concurrent use; its owner serializes the calls.
type walSyncer struct {
	dir string
	// synced are the rotated write-ahead logs already synced, wal the newest log listed (the
	// current memtable's, nil until the first sync) and newest its number.
	synced map[string]bool
	wal    *os.File
	newest int
	// syncLog makes one write-ahead log durable (tests replace it to see which logs a sync
	// covers, or to record what a sync made durable).
	syncLog func(f *os.File) error
}

// newWALSyncer returns the syncer of the database in dir.
func newWALSyncer(dir string) walSyncer {
	return walSyncer{dir: dir, synced: map[string]bool{}, syncLog: datasync}
}

// sync makes everything Badger has applied so far durable: the current memtable's
// write-ahead log (the newest) and every older log still on disk, each older one once. Badger
// rotates a full memtable into its flush queue without syncing its log (it does not expect
// SyncWrites off), so the tail of the applied batches may sit in a log that is no longer
// current; it stays on disk until the memtable is flushed to a synced table. A log that is not
// the newest is never written again, so syncing it once is enough.
//
// Badger's DB.Sync is not used. It msyncs the current log and also the current value-log file,
// and nothing reaches the value log here (values stay inline: Options.ValueThresholdBytes, and
// Txn refuses longer ones), so that second msync was about a tenth of every sync's CPU for no
// data. The current log is instead fdatasynced through a descriptor kept open: in Linux,
// msync(MS_SYNC) of a shared mapping and fdatasync of the file are the same operation
// (vfs_fsync_range with datasync), and both write back the pages Badger wrote through its mmap.
//
// Listing the directory on every sync cost 3 % of CPU at 10,000 occurrences a second, so it is
// listed only after a rotation since the last listing: when a log after the newest one listed
// exists (Badger numbers its logs one after another, and a rotation creates the next number),
// or when the newest one listed is gone (several rotations, the logs after it already flushed
// and deleted: Badger flushes memtables oldest first, so that one went first). Everything
// applied before this sync began is in the logs that exist when it looks, so a rotation after
// that holds only later batches.
func (w *walSyncer) sync() error {
	if w.wal != nil {
		rotated, err := w.rotated()
		if err != nil {
			return err
		}
		if !rotated {
			return w.syncLog(w.wal)
		}
	}
	logs, err := filepath.Glob(filepath.Join(w.dir, "*.mem"))
	if err != nil {
		return err
	}
	if len(logs) == 0 {
		return fmt.Errorf("no write-ahead log in %s", w.dir)
	}
	// Badger names them by an increasing number, zero-padded to five digits.
	slices.SortFunc(logs, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(a, b)) })
	newestPath := logs[len(logs)-1]
	newest, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(newestPath), ".mem"))
	if err != nil {
		return fmt.Errorf("write-ahead log %s: %w", newestPath, err)
	}
	for _, path := range logs[:len(logs)-1] {
		if w.synced[path] {
			continue
		}
		if err := w.syncPath(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err // a log flushed and deleted meanwhile is in a synced table
		}
		w.synced[path] = true
	}
	for path := range w.synced {
		if !slices.Contains(logs, path) {
			delete(w.synced, path)
		}
	}
	if w.wal == nil || w.wal.Name() != newestPath {
		wal, err := os.OpenFile(newestPath, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		w.close()
		w.wal, w.newest = wal, newest
	}
	return w.syncLog(w.wal)
}

// rotated reports whether Badger rotated its write-ahead log since the last listing.
func (w *walSyncer) rotated() (bool, error) {
	_, err := os.Stat(walPath(w.dir, w.newest+1))
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	_, err = os.Stat(w.wal.Name())
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	return false, err
}

// syncPath makes one rotated write-ahead log durable.
func (w *walSyncer) syncPath(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = w.syncLog(f)
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	return err
}

// closeWAL closes the descriptor of the current write-ahead log, if open.
func (w *walSyncer) close() {
	if w.wal != nil {
		_ = w.wal.Close()
		w.wal = nil
	}
}

// walPath is the path of Badger's write-ahead log number n (db.go mtFilePath).
func walPath(dir string, n int) string { return filepath.Join(dir, fmt.Sprintf("%05d.mem", n)) }
