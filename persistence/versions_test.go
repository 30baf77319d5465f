package persistence

import (
	"fmt"
	"slices"
	"testing"

	"github.com/orreryhq/orrery/grains/kv"
)

func TestVersionsDiscardNeverPassesAnOpenRead(t *testing.T) {
	t.Parallel()
	v := versions{last: 5, durable: 5}
	read := v.beginRead(false)
	if read != 5 || v.next() != 6 {
		t.Fatalf("read at %d, next commit at %d; want 5 and 6", read, v.next())
	}
	v.applied(6)
	if got := v.synced(6); got != 5 {
		t.Errorf("discard %d with a read open at 5, want 5", got)
	}
	again := v.beginRead(false) // reads at 6
	v.applied(7)
	if got := v.synced(7); got != 5 {
		t.Errorf("discard %d with reads open at 5 and 6, want 5", got)
	}
	v.endRead(read)
	v.applied(8)
	if got := v.synced(8); got != again {
		t.Errorf("discard %d with a read open at %d, want it", got, again)
	}
	v.endRead(again)
	v.applied(9)
	if got := v.synced(9); got != 9 {
		t.Errorf("discard %d with no read open, want 9", got)
	}
}

// TestVersionsReadersBeginAtTheLastDurableVersion: a batch applied but not yet synced is read
// by the writer only; other readers begin at the last durable version, and compaction keeps
// what they read there.
func TestVersionsReadersBeginAtTheLastDurableVersion(t *testing.T) {
	t.Parallel()
	v := versions{last: 5, durable: 5}
	v.applied(6)
	v.applied(7)
	if got := v.beginRead(false); got != 5 {
		t.Errorf("a reader begins at %d before the sync, want 5", got)
	}
	if got := v.beginRead(true); got != 7 {
		t.Errorf("the writer reads at %d, want the last applied 7", got)
	}
	v.endRead(5)
	v.endRead(7)
	if got := v.synced(6); got != 6 {
		t.Errorf("discard %d after syncing 6 with 7 applied, want 6 (readers begin at 6)", got)
	}
	if got := v.beginRead(false); got != 6 {
		t.Errorf("a reader begins at %d after syncing 6, want 6", got)
	}
}

// TestReopenedStoreWritesAfterItsVersions: the store numbers its own Badger versions, so a
// reopened store must continue after the versions on disk; were it to start again, its new
// writes would sort as older than the ones they replace.
func TestReopenedStoreWritesAfterItsVersions(t *testing.T) {
	t.Parallel()
	s := openState(t, t.TempDir(), quietOptions())
	for i := range 10 {
		update(t, s, func(txn *Txn) error { return txn.Set([]byte("k"), fmt.Appendf(nil, "v%d", i)) })
	}
	s = reopen(t, s)
	update(t, s, func(txn *Txn) error { return txn.Set([]byte("k"), []byte("after reopen")) })
	if got := viewAll(t, s); !slices.Equal(got, []pair{{"k", "after reopen"}}) {
		t.Fatalf("after reopening and writing: %v", got)
	}
	s = reopen(t, s)
	if got := viewAll(t, s); !slices.Equal(got, []pair{{"k", "after reopen"}}) {
		t.Fatalf("after a second reopen: %v", got)
	}
}

// TestViewReadsOneVersionWhileUpdatesCommit: a view reads the version that was last committed
// when it began, whatever commits meanwhile.
func TestViewReadsOneVersionWhileUpdatesCommit(t *testing.T) {
	t.Parallel()
	s := openState(t, t.TempDir(), quietOptions())
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

// TestVersionsInBadgerAtOnce: commits handed to Badger before the earlier ones ended get the
// versions after them, and reads begin at the highest version applied: Badger applies the
// commits in the order they were handed over, so that one ending means every earlier one has
// (the type's doc), whatever order their callers hear it in.
func TestVersionsInBadgerAtOnce(t *testing.T) {
	t.Parallel()
	v := versions{last: 5, durable: 5}
	first, second, third := v.next(), v.next(), v.next()
	if first != 6 || second != 7 || third != 8 {
		t.Fatalf("versions %d, %d, %d handed out with two in flight, want 6, 7, 8", first, second, third)
	}
	v.applied(second)
	if got := v.beginRead(true); got != 7 {
		t.Errorf("reads begin at %d once 7 is applied, want 7", got)
	}
	v.applied(first)
	if got := v.beginRead(true); got != 7 {
		t.Errorf("reads begin at %d after an earlier commit's caller heard, want still 7", got)
	}
	v.applied(third)
	if got := v.next(); got != 9 {
		t.Errorf("next version %d, want 9", got)
	}
}
