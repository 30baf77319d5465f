package persistence

import (
	"fmt"
	"slices"
	"testing"

	"github.com/orreryhq/orrery/grains/kv"
)

func TestVersionsDiscardNeverPassesAnOpenRead(t *testing.T) {
	t.Parallel()
	v := versions{last: 5}
	read := v.beginRead()
	if read != 5 || v.next() != 6 {
		t.Fatalf("read at %d, next commit at %d; want 5 and 6", read, v.next())
	}
	if got := v.committed(6); got != 5 {
		t.Errorf("discard %d with a read open at 5, want 5", got)
	}
	again := v.beginRead() // reads at 6
	if got := v.committed(7); got != 5 {
		t.Errorf("discard %d with reads open at 5 and 6, want 5", got)
	}
	v.endRead(read)
	if got := v.committed(8); got != again {
		t.Errorf("discard %d with a read open at %d, want it", got, again)
	}
	v.endRead(again)
	if got := v.committed(9); got != 9 {
		t.Errorf("discard %d with no read open, want 9", got)
	}
}

// TestReopenedStoreWritesAfterItsVersions: the store numbers its own Badger versions, so a
// reopened store must continue after the versions on disk; were it to start again, its new
// writes would sort as older than the ones they replace.
func TestReopenedStoreWritesAfterItsVersions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore(t, dir, quietOptions())
	for i := range 10 {
		update(t, s, func(txn *Txn) error { return txn.Set([]byte("k"), fmt.Appendf(nil, "v%d", i)) })
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, quietOptions())
	update(t, s, func(txn *Txn) error { return txn.Set([]byte("k"), []byte("after reopen")) })
	if got := viewAll(t, s); !slices.Equal(got, []pair{{"k", "after reopen"}}) {
		t.Fatalf("after reopening and writing: %v", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, quietOptions())
	if got := viewAll(t, s); !slices.Equal(got, []pair{{"k", "after reopen"}}) {
		t.Fatalf("after a second reopen: %v", got)
	}
}

// TestViewReadsOneVersionWhileUpdatesCommit: a view reads the version that was last committed
// when it began, whatever commits meanwhile.
func TestViewReadsOneVersionWhileUpdatesCommit(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), quietOptions())
	update(t, s, func(txn *Txn) error { return txn.Set([]byte("k"), []byte("1")) })
	err := s.View(func(r kv.Reader) error {
		update(t, s, func(txn *Txn) error { return txn.Set([]byte("k"), []byte("2")) })
		update(t, s, func(txn *Txn) error { return txn.Delete([]byte("k")) })
		if got, found, err := r.Get([]byte("k")); err != nil || !found || string(got) != "1" {
			t.Errorf("view begun at k=1 reads %q, %v, %v", got, found, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := viewAll(t, s); len(got) != 0 {
		t.Errorf("after the delete: %v", got)
	}
}
