package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/orreryhq/orrery/grains/kv"
)

// TestPartitionStatesAreIsolated: each partition sees only its own keys, under the same state
// keys, and neither the Raft log nor the silo metadata.
func TestPartitionStatesAreIsolated(t *testing.T) {
	t.Parallel()
	s := openSiloStore(t, t.TempDir(), 3)
	for n := range 3 {
		p, err := s.Partition(n)
		if err != nil {
			t.Fatal(err)
		}
		update(t, p, func(txn *Txn) error {
			if err := txn.Set([]byte("a"), fmt.Appendf(nil, "a of %d", n)); err != nil {
				return err
			}
			return txn.Set([]byte("\xff\xff"), fmt.Appendf(nil, "last of %d", n))
		})
	}
	if err := s.RaftLog().Persist([]RaftWrite{{Group: 1, HardState: hardState(1, 0, 0)}}); err != nil {
		t.Fatal(err)
	}
	for n := range 3 {
		p, _ := s.Partition(n)
		want := []pair{{"a", fmt.Sprintf("a of %d", n)}, {"\xff\xff", fmt.Sprintf("last of %d", n)}}
		if got := viewAll(t, p); !slices.Equal(got, want) {
			t.Errorf("partition %d sees %q, want %q", n, got, want)
		}
	}
	if _, err := s.Partition(3); err == nil {
		t.Error("Partition(3) of a 3-partition store: no error")
	}
}

// TestAppliedMarkPersistsAndMustAdvance: the mark is written with the apply, read back after a
// reopen, and an apply whose mark does not follow it is refused without writing.
func TestAppliedMarkPersistsAndMustAdvance(t *testing.T) {
	t.Parallel()
	p := openState(t, t.TempDir(), quietOptions())
	if m := p.Applied(); m != (AppliedMark{}) {
		t.Fatalf("new partition's mark %+v", m)
	}
	if err := p.Apply(AppliedMark{Index: 5, LoggedTimeMicros: 100}, func(txn *Txn) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []AppliedMark{{Index: 5, LoggedTimeMicros: 200}, {Index: 6, LoggedTimeMicros: 99}} {
		err := p.Apply(bad, func(txn *Txn) error { return txn.Set([]byte("k"), []byte("v")) })
		if err == nil {
			t.Errorf("Apply at %+v after {5 100}: no error", bad)
		}
	}
	if got := viewAll(t, p); len(got) != 0 {
		t.Errorf("refused applies wrote %q", got)
	}
	p = reopen(t, p)
	if m := p.Applied(); m != (AppliedMark{Index: 5, LoggedTimeMicros: 100}) {
		t.Fatalf("mark after reopen %+v, want {5 100}", m)
	}
}

// TestFailedApplyLeavesNothingWritten: an error from fn, or a refused write fn ignored, keeps
// the whole apply (and its mark) from committing.
func TestFailedApplyLeavesNothingWritten(t *testing.T) {
	t.Parallel()
	p := openState(t, t.TempDir(), quietOptions())
	errFn := errors.New("fn failed")
	err := p.Apply(nextMark(p), func(txn *Txn) error {
		_ = txn.Set([]byte("k"), []byte("v"))
		return errFn
	})
	if !errors.Is(err, errFn) {
		t.Fatalf("Apply: %v, want fn's error", err)
	}
	err = p.Apply(nextMark(p), func(txn *Txn) error {
		_ = txn.Set([]byte("k"), []byte("v"))
		_ = txn.Set([]byte("big"), make([]byte, p.MaxValueBytes()+1)) // refused, error ignored
		return nil
	})
	if !errors.Is(err, ErrValueTooBig) {
		t.Fatalf("Apply with an ignored refused write: %v, want ErrValueTooBig", err)
	}
	if got := viewAll(t, p); len(got) != 0 || p.Applied() != (AppliedMark{}) {
		t.Errorf("failed applies left %q, mark %+v", got, p.Applied())
	}
	var used *Txn
	update(t, p, func(txn *Txn) error { used = txn; return nil })
	if _, _, err := used.Get([]byte("k")); err == nil {
		t.Error("a Txn used after its function returned reads without error")
	}
}

// TestBatchTooBigIsReportedAndWritesNothing: a transaction beyond Badger's limit is
// ErrBatchTooBig, writes nothing, and leaves the store usable.
func TestBatchTooBigIsReportedAndWritesNothing(t *testing.T) {
	t.Parallel()
	opts := quietOptions()
	opts.MemTableBytes = 1 << 20
	p := openState(t, t.TempDir(), opts)
	value := bytes.Repeat([]byte("v"), 1000)
	err := p.Apply(nextMark(p), func(txn *Txn) error {
		for i := 0; ; i++ {
			if err := txn.Set(fmt.Appendf(nil, "k%06d", i), value); err != nil {
				return err
			}
		}
	})
	if !errors.Is(err, ErrBatchTooBig) {
		t.Fatalf("oversized batch: %v, want ErrBatchTooBig", err)
	}
	if got := viewAll(t, p); len(got) != 0 {
		t.Errorf("oversized batch left %d keys", len(got))
	}
	update(t, p, func(txn *Txn) error { return txn.Set([]byte("a"), value) })
}

// TestPartitionsApplyConcurrently: applies of different partitions run at the same time, each
// view sees whole applies of its own partition, the last one included, and every write
// survives a reopen.
func TestPartitionsApplyConcurrently(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openSiloStore(t, dir, 4)
	const applies = 50
	var wg sync.WaitGroup
	for n := range 4 {
		p, _ := s.Partition(n)
		wg.Go(func() {
			for i := range applies {
				err := p.Apply(nextMark(p), func(txn *Txn) error {
					for _, k := range []string{"x", "y"} {
						if err := txn.Set([]byte(k), fmt.Appendf(nil, "%d", i)); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				_ = p.View(func(r kv.Reader) error {
					x, _, _ := r.Get([]byte("x"))
					y, _, _ := r.Get([]byte("y"))
					if !bytes.Equal(x, y) {
						t.Errorf("partition %d: view sees x=%s y=%s", n, x, y)
					}
					// Other partitions' commits are in Badger at the same time; the view
					// still reads at a version that holds this apply.
					if want := fmt.Appendf(nil, "%d", i); !bytes.Equal(x, want) {
						t.Errorf("partition %d: view after apply %d sees x=%s", n, i, x)
					}
					return nil
				})
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSiloStore(t, dir, 4)
	for n := range 4 {
		p, _ := s.Partition(n)
		want := []pair{{"x", fmt.Sprint(applies - 1)}, {"y", fmt.Sprint(applies - 1)}}
		if got := viewAll(t, p); !slices.Equal(got, want) || p.Applied().Index != applies {
			t.Errorf("partition %d after reopen: %q at %+v", n, got, p.Applied())
		}
	}
}

// TestCommonPrefixBoundsEveryKeyInRange: every key k with start <= k < end begins with
// commonPrefix(start, end), which is what lets a scan name it to Badger.
func TestCommonPrefixBoundsEveryKeyInRange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gen := rapid.SliceOfN(rapid.ByteRange('a', 'd'), 0, 5)
		start, end, key := gen.Draw(t, "start"), gen.Draw(t, "end"), gen.Draw(t, "key")
		if bytes.Compare(key, start) < 0 || bytes.Compare(key, end) >= 0 {
			return
		}
		if p := commonPrefix(start, end); !bytes.HasPrefix(key, p) {
			t.Fatalf("key %q in [%q, %q) lacks the prefix %q", key, start, end, p)
		}
	})
	if p := commonPrefix([]byte("abc"), nil); p != nil {
		t.Fatalf("unbounded scan got prefix %q", p)
	}
}
