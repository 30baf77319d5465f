package persistence

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/orreryhq/orrery/grains/kv"
)

// TestAppliedBatchesReachViewsOnlyOnceSynced: Apply makes a batch readable to the writer
// (ViewApplied, the next Apply) at once, and to every other reader only after a Sync.
func TestAppliedBatchesReachViewsOnlyOnceSynced(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), quietOptions())
	update(t, s, func(txn *Txn) error {
		if err := txn.SetLoggedTime(100); err != nil {
			return err
		}
		if err := txn.SetAppliedIndex(1); err != nil {
			return err
		}
		return txn.Set([]byte("k"), []byte("1"))
	})
	for i := 2; i <= 3; i++ {
		err := s.Apply(func(txn *Txn) error {
			if err := txn.SetLoggedTime(int64(100 * i)); err != nil {
				return err
			}
			if err := txn.SetAppliedIndex(uint64(i)); err != nil {
				return err
			}
			return txn.Set([]byte("k"), fmt.Append(nil, i))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := viewAll(t, s); !slices.Equal(got, []pair{{"k", "1"}}) {
		t.Errorf("View before the sync reads %v, want k=1", got)
	}
	if err := s.ViewApplied(func(r kv.Reader) error {
		if got := collect(t, r, nil, nil); !slices.Equal(got, []pair{{"k", "3"}}) {
			t.Errorf("ViewApplied reads %v, want k=3", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if s.AppliedIndex() != 3 || s.LoggedTime() != 300 {
		t.Errorf("applied index %d, logged time %d; want 3 and 300", s.AppliedIndex(), s.LoggedTime())
	}
	if index, logged := s.Durable(); index != 1 || logged != 100 {
		t.Errorf("durable index %d, logged time %d before the sync; want 1 and 100", index, logged)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := viewAll(t, s); !slices.Equal(got, []pair{{"k", "3"}}) {
		t.Errorf("View after the sync reads %v, want k=3", got)
	}
	if index, logged := s.Durable(); index != 3 || logged != 300 {
		t.Errorf("durable index %d, logged time %d after the sync; want 3 and 300", index, logged)
	}
}

// TestSyncCoversWriteAheadLogsRotatedSinceTheLastSync: batches applied into a memtable that
// Badger then rotates out sit in a log that is no longer current; Sync must sync it too, or a
// machine crash could lose them while later batches, in the current log, survive. And it must
// sync the current log, which Badger itself does not (SyncWrites is off).
func TestSyncCoversWriteAheadLogsRotatedSinceTheLastSync(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir, quietOptions())
	var mu sync.Mutex
	var synced []string
	s.wals.syncLog = func(f *os.File) error {
		mu.Lock()
		synced = append(synced, filepath.Base(f.Name()))
		mu.Unlock()
		return datasync(f)
	}
	logs := func() []string {
		paths, err := filepath.Glob(filepath.Join(dir, "*.mem"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range paths {
			paths[i] = filepath.Base(paths[i])
		}
		return paths
	}
	first := logs()
	if len(first) != 1 {
		t.Fatalf("a fresh store has write-ahead logs %v, want one", first)
	}
	value := make([]byte, 64<<10)
	for i := 0; slices.Contains(logs(), first[0]) && slices.Equal(logs(), first); i++ {
		if i > 10_000 {
			t.Fatal("the memtable never rotated")
		}
		if err := s.Apply(func(txn *Txn) error { return txn.Set(fmt.Appendf(nil, "k%06d", i), value) }); err != nil {
			t.Fatal(err)
		}
	}
	rotatedAt := logs()
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(rotatedAt, first[0]) && !slices.Contains(synced, first[0]) {
		t.Errorf("logs %v after the rotation; Sync synced %v, not the rotated %s", rotatedAt, synced, first[0])
	}
	if current := rotatedAt[len(rotatedAt)-1]; !slices.Contains(synced, current) {
		t.Errorf("logs %v after the rotation; Sync synced %v, not the current %s", rotatedAt, synced, current)
	}
	// The next sync, with no rotation since, syncs the current log alone.
	synced = synced[:0]
	mu.Unlock()
	if err := s.Apply(func(txn *Txn) error { return txn.Set([]byte("after"), value) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if current := logs(); !slices.Equal(synced, current[len(current)-1:]) {
		t.Errorf("logs %v; the sync after the rotation synced %v, want the current log only", current, synced)
	}
}

// TestSyncedBatchesSurviveReopen: what Apply and Sync wrote is there after a reopen.
func TestSyncedBatchesSurviveReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir, quietOptions())
	for i := range 20 {
		if err := s.Apply(func(txn *Txn) error { return txn.Set(fmt.Appendf(nil, "k%02d", i), []byte("v")) }); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 {
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, quietOptions())
	if got := viewAll(t, s); len(got) != 20 {
		t.Errorf("after reopening: %d keys, want 20", len(got))
	}
}
