package persistence

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWALSyncFollowsSeveralRotations: after several rotations, the logs between already
// flushed and deleted, a sync syncs the current log, not the deleted one it synced last.
func TestWALSyncFollowsSeveralRotations(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var synced []string
	w := newWALSyncer(dir)
	w.syncLog = func(f *os.File) error { synced = append(synced, filepath.Base(f.Name())); return nil }
	defer w.close()
	create := func(n int) {
		if err := os.WriteFile(walPath(dir, n), nil, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	create(1)
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	create(2)
	create(3)
	for _, n := range []int{1, 2} { // flushed and deleted, oldest first
		if err := os.Remove(walPath(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"00001.mem", "00003.mem"}; !slices.Equal(synced, want) {
		t.Fatalf("syncs of %v, want %v", synced, want)
	}
}
