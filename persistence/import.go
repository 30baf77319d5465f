package persistence

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"

	"github.com/dgraph-io/badger/v4"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/grains/kv"
)

// Names in a data root of the old layout (one Badger database per partition), and what an
// import renames them to.
const (
	oldClusterFile        = "cluster.json"
	oldPartitionsDir      = "partitions"
	importedClusterFile   = "imported-cluster.json"
	importedPartitionsDir = "imported-partitions"
	importingStoreDir     = "store.importing"
)

// Records of an old partition database: its own keys are under oldRecordsPrefix, every other
// key is the state machines'.
var (
	oldRecordsPrefix = []byte("p/")
	oldLoggedTimeKey = []byte("p/logged-time")
)

// OldPartitionsDir is where a data root of the old layout keeps its partitions, one Badger
// database each: <dataRoot>/partitions. A silo refuses to start on a data root that has it.
func OldPartitionsDir(dataRoot string) string { return filepath.Join(dataRoot, oldPartitionsDir) }

// ImportReport is what ImportPartitionStores did.
type ImportReport struct {
	// Partitions are the imported partitions, by number; none when Resumed.
	Partitions []ImportedPartition
	// Resumed is set when an earlier import had completed the silo store and stopped before
	// it renamed the old layout away: this import only renamed it.
	Resumed bool
}

// ImportedPartition is what the import copied of one partition.
type ImportedPartition struct {
	// Partition is the partition's number.
	Partition int
	// Keys and Bytes count its state keys and their keys' and values' bytes.
	Keys, Bytes int64
	// LoggedTimeMicros is the logged time of its last batch (Unix microseconds; 0: none),
	// the logged time its applied mark carries.
	LoggedTimeMicros int64
}

// ImportPartitionStores imports the partitions of a data root in the old layout
// (<dataRoot>/cluster.json and <dataRoot>/partitions/<n>/, one Badger database in managed
// mode per partition) into a new silo store, <dataRoot>/store. partitions, when not 0, must
// be the count cluster.json records (Validation on "partitions" otherwise).
//
// Each old database is read at its newest version (a partition without one, which no silo
// ever opened, is imported empty): its state, every key outside p/, goes to
// the partition's current state generation, in unsynced transactions of about half the
// store's limit each, and the partition's applied mark becomes {Index: 1, LoggedTimeMicros:
// its p/logged-time}. Index 1 is where replication.Bootstrap puts the snapshot a new Raft
// group starts from, so the group's log continues after the imported state, and its leader
// stamps logged times after the old ones (NextLoggedTime). The marks are written
// in one synced transaction, which makes the whole import durable. A database a crash left
// open (it still has memtable logs, *.mem) cannot be opened read-only; it is opened for
// writing, which runs Badger's recovery as the old silo's next start did.
//
// The store is built in <dataRoot>/store.importing and renamed to <dataRoot>/store once it is
// durable; then cluster.json and partitions/ are renamed to imported-cluster.json and
// imported-partitions/, so a silo starts on the data root and the old data stays on disk. A
// crash before the store's rename leaves the old layout as it was, and the next import
// deletes store.importing and starts again. A crash after it leaves a complete store beside
// the old layout (a silo never creates its store there: it refuses the old layout), and the
// next import only renames the old layout away (ImportReport.Resumed).
//
// It refuses (Validation) a data root that has a store and no old layout, one without
// partitions/ or cluster.json, and one that already has imported-cluster.json or
// imported-partitions/. An old database another process holds is Unavailable.
func ImportPartitionStores(dataRoot string, partitions int, opts Options) (ImportReport, error) {
	opts = opts.withDefaults()
	storeDir := SiloStoreDir(dataRoot)
	oldDir := OldPartitionsDir(dataRoot)
	hasStore, err := pathExists(storeDir)
	if err != nil {
		return ImportReport{}, err
	}
	hasOld, err := pathExists(oldDir)
	if err != nil {
		return ImportReport{}, err
	}
	switch {
	case hasStore && hasOld:
		if err := retireOldLayout(dataRoot); err != nil {
			return ImportReport{}, err
		}
		return ImportReport{Resumed: true}, nil
	case hasStore:
		return ImportReport{}, orrery.Errorf(orrery.CodeValidation,
			"data root %s already has a silo store, %s, and no partitions in the old layout (%s): there is nothing to import", dataRoot, storeDir, oldDir)
	case !hasOld:
		return ImportReport{}, orrery.Errorf(orrery.CodeValidation,
			"data root %s holds no partitions in the old layout (%s): there is nothing to import", dataRoot, oldDir)
	}
	count, err := oldPartitionCount(dataRoot)
	if err != nil {
		return ImportReport{}, err
	}
	if partitions != 0 && partitions != count {
		return ImportReport{}, orrery.Invalid("partitions",
			"the data root %s was created with %d partitions (%s), not %d", dataRoot, count, filepath.Join(dataRoot, oldClusterFile), partitions)
	}
	if err := checkOldLayout(dataRoot, count); err != nil {
		return ImportReport{}, err
	}
	importing := filepath.Join(dataRoot, importingStoreDir)
	if err := os.RemoveAll(importing); err != nil {
		return ImportReport{}, orrery.Wrap(orrery.CodeUnavailable, err, "delete the interrupted import %s", importing)
	}
	report, err := buildImportedStore(importing, dataRoot, count, opts)
	if err != nil {
		_ = os.RemoveAll(importing)
		return ImportReport{}, err
	}
	if err := renameDurably(dataRoot, importingStoreDir, "store"); err != nil {
		return ImportReport{}, err
	}
	if err := retireOldLayout(dataRoot); err != nil {
		return ImportReport{}, err
	}
	return report, nil
}

// oldPartitionCount is the partition count cluster.json records.
func oldPartitionCount(dataRoot string) (int, error) {
	path := filepath.Join(dataRoot, oldClusterFile)
	content, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, orrery.Errorf(orrery.CodeValidation, "data root %s has partitions in the old layout but no %s: restore it", dataRoot, path)
	}
	if err != nil {
		return 0, orrery.Wrap(orrery.CodeUnavailable, err, "read %s", path)
	}
	var meta struct {
		Partitions int `json:"partitions"`
	}
	if err := json.Unmarshal(content, &meta); err != nil || meta.Partitions < 1 {
		return 0, orrery.Errorf(orrery.CodeValidation, "%s is damaged (want {\"partitions\": N, ...}): restore it", path)
	}
	return meta.Partitions, nil
}

// checkOldLayout refuses a data root whose partitions/ holds anything but partitions 0 to
// count-1 (a partition no silo ever opened has no directory), or whose imported names are
// taken.
func checkOldLayout(dataRoot string, count int) error {
	oldDir := OldPartitionsDir(dataRoot)
	entries, err := os.ReadDir(oldDir)
	if err != nil {
		return orrery.Wrap(orrery.CodeUnavailable, err, "read %s", oldDir)
	}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n < 0 || n >= count || strconv.Itoa(n) != e.Name() || !e.IsDir() {
			return orrery.Errorf(orrery.CodeValidation, "%s holds %q, which is not a partition of 0 to %d", oldDir, e.Name(), count-1)
		}
	}
	for _, name := range []string{importedClusterFile, importedPartitionsDir} {
		path := filepath.Join(dataRoot, name)
		taken, err := pathExists(path)
		if err != nil {
			return err
		}
		if taken {
			return orrery.Errorf(orrery.CodeValidation, "data root %s already has %s, which the import renames the old layout to: move it away", dataRoot, path)
		}
	}
	return nil
}

// buildImportedStore creates the silo store in dir, imports every old partition into it,
// writes their marks in one synced transaction and closes it.
func buildImportedStore(dir, dataRoot string, count int, opts Options) (report ImportReport, err error) {
	s, err := OpenSiloStore(dir, count, opts)
	if err != nil {
		return report, err
	}
	defer func() {
		if closeErr := s.Close(); err == nil {
			err = closeErr
		}
	}()
	for n := range count {
		imported, err := importPartition(s.states[n], filepath.Join(OldPartitionsDir(dataRoot), strconv.Itoa(n)))
		if err != nil {
			return report, err
		}
		report.Partitions = append(report.Partitions, imported)
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.lifeMu.RLock()
	defer s.lifeMu.RUnlock()
	at, err := s.write(func(txn *badger.Txn) error {
		for _, p := range report.Partitions {
			mark := AppliedMark{Index: 1, LoggedTimeMicros: p.LoggedTimeMicros}
			if err := txn.Set(raftAppliedKey(p.Partition), encodeMark(mark)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return report, orrery.Wrap(orrery.CodeOf(err), err, "silo store %s: write the imported partitions' applied marks", dir)
	}
	s.published(at)
	return report, nil
}

// importPartition copies the state of the old partition database in dir into p's current
// generation, in unsynced transactions, and returns what it copied.
func importPartition(p *PartitionState, dir string) (ImportedPartition, error) {
	imported := ImportedPartition{Partition: p.n}
	if exists, err := pathExists(dir); err != nil || !exists {
		return imported, err // never opened: an empty state
	}
	db, err := openOldPartition(dir, p.store.opts)
	if err != nil {
		return imported, err
	}
	defer func() { _ = db.Close() }()
	txn := db.NewTransactionAt(db.MaxVersion(), false)
	defer txn.Discard()
	logged, err := oldLoggedTime(txn, dir)
	if err != nil {
		return imported, err
	}
	imported.LoggedTimeMicros = logged
	limitBytes, limitWrites := p.MaxBatchBytes()/2, p.MaxBatchWrites()/2
	var batch []storeWrite
	var batchBytes int64
	flush := func() error {
		for len(batch) > 0 {
			n, err := p.store.commitUnsynced(batch)
			if err != nil {
				return orrery.Wrap(orrery.CodeOf(err), err, "partition %d: import %s", p.n, dir)
			}
			batch = batch[n:]
		}
		batch, batchBytes = batch[:0], 0
		return nil
	}
	copyKey := func(key, value []byte) (bool, error) {
		if int64(len(value)) > p.MaxValueBytes() {
			return false, orrery.Errorf(orrery.CodeInternal, "partition %d: %s: the value of key %q holds %d bytes, more than the store's largest value of %d",
				p.n, dir, key, len(value), p.MaxValueBytes())
		}
		w := storeWrite{key: append(bytes.Clone(p.prefix), key...), value: bytes.Clone(value)}
		batch = append(batch, w)
		batchBytes += int64(len(w.key)+len(w.value)) + writeOverheadBytes
		imported.Keys++
		imported.Bytes += int64(len(key) + len(value))
		if batchBytes >= limitBytes || int64(len(batch)) >= limitWrites {
			return true, flush()
		}
		return true, nil
	}
	for _, r := range [][2][]byte{{nil, oldRecordsPrefix}, {kv.PrefixEnd(oldRecordsPrefix), nil}} {
		if err := iterate(txn, r[0], r[1], copyKey); err != nil {
			return imported, orrery.Wrap(orrery.CodeOf(err), err, "partition %d: read %s", p.n, dir)
		}
	}
	return imported, flush()
}

// openOldPartition opens the old partition database in dir in managed mode, read-only unless
// a crash left it open: Badger deletes a database's memtable logs (*.mem) when it closes, and
// one that still has them cannot be opened read-only (its last log needs truncating after its
// last record), so it is opened for writing, which runs Badger's recovery as the old silo's
// next start did.
func openOldPartition(dir string, opts Options) (*badger.DB, error) {
	logs, err := filepath.Glob(filepath.Join(dir, "*.mem"))
	if err != nil {
		return nil, orrery.Wrap(orrery.CodeInternal, err, "list the memtable logs of %s", dir)
	}
	badgerOpts := badgerOptions(dir, opts).WithReadOnly(len(logs) == 0)
	if len(logs) > 0 {
		opts.Logger.Warn("the old partition store was not closed cleanly; opening it for writing so that Badger recovers it", "partition_dir", dir)
	}
	db, err := badger.OpenManaged(badgerOpts)
	if err != nil {
		if directoryLockHeld(dir) {
			return nil, orrery.Wrap(orrery.CodeUnavailable, err, "old partition store %s is held elsewhere: stop the silo that uses it", dir)
		}
		return nil, orrery.Wrap(orrery.CodeUnavailable, err, "open old partition store %s", dir)
	}
	return db, nil
}

// oldLoggedTime reads p/logged-time, 8 bytes big-endian (absent: 0).
func oldLoggedTime(txn *badger.Txn, dir string) (int64, error) {
	value, found, err := getRaw(txn, oldLoggedTimeKey)
	if err != nil {
		return 0, orrery.Wrap(orrery.CodeUnavailable, err, "%s: read %s", dir, oldLoggedTimeKey)
	}
	if !found {
		return 0, nil
	}
	if len(value) != 8 {
		return 0, orrery.Errorf(orrery.CodeInternal, "%s: %s holds %d bytes, want 8", dir, oldLoggedTimeKey, len(value))
	}
	return int64(binary.BigEndian.Uint64(value)), nil
}

// retireOldLayout renames what is left of the old layout (cluster.json, then partitions/) to
// its imported names, durably.
func retireOldLayout(dataRoot string) error {
	for _, r := range [][2]string{{oldClusterFile, importedClusterFile}, {oldPartitionsDir, importedPartitionsDir}} {
		exists, err := pathExists(filepath.Join(dataRoot, r[0]))
		if err != nil {
			return err
		}
		if !exists {
			continue
		}
		if err := renameDurably(dataRoot, r[0], r[1]); err != nil {
			return err
		}
	}
	return nil
}

// renameDurably renames dataRoot/from to dataRoot/to, refusing to replace an existing to, and
// syncs dataRoot.
func renameDurably(dataRoot, from, to string) error {
	target := filepath.Join(dataRoot, to)
	taken, err := pathExists(target)
	if err != nil {
		return err
	}
	if taken {
		return orrery.Errorf(orrery.CodeValidation, "data root %s already has %s: move it away and run the import again", dataRoot, target)
	}
	if err := os.Rename(filepath.Join(dataRoot, from), target); err != nil {
		return orrery.Wrap(orrery.CodeUnavailable, err, "data root %s: rename %s to %s", dataRoot, from, to)
	}
	if err := syncDir(dataRoot); err != nil {
		return orrery.Wrap(orrery.CodeUnavailable, err, "data root %s: sync the rename of %s to %s", dataRoot, from, to)
	}
	return nil
}

// syncDir fsyncs a directory so the changes of its entries survive power loss.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if closeErr := d.Close(); err == nil {
		err = closeErr
	}
	return err
}

// pathExists reports whether path exists.
func pathExists(path string) (bool, error) {
	_, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		return false, orrery.Wrap(orrery.CodeUnavailable, err, "read %s", path)
	}
	return true, nil
}

// RefuseOldLayout refuses a data root that holds partitions in the layout of one Badger store
// per partition (OldPartitionsDir), which the silo store replaced, with a Validation error
// naming the command that imports them (ImportPartitionStores).
func RefuseOldLayout(dataRoot string) error {
	old := OldPartitionsDir(dataRoot)
	if exists, err := pathExists(old); err != nil || !exists {
		return err
	}
	return orrery.Errorf(orrery.CodeValidation,
		"data root %s holds partitions in the old layout (%s, one store per partition); this silo keeps them in one store, %s: "+
			"run silo import --data %s to import them, then start the silo again", dataRoot, old, SiloStoreDir(dataRoot), dataRoot)
}
