package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/internal/testkit"
)

// TestSiloStoreMetadata: the first open creates a non-zero silo id that later opens keep, and
// records the partition count; another count is a Validation error naming both.
func TestSiloStoreMetadata(t *testing.T) {
	t.Parallel()
	dir := SiloStoreDir(t.TempDir())
	s := openSiloStore(t, dir, 8)
	id := s.SiloID()
	if id == 0 || s.Partitions() != 8 {
		t.Fatalf("silo id %d, partitions %d; want non-zero and 8", id, s.Partitions())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSiloStore(t, dir, 8)
	if s.SiloID() != id {
		t.Errorf("silo id after reopening %d, want %d", s.SiloID(), id)
	}
	if _, err := OpenSiloStore(dir, 8, quietOptions()); !errors.Is(err, orrery.ErrUnavailable) || !strings.Contains(err.Error(), "held elsewhere") {
		t.Errorf("second open while held: %v, want Unavailable saying it is held elsewhere", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := OpenSiloStore(dir, 16, quietOptions())
	var oerr *orrery.Error
	if !errors.As(err, &oerr) || oerr.Code != orrery.CodeValidation || oerr.Field != "partitions" ||
		!strings.Contains(err.Error(), "created with 8 partitions") || !strings.Contains(err.Error(), "configured with 16") {
		t.Errorf("open with 16 partitions: %v, want a Validation error on partitions naming 8 and 16", err)
	}
	if other := openSiloStore(t, SiloStoreDir(t.TempDir()), 8); other.SiloID() == id {
		t.Errorf("two stores have the same silo id %d", id)
	}
}

// TestSiloStoreKeys: a group's keys are contiguous under its prefix, groups sort by number,
// and entries by index.
func TestSiloStoreKeys(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 255, 256, 70000} {
		prefix := raftPrefix(n)
		for _, key := range [][]byte{raftEntryKey(n, 0), raftEntryKey(n, 1<<40), raftHardStateKey(n), raftSnapshotKey(n), raftTruncatedKey(n)} {
			if !bytes.HasPrefix(key, prefix) {
				t.Errorf("group %d: key %q is not under %q", n, key, prefix)
			}
		}
		if bytes.Compare(raftPrefix(n+1), raftTruncatedKey(n)) <= 0 || bytes.Compare(statePrefix(n+1), statePrefix(n)) <= 0 {
			t.Errorf("group %d+1's prefix does not sort after group %d's keys", n, n)
		}
		if bytes.Compare(raftEntryKey(n, 255), raftEntryKey(n, 256)) >= 0 || raftEntryIndex(raftEntryKey(n, 1<<40)) != 1<<40 {
			t.Errorf("group %d: entry keys do not sort and decode by index", n)
		}
		if bytes.HasPrefix(statePrefix(n), []byte("r/")) || bytes.HasPrefix(raftPrefix(n), []byte("d/")) {
			t.Errorf("group %d: state and raft prefixes overlap", n)
		}
	}
}

// TestSiloStoreDiskBytes: DiskBytes is the size of the store's files, growing with a file
// added to its directory by exactly that file's size; FreeDiskBytes asks FreeBytesFunc.
func TestSiloStoreDiskBytes(t *testing.T) {
	t.Parallel()
	dir := SiloStoreDir(t.TempDir())
	opts := quietOptions()
	opts.FreeBytesFunc = func(string) (uint64, error) { return 12345, nil }
	s, err := OpenSiloStore(dir, 4, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	before, err := s.DiskBytes()
	if err != nil || before <= 0 {
		t.Fatalf("DiskBytes of a fresh store: %d, %v; want a positive size", before, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "extra.bin"), make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	after, err := s.DiskBytes()
	if err != nil || after != before+4096 {
		t.Fatalf("DiskBytes after a 4096-byte file: %d, %v; want %d", after, err, before+4096)
	}
	if free, err := s.FreeDiskBytes(); err != nil || free != 12345 {
		t.Fatalf("FreeDiskBytes: %d, %v; want 12345 from FreeBytesFunc", free, err)
	}
}

// TestTheFreeDiskFloorReadsTheDiskAtMostEveryRecheck: a burst of checks reads the file system
// once, not once each; a disk that filled meanwhile is seen once the recheck interval passed,
// and one that has room again likewise.
func TestTheFreeDiskFloorReadsTheDiskAtMostEveryRecheck(t *testing.T) {
	t.Parallel()
	var free, reads atomic.Uint64
	free.Store(2 << 30)
	opts := quietOptions()
	opts.MinFreeBytes = 1 << 30
	opts.FreeBytesFunc = func(string) (uint64, error) { reads.Add(1); return free.Load(), nil }
	s, err := OpenSiloStore(SiloStoreDir(t.TempDir()), 4, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	before := reads.Load()
	start := time.Now()
	for range 1000 {
		if err := s.CheckFreeSpace(); err != nil {
			t.Fatal(err)
		}
	}
	if n, took := reads.Load()-before, time.Since(start); n > 1+uint64(took/FreeSpaceRecheck) {
		t.Fatalf("1,000 checks in %v read the disk %d times, want at most once per %v", took, n, FreeSpaceRecheck)
	}
	free.Store(1 << 20)
	testkit.Eventually(t, 10*FreeSpaceRecheck, "a full disk to be refused", func() bool { return s.CheckFreeSpace() != nil })
	free.Store(2 << 30)
	testkit.Eventually(t, 10*FreeSpaceRecheck, "a disk with room again to be accepted", func() bool { return s.CheckFreeSpace() == nil })
}

// TestTheStoresTablesAreCompressed: records that repeat themselves, as a partition's do (the
// same namespace, queue and template in every schedule), take a fraction of their size in the
// tables once flushed: the tables are compressed (badgerOptions). Uncompressed, the tables
// held this test's 9.9 MB of records in 9.4 MB; compressed (Snappy), in 1.9 MB.
func TestTheStoresTablesAreCompressed(t *testing.T) {
	t.Parallel()
	dir := SiloStoreDir(t.TempDir())
	s, err := OpenSiloStore(dir, 1, quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Partition(0)
	if err != nil {
		t.Fatal(err)
	}
	raw := 0
	for batch := range 30 {
		mark := AppliedMark{Index: uint64(batch + 1), LoggedTimeMicros: int64(batch + 1)}
		if err := p.Apply(mark, func(txn *Txn) error {
			for i := range 1000 {
				key := fmt.Appendf(nil, "s/\x07reports\x05daily\x24%08d-0000-4000-8000-%012d", batch, i)
				value := fmt.Appendf(nil, `{"lane":{"namespace":"reports","queue":"daily"},"id":"%08d-%012d","every":"1h","template":{"payload":{"report":"daily","format":"pdf","recipients":["ops@example.com"]}},"state":"ACTIVE","generation":1,"revision":1,"created_by":"alice","next_due_at":%d}`, batch, i, 1_800_000_000_000_000+i)
				raw += len(key) + len(value)
				if err := txn.Set(key, value); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil { // flushes the memtable into a table
		t.Fatal(err)
	}
	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil {
		t.Fatal(err)
	}
	var tableBytes int64
	for _, name := range tables {
		info, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		tableBytes += info.Size()
	}
	if len(tables) == 0 || tableBytes*3 > int64(raw) {
		t.Fatalf("%d records of %d bytes in %d tables of %d bytes; want them compressed to under a third", 30_000, raw, len(tables), tableBytes)
	}
	t.Logf("%d records of %d bytes in %d tables of %d bytes", 30_000, raw, len(tables), tableBytes)
}
