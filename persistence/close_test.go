package persistence

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// TestCloseBelowTheFloorSyncsInsteadOfFlushing: a store closed while its disk is below the
// free-space floor writes no table (Badger's memtable flush, which dies with SIGBUS on a full
// disk) and syncs its write-ahead log instead, so the applies it committed survive a machine
// crash after it; the next open finds them. Above the floor Close flushes as before.
func TestCloseBelowTheFloorSyncsInsteadOfFlushing(t *testing.T) {
	if dir := crashChildDir(); dir != "" {
		closeBelowFloorChild(dir)
		return
	}
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	var before, after int
	reported, stderr := killChild(t, dir, nil, func(line string) bool {
		if tables, ok := strings.CutPrefix(line, "closed "); ok {
			_, err := fmt.Sscanf(tables, "%d %d", &before, &after)
			return err == nil
		}
		return false
	})
	if !reported {
		t.Fatalf("the child did not close the store; stderr:\n%s", stderr)
	}
	if after != before {
		t.Errorf("Close below the floor wrote %d tables (%d before, %d after): it flushed the memtable", after-before, before, after)
	}
	if !strings.Contains(stderr, "left open without a flush") {
		t.Errorf("Close below the floor returned no error saying it did not flush; the child's stderr:\n%s", stderr)
	}
	power := dir + "-power-loss"
	imageSyncedWALs(t, dir, power)
	want := childPairs("low")
	for _, image := range []struct{ dir, what string }{{dir, "process exit"}, {power, "machine crash"}} {
		p := openPartition(t, image.dir, closeChildOptions(), 0)
		if got := viewAll(t, p); !slices.Equal(got, want) {
			t.Errorf("%s after Close below the floor: partition 0 holds %d keys, want the %d applied", image.what, len(got), len(want))
		}
		_ = p.store.Close()
	}
}

// closeChildOptions have a memtable that the child's applies fit in, so that no flush of
// theirs is still running when the child counts the tables before its Close (with smaller
// memtables that count raced the flushes of a loaded machine); a reopen replays the
// write-ahead log into a memtable of the same size.
func closeChildOptions() Options {
	opts := quietOptions()
	opts.MemTableBytes = 16 << 20
	return opts
}

// closeBelowFloorChild applies childPairs("low") to partition 0 (committed, not synced: no
// Raft write follows), lowers the free space below the floor, closes the store, prints
// "closed <tables before> <tables after>" and the Close error, and waits to be killed.
func closeBelowFloorChild(dir string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var free atomic.Uint64
	free.Store(1 << 40)
	opts := closeChildOptions()
	opts.MinFreeBytes = 1 << 30
	opts.FreeBytesFunc = func(string) (uint64, error) { return free.Load(), nil }
	s, err := OpenSiloStore(dir, 2, opts)
	if err != nil {
		fail(err)
	}
	s.wals.syncLog = recordSynced(dir + ".synced")
	p, _ := s.Partition(0)
	if err := writeChildState(p, "low"); err != nil {
		fail(err)
	}
	tables := func() int {
		found, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
		return len(found)
	}
	before := tables()
	free.Store(1 << 20)
	closeErr := s.Close()
	fmt.Fprintln(os.Stderr, closeErr)
	fmt.Printf("closed %d %d\n", before, tables())
	select {}
}
