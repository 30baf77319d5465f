package persistence

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/internal/oldlayout"
)

// oldPartitions are three partitions of the old layout: one with more state than a
// transaction of a store with 1 MiB memtables takes, one small, one that never wrote.
func oldPartitions() []oldlayout.Partition {
	big := map[string]string{}
	for i := range 4000 {
		big[fmt.Sprintf("q/lane/%05d", i)] = strings.Repeat("v", 100)
	}
	return []oldlayout.Partition{
		{State: big, LoggedTimeMicros: 1_800_000_000_000_000, AppliedIndex: 40},
		{State: map[string]string{"meta/counters": "c", "s/one": "1", "zz": "last"}, LoggedTimeMicros: 1_800_000_000_000_123, AppliedIndex: 7},
		{},
	}
}

// wantPairs is a state as viewAll returns it.
func wantPairs(state map[string]string) []pair {
	var want []pair
	for k, v := range state {
		want = append(want, pair{k, v})
	}
	slices.SortFunc(want, func(a, b pair) int { return strings.Compare(a.key, b.key) })
	return want
}

// checkImported opens the silo store of dataRoot and checks that it holds partitions' state
// and marks.
func checkImported(t *testing.T, dataRoot string, partitions []oldlayout.Partition) {
	t.Helper()
	s, err := OpenSiloStore(SiloStoreDir(dataRoot), len(partitions), smallOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for n, old := range partitions {
		p, err := s.Partition(n)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := viewAll(t, p), wantPairs(old.State); !slices.Equal(got, want) {
			t.Errorf("partition %d: %d state keys imported, want %d (first: %v)", n, len(got), len(want), got[:min(len(got), 3)])
		}
		if got, want := p.Applied(), (AppliedMark{Index: 1, LoggedTimeMicros: old.LoggedTimeMicros}); got != want {
			t.Errorf("partition %d: applied mark %+v, want %+v", n, got, want)
		}
	}
}

// TestImportCopiesEachPartitionsStateAndLoggedTime: the import copies every partition's
// newest state (no p/ record, no deleted key, no older value), in several transactions when
// it needs them, gives it the mark {1, its logged time}, reports what it copied, and renames
// the old layout away.
func TestImportCopiesEachPartitionsStateAndLoggedTime(t *testing.T) {
	dataRoot := t.TempDir()
	partitions := oldPartitions()
	oldlayout.Write(t, dataRoot, partitions)
	report, err := ImportPartitionStores(dataRoot, 0, smallOptions())
	if err != nil {
		t.Fatal(err)
	}
	if report.Resumed || len(report.Partitions) != len(partitions) {
		t.Fatalf("report %+v", report)
	}
	for n, old := range partitions {
		var keyBytes int64
		for k, v := range old.State {
			keyBytes += int64(len(k) + len(v))
		}
		want := ImportedPartition{Partition: n, Keys: int64(len(old.State)), Bytes: keyBytes, LoggedTimeMicros: old.LoggedTimeMicros}
		if got := report.Partitions[n]; got != want {
			t.Errorf("partition %d reported %+v, want %+v", n, got, want)
		}
	}
	if bytes := report.Partitions[0].Bytes; bytes < 2*maxBatchBytes(smallOptions().MemTableBytes) {
		t.Fatalf("partition 0 holds %d bytes, not several transactions' worth", bytes)
	}
	for _, gone := range []string{"cluster.json", "partitions", "store.importing"} {
		if _, err := os.Stat(filepath.Join(dataRoot, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after the import: %v", gone, err)
		}
	}
	for _, kept := range []string{"imported-cluster.json", filepath.Join("imported-partitions", "2")} {
		if _, err := os.Stat(filepath.Join(dataRoot, kept)); err != nil {
			t.Errorf("%s after the import: %v", kept, err)
		}
	}
	checkImported(t, dataRoot, partitions)
}

// TestImportRefusals: a partition count other than cluster.json's, a data root with a store
// (a second import), one without the old layout and one whose imported names are taken are
// refused, and change nothing.
func TestImportRefusals(t *testing.T) {
	partitions := oldPartitions()[1:]
	t.Run("partition count", func(t *testing.T) {
		dataRoot := t.TempDir()
		oldlayout.Write(t, dataRoot, partitions)
		_, err := ImportPartitionStores(dataRoot, 5, quietOptions())
		var oerr *orrery.Error
		if !errors.As(err, &oerr) || oerr.Code != orrery.CodeValidation || oerr.Field != "partitions" || !strings.Contains(err.Error(), "2 partitions") {
			t.Fatalf("import with --partitions 5 of a root of 2: %v", err)
		}
		assertOldLayoutOnly(t, dataRoot)
	})
	t.Run("second import", func(t *testing.T) {
		dataRoot := t.TempDir()
		oldlayout.Write(t, dataRoot, partitions)
		if _, err := ImportPartitionStores(dataRoot, 2, quietOptions()); err != nil {
			t.Fatal(err)
		}
		_, err := ImportPartitionStores(dataRoot, 2, quietOptions())
		if !errors.Is(err, orrery.ErrValidation) || !strings.Contains(err.Error(), "already has a silo store") {
			t.Fatalf("second import: %v", err)
		}
		checkImported(t, dataRoot, partitions)
	})
	t.Run("no old layout", func(t *testing.T) {
		dataRoot := t.TempDir()
		_, err := ImportPartitionStores(dataRoot, 0, quietOptions())
		if !errors.Is(err, orrery.ErrValidation) || !strings.Contains(err.Error(), "nothing to import") {
			t.Fatalf("import of an empty root: %v", err)
		}
		if entries, _ := os.ReadDir(dataRoot); len(entries) != 0 {
			t.Fatalf("the refused import left %v", entries)
		}
	})
	t.Run("not a partition", func(t *testing.T) {
		dataRoot := t.TempDir()
		oldlayout.Write(t, dataRoot, partitions)
		if err := os.Mkdir(oldlayout.PartitionDir(dataRoot, 2), 0o750); err != nil {
			t.Fatal(err)
		}
		_, err := ImportPartitionStores(dataRoot, 0, quietOptions())
		if !errors.Is(err, orrery.ErrValidation) || !strings.Contains(err.Error(), `holds "2", which is not a partition of 0 to 1`) {
			t.Fatalf("import of a root of 2 partitions holding partitions/2: %v", err)
		}
		assertOldLayoutOnly(t, dataRoot)
	})
	t.Run("imported name taken", func(t *testing.T) {
		dataRoot := t.TempDir()
		oldlayout.Write(t, dataRoot, partitions)
		if err := os.Mkdir(filepath.Join(dataRoot, "imported-partitions"), 0o750); err != nil {
			t.Fatal(err)
		}
		_, err := ImportPartitionStores(dataRoot, 0, quietOptions())
		if !errors.Is(err, orrery.ErrValidation) || !strings.Contains(err.Error(), "imported-partitions") {
			t.Fatalf("import with imported-partitions taken: %v", err)
		}
		assertOldLayoutOnly(t, dataRoot)
	})
}

// assertOldLayoutOnly fails unless dataRoot still has its old layout and no store.
func assertOldLayoutOnly(t *testing.T, dataRoot string) {
	t.Helper()
	for _, name := range []string{"cluster.json", "partitions"} {
		if _, err := os.Stat(filepath.Join(dataRoot, name)); err != nil {
			t.Errorf("%s after a refused import: %v", name, err)
		}
	}
	for _, name := range []string{"store", "store.importing"} {
		if _, err := os.Stat(filepath.Join(dataRoot, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after a refused import: %v", name, err)
		}
	}
}

// TestImportTakesAPartitionNeverOpenedAsEmpty: a partition without a database (no silo ever
// opened it) is imported with no state and no logged time.
func TestImportTakesAPartitionNeverOpenedAsEmpty(t *testing.T) {
	dataRoot := t.TempDir()
	partitions := oldPartitions()[1:]
	oldlayout.Write(t, dataRoot, partitions)
	if err := os.RemoveAll(oldlayout.PartitionDir(dataRoot, 0)); err != nil {
		t.Fatal(err)
	}
	report, err := ImportPartitionStores(dataRoot, 0, quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	if got := report.Partitions[0]; got != (ImportedPartition{Partition: 0}) {
		t.Fatalf("partition 0 without a database reported %+v", got)
	}
	partitions[0] = oldlayout.Partition{}
	checkImported(t, dataRoot, partitions)
}

// TestImportDeletesAnInterruptedImport: a store.importing an import left when it crashed
// (here a silo store of another partition count, with keys of its own) is deleted by the next
// import, which builds the store afresh.
func TestImportDeletesAnInterruptedImport(t *testing.T) {
	dataRoot := t.TempDir()
	partitions := oldPartitions()
	oldlayout.Write(t, dataRoot, partitions)
	partial, err := OpenSiloStore(filepath.Join(dataRoot, "store.importing"), 5, quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := partial.Partition(0)
	update(t, p, func(txn *Txn) error { return txn.Set([]byte("stray"), []byte("x")) })
	if err := partial.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ImportPartitionStores(dataRoot, 3, smallOptions()); err != nil {
		t.Fatal(err)
	}
	checkImported(t, dataRoot, partitions)
}

// TestImportFinishesAnImportStoppedBeforeItsRenames: a crash after the store was renamed in
// place and before the old layout was renamed away leaves both; the next import only renames
// the old layout away and keeps the store.
func TestImportFinishesAnImportStoppedBeforeItsRenames(t *testing.T) {
	dataRoot := t.TempDir()
	partitions := oldPartitions()[1:]
	oldlayout.Write(t, dataRoot, partitions)
	if _, err := ImportPartitionStores(dataRoot, 0, quietOptions()); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]string{{"imported-cluster.json", "cluster.json"}, {"imported-partitions", "partitions"}} {
		if err := os.Rename(filepath.Join(dataRoot, r[0]), filepath.Join(dataRoot, r[1])); err != nil {
			t.Fatal(err)
		}
	}
	report, err := ImportPartitionStores(dataRoot, 0, quietOptions())
	if err != nil || !report.Resumed || len(report.Partitions) != 0 {
		t.Fatalf("import after a stop before the renames: %+v, %v", report, err)
	}
	if _, err := os.Stat(OldPartitionsDir(dataRoot)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the old layout is still there: %v", err)
	}
	checkImported(t, dataRoot, partitions)
}

// TestImportRecoversAPartitionStoreACrashLeftOpen: an old database a crash left open cannot
// be opened read-only (its write-ahead log needs truncating); the import recovers it and
// copies its state.
func TestImportRecoversAPartitionStoreACrashLeftOpen(t *testing.T) {
	dataRoot := t.TempDir()
	partitions := oldPartitions()[1:]
	partitions[0].Crashed = true
	oldlayout.Write(t, dataRoot, partitions)
	dir := oldlayout.PartitionDir(dataRoot, 0)
	// A database closed cleanly has no write-ahead log left; the crashed one has its memtable's.
	// (Opening it read-only would show the crash too, but Badger's Open returns that error
	// without stopping the goroutines it started, db.go "while opening memtables", which the
	// package's leak check would report.)
	if logs, _ := filepath.Glob(filepath.Join(dir, "*.mem")); len(logs) == 0 {
		t.Fatal("the crashed database left no write-ahead log: the test does not crash it")
	}
	if _, err := ImportPartitionStores(dataRoot, 0, quietOptions()); err != nil {
		t.Fatal(err)
	}
	checkImported(t, dataRoot, partitions)
}
