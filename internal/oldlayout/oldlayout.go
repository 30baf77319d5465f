// Package oldlayout writes data roots in the layout the silo store replaced (cluster.json and
// one Badger database per partition), for the tests of their import
// (persistence.ImportPartitionStores).
package oldlayout

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// Partition is what one partition's database of the old layout holds.
type Partition struct {
	// State is the state machines' keys and values, every key outside p/.
	State map[string]string
	// LoggedTimeMicros is p/logged-time, the logged time of the last batch (0: absent).
	LoggedTimeMicros int64
	// AppliedIndex is p/applied-index; a journal record is written at it.
	AppliedIndex uint64
	// Crashed leaves the database as a process killed with it open does: its write-ahead log
	// not replayed into tables, and not truncated after its last record.
	Crashed bool
}

// Write makes dataRoot a data root of the old layout holding partitions: cluster.json with
// their count, and partitions/<n>/, a Badger database in managed mode. Each database holds
// earlier versions too: every state key with another value and a key its last version
// deleted ("deleted/<n>"), so only its newest version is its state. Its own records, under
// p/, are the activation epoch, the logged time, the applied index and a journal record.
func Write(t testing.TB, dataRoot string, partitions []Partition) {
	t.Helper()
	meta, err := json.Marshal(map[string]any{"partitions": len(partitions), "created": "2026-01-02T03:04:05Z"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dataRoot, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataRoot, "cluster.json"), meta, 0o600); err != nil {
		t.Fatal(err)
	}
	for n, p := range partitions {
		dir := PartitionDir(dataRoot, n)
		if !p.Crashed {
			writeDB(t, dir, n, p).close(t)
			continue
		}
		// A copy of the files of an open database is what a crash leaves: the tables flushed
		// so far and the write-ahead log as written (its mmap), at its full preallocated size.
		live := t.TempDir()
		db := writeDB(t, live, n, p)
		copyDir(t, live, dir)
		db.close(t)
	}
}

// PartitionDir is partition n's database in the old layout: <dataRoot>/partitions/<n>.
func PartitionDir(dataRoot string, n int) string {
	return filepath.Join(dataRoot, "partitions", strconv.Itoa(n))
}

type openDB struct{ db *badger.DB }

func (d openDB) close(t testing.TB) {
	t.Helper()
	if err := d.db.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeDB writes partition n's database in dir at versions 1 and 2 and leaves it open.
func writeDB(t testing.TB, dir string, n int, p Partition) openDB {
	t.Helper()
	db, err := badger.OpenManaged(badger.DefaultOptions(dir).WithLogger(nil).WithMemTableSize(8 << 20).WithValueLogFileSize(1 << 20).WithNumVersionsToKeep(1))
	if err != nil {
		t.Fatal(err)
	}
	deleted := "deleted/" + strconv.Itoa(n)
	commit(t, db, 1, func(txn *badger.Txn) error {
		for key := range p.State {
			if err := txn.Set([]byte(key), []byte("older value")); err != nil {
				return err
			}
		}
		return txn.Set([]byte(deleted), []byte("deleted later"))
	})
	commit(t, db, 2, func(txn *badger.Txn) error {
		for key, value := range p.State {
			if err := txn.Set([]byte(key), []byte(value)); err != nil {
				return err
			}
		}
		if err := txn.Delete([]byte(deleted)); err != nil {
			return err
		}
		records := map[string][]byte{
			"p/activation-epoch": binary.BigEndian.AppendUint64(nil, 3),
			"p/applied-index":    binary.BigEndian.AppendUint64(nil, p.AppliedIndex),
			"p/journal/" + string(binary.BigEndian.AppendUint64(nil, p.AppliedIndex)): []byte("journal record"),
		}
		if p.LoggedTimeMicros != 0 {
			records["p/logged-time"] = binary.BigEndian.AppendUint64(nil, uint64(p.LoggedTimeMicros))
		}
		for key, value := range records {
			if err := txn.Set([]byte(key), value); err != nil {
				return err
			}
		}
		return nil
	})
	return openDB{db}
}

// commit runs fn in a transaction committed at version.
func commit(t testing.TB, db *badger.DB, version uint64, fn func(txn *badger.Txn) error) {
	t.Helper()
	txn := db.NewTransactionAt(version-1, true)
	defer txn.Discard()
	if err := fn(txn); err != nil {
		t.Fatal(err)
	}
	if err := txn.CommitAt(version, nil); err != nil {
		t.Fatal(err)
	}
}

// copyDir copies the files of directory from into a new directory to.
func copyDir(t testing.TB, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(to, 0o750); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		content, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
