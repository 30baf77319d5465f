package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

func TestWritesSurviveReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lane := &orreryv1.Lane{Namespace: "ns", Queue: "q", Key: "k"}
	s, err := Open(dir, quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	update(t, s, func(txn *Txn) error {
		for i := range 10 {
			id := fmt.Sprintf("saga-%02d", i)
			rec := &orreryv1.SagaRecord{Lane: lane, SagaId: id, Revision: uint64(i + 1), StateJson: `{"n":1}`}
			if _, err := record.Store(txn, keys.SagaKey(lane, id), rec); err != nil {
				return err
			}
		}
		return txn.Delete(keys.SagaKey(lane, "saga-03"))
	})
	want := viewAll(t, s)
	if len(want) != 9 {
		t.Fatalf("before close: %d records, want 9", len(want))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir, quietOptions())
	if got := viewAll(t, s); !slices.Equal(got, want) {
		t.Fatalf("after reopen:\n got %v\nwant %v", got, want)
	}
	if err := s.View(func(r kv.Reader) error {
		rec := &orreryv1.SagaRecord{}
		found, err := record.Load(r, keys.SagaKey(lane, "saga-07"), rec)
		if err != nil || !found || rec.GetRevision() != 8 || rec.GetSagaId() != "saga-07" {
			t.Errorf("saga-07 after reopen: found=%v err=%v rec=%v", found, err, rec)
		}
		if _, found, _ := r.Get(keys.SagaKey(lane, "saga-03")); found {
			t.Error("deleted saga-03 is back after reopen")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestEpochIncrementsOnEveryOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for want := uint64(1); want <= 3; want++ {
		s, err := Open(dir, quietOptions())
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Epoch(); got != want {
			t.Errorf("open #%d: epoch %d", want, got)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoggedTimeAndAppliedIndexPersist(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	if s.LoggedTime() != 0 || s.AppliedIndex() != 0 {
		t.Fatalf("fresh store: logged time %d, applied index %d", s.LoggedTime(), s.AppliedIndex())
	}
	const wall = int64(1_767_225_600_000_000) // 2026-01-01T00:00:00Z
	last := int64(0)
	for index := uint64(1); index <= 3; index++ {
		logged := NextLoggedTime(last, wall) // same wall reading: +1 µs each batch
		update(t, s, func(txn *Txn) error {
			if err := txn.SetLoggedTime(logged); err != nil {
				return err
			}
			return txn.SetAppliedIndex(index)
		})
		last = logged
	}
	if s.LoggedTime() != wall+2 || s.AppliedIndex() != 3 {
		t.Fatalf("after 3 batches: logged time %d (want %d), applied index %d", s.LoggedTime(), wall+2, s.AppliedIndex())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir, quietOptions())
	if s.LoggedTime() != wall+2 || s.AppliedIndex() != 3 {
		t.Fatalf("after reopen: logged time %d (want %d), applied index %d (want 3)", s.LoggedTime(), wall+2, s.AppliedIndex())
	}
	// A slower clock after failover still moves forward.
	if next := NextLoggedTime(s.LoggedTime(), wall-1_000_000); next != wall+3 {
		t.Errorf("NextLoggedTime after reopen with a slow clock = %d, want %d", next, wall+3)
	}
	// Going backward is refused and leaves nothing written.
	for name, fn := range map[string]func(txn *Txn) error{
		"earlier logged time": func(txn *Txn) error { return txn.SetLoggedTime(wall) },
		"same applied index":  func(txn *Txn) error { return txn.SetAppliedIndex(3) },
	} {
		if err := s.Update(fn); !errors.Is(err, orrery.ErrInternal) {
			t.Errorf("%s: err = %v, want Internal", name, err)
		}
	}
	if s.LoggedTime() != wall+2 || s.AppliedIndex() != 3 {
		t.Errorf("refused writes changed the counters: %d, %d", s.LoggedTime(), s.AppliedIndex())
	}
}

func TestSecondOpenIsUnavailableUntilClose(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := Open(dir, quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	second, err := Open(dir, quietOptions())
	if err == nil {
		_ = second.Close()
		t.Fatal("second Open of a held directory succeeded")
	}
	if !errors.Is(err, orrery.ErrUnavailable) || !bytes.Contains([]byte(err.Error()), []byte("held elsewhere")) {
		t.Fatalf("second Open: %v, want Unavailable saying the partition is held elsewhere", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, err = Open(dir, quietOptions())
	if err != nil {
		t.Fatalf("Open after the holder closed: %v", err)
	}
	defer second.Close()
	if second.Epoch() != 2 {
		t.Errorf("epoch after the failed and the successful reopen = %d, want 2", second.Epoch())
	}
}

func TestFailedFnLeavesNothingWritten(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), quietOptions())
	update(t, s, func(txn *Txn) error { return txn.Set([]byte("a"), []byte("1")) })
	err := s.Update(func(txn *Txn) error {
		for _, step := range []error{
			txn.Set([]byte("b"), []byte("2")),
			txn.Delete([]byte("a")),
			txn.SetLoggedTime(42),
			txn.SetAppliedIndex(1),
			txn.AppendJournal(&orreryv1.JournalRecord{AppliedIndex: 1}),
		} {
			if step != nil {
				return step
			}
		}
		return errDiscard
	})
	if !errors.Is(err, errDiscard) {
		t.Fatalf("Update returned %v, want fn's error unchanged", err)
	}
	if got := viewAll(t, s); !slices.Equal(got, []pair{{"a", "1"}}) {
		t.Errorf("after a failed batch: %v", got)
	}
	if s.LoggedTime() != 0 || s.AppliedIndex() != 0 {
		t.Errorf("failed batch moved logged time %d / applied index %d", s.LoggedTime(), s.AppliedIndex())
	}
	journal := 0
	_ = s.ScanJournal(0, func(*orreryv1.JournalRecord) (bool, error) { journal++; return true, nil })
	if journal != 0 {
		t.Errorf("failed batch left %d journal records", journal)
	}
}

func TestFreeDiskFloorRefusesWrites(t *testing.T) {
	t.Parallel()
	var free atomic.Uint64
	free.Store(10 << 30)
	opts := quietOptions()
	opts.MinFreeBytes = 1 << 30
	opts.FreeBytesFunc = func(string) (uint64, error) { return free.Load(), nil }
	dir := t.TempDir()
	s := openStore(t, dir, opts)
	update(t, s, func(txn *Txn) error { return txn.Set([]byte("a"), []byte("1")) })

	free.Store(1 << 20)
	called := false
	err := s.Update(func(txn *Txn) error { called = true; return txn.Set([]byte("b"), []byte("2")) })
	if !errors.Is(err, orrery.ErrUnavailable) || orrery.CodeOf(err) != orrery.CodeUnavailable {
		t.Fatalf("Update below the floor: %v, want Unavailable", err)
	}
	if called {
		t.Error("Update below the floor ran the batch")
	}
	if got := viewAll(t, s); !slices.Equal(got, []pair{{"a", "1"}}) {
		t.Errorf("reads below the floor: %v", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, opts); !errors.Is(err, orrery.ErrUnavailable) {
		t.Fatalf("Open below the floor: %v, want Unavailable", err)
	}

	free.Store(10 << 30)
	s = openStore(t, dir, opts)
	update(t, s, func(txn *Txn) error { return txn.Set([]byte("b"), []byte("2")) })
}

func TestFreeBytesReadsTheFileSystem(t *testing.T) {
	t.Parallel()
	free, err := FreeBytes(t.TempDir())
	if err != nil || free == 0 {
		t.Fatalf("FreeBytes = %d, %v", free, err)
	}
	if _, err := FreeBytes("/does/not/exist"); err == nil {
		t.Error("FreeBytes of a missing directory did not fail")
	}
}

func TestBatchTooBigIsReportedAndWritesNothing(t *testing.T) {
	t.Parallel()
	opts := quietOptions()
	opts.MemTableBytes = 1 << 20 // 153 KiB batches
	s := openStore(t, t.TempDir(), opts)
	if got, want := s.MaxBatchBytes(), int64(15*(1<<20)/100); got != want {
		t.Errorf("MaxBatchBytes = %d, want %d", got, want)
	}
	value := bytes.Repeat([]byte("v"), 1000)
	err := s.Update(func(txn *Txn) error {
		for i := 0; ; i++ {
			if err := txn.Set(fmt.Appendf(nil, "k%06d", i), value); err != nil {
				return err
			}
		}
	})
	if !errors.Is(err, ErrBatchTooBig) {
		t.Fatalf("oversized batch: %v, want ErrBatchTooBig", err)
	}
	if got := viewAll(t, s); len(got) != 0 {
		t.Errorf("oversized batch left %d keys", len(got))
	}
	// The store is still usable: a too-big batch is not a commit failure.
	update(t, s, func(txn *Txn) error { return txn.Set([]byte("a"), value) })
}

func TestReservedPrefixIsHidden(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), quietOptions())
	update(t, s, func(txn *Txn) error {
		for _, k := range []string{"o", "p", "p/", "p0", "q"} {
			if k == "p/" {
				if err := txn.Set([]byte(k), nil); !errors.Is(err, orrery.ErrInternal) {
					t.Errorf("Set(%q) = %v, want Internal", k, err)
				}
				continue
			}
			if err := txn.Set([]byte(k), []byte(k)); err != nil {
				return err
			}
		}
		if err := txn.Delete(epochKey); !errors.Is(err, orrery.ErrInternal) {
			t.Errorf("Delete(%q) = %v, want Internal", epochKey, err)
		}
		if err := txn.Set(nil, []byte("x")); !errors.Is(err, orrery.ErrInternal) {
			t.Errorf("Set(empty key) = %v, want Internal", err)
		}
		return txn.SetAppliedIndex(1)
	})
	want := []pair{{"o", "o"}, {"p", "p"}, {"p0", "p0"}, {"q", "q"}}
	if got := viewAll(t, s); !slices.Equal(got, want) {
		t.Errorf("state keys = %v, want %v", got, want)
	}
	_ = s.View(func(r kv.Reader) error {
		if _, found, err := r.Get(epochKey); found || err != nil {
			t.Errorf("Get(%q) found=%v err=%v, want hidden", epochKey, found, err)
		}
		if got := collect(t, r, []byte("p/"), []byte("p0")); len(got) != 0 {
			t.Errorf("Scan of p/ = %v, want nothing", got)
		}
		return nil
	})
}

func TestCommitFailurePoisonsTheStore(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), quietOptions())
	update(t, s, func(txn *Txn) error { return txn.Set([]byte("a"), []byte("1")) })
	// Close Badger underneath the Store: its next commit fails like a failed sync would.
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
	err := s.Update(func(txn *Txn) error { return txn.Set([]byte("b"), []byte("2")) })
	if !errors.Is(err, ErrCommitFailed) || !errors.Is(err, orrery.ErrUnavailable) {
		t.Fatalf("Update on a failing database: %v, want ErrCommitFailed (Unavailable)", err)
	}
	if err := s.Update(func(*Txn) error { t.Error("batch ran after a commit failure"); return nil }); !errors.Is(err, ErrCommitFailed) {
		t.Errorf("Update after a commit failure: %v", err)
	}
	if err := s.View(func(kv.Reader) error { t.Error("read ran after a commit failure"); return nil }); !errors.Is(err, ErrCommitFailed) {
		t.Errorf("View after a commit failure: %v", err)
	}
}

func TestCloseIsIdempotentAndFinal(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir(), quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	if err := s.Update(func(*Txn) error { return nil }); !errors.Is(err, orrery.ErrUnavailable) {
		t.Errorf("Update after Close: %v", err)
	}
	if err := s.View(func(kv.Reader) error { return nil }); !errors.Is(err, orrery.ErrUnavailable) {
		t.Errorf("View after Close: %v", err)
	}
	if err := s.RunValueLogGC(0.5); !errors.Is(err, orrery.ErrUnavailable) {
		t.Errorf("RunValueLogGC after Close: %v", err)
	}
}

func TestRunValueLogGC(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), quietOptions())
	for round := range 3 {
		update(t, s, func(txn *Txn) error {
			for i := range 100 {
				if err := txn.Set(fmt.Appendf(nil, "k%03d", i), fmt.Appendf(nil, "round %d", round)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := s.RunValueLogGC(0.5); err != nil {
		t.Fatalf("RunValueLogGC: %v", err)
	}
	if err := s.RunValueLogGC(1.5); !errors.Is(err, orrery.ErrInternal) {
		t.Errorf("RunValueLogGC(1.5) = %v, want Internal", err)
	}
	if got := viewAll(t, s); len(got) != 100 || got[0].value != "round 2" {
		t.Errorf("after GC: %d keys, first %v", len(got), got[0])
	}
}

func TestConcurrentViewsSeeWholeBatches(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), quietOptions())
	const batches, keysPerBatch = 20, 8
	done := make(chan struct{})
	readErrs := make(chan error, 2)
	for range 2 {
		go func() {
			for {
				select {
				case <-done:
					readErrs <- nil
					return
				default:
				}
				// Every key of a batch carries the batch number: a view sees whole batches only.
				err := s.View(func(r kv.Reader) error {
					values := map[string]int{}
					_ = r.Scan(nil, nil, func(_, value []byte) (bool, error) { values[string(value)]++; return true, nil })
					if len(values) > 1 {
						return fmt.Errorf("a view saw several batches at once: %v", values)
					}
					for v, n := range values {
						if n != keysPerBatch {
							return fmt.Errorf("a view saw %d keys of batch %s", n, v)
						}
					}
					return nil
				})
				if err != nil {
					readErrs <- err
					return
				}
			}
		}()
	}
	for b := range batches {
		update(t, s, func(txn *Txn) error {
			for k := range keysPerBatch {
				if err := txn.Set(fmt.Appendf(nil, "k%d", k), fmt.Appendf(nil, "batch-%d", b)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	close(done)
	for range 2 {
		if err := <-readErrs; err != nil {
			t.Error(err)
		}
	}
}

func TestTxnUsedAfterItsFunctionFails(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), quietOptions())
	var kept *Txn
	var keptReader kv.Reader
	update(t, s, func(txn *Txn) error { kept = txn; return txn.Set([]byte("a"), []byte("1")) })
	_ = s.View(func(r kv.Reader) error { keptReader = r; return nil })
	noop := func(_, _ []byte) (bool, error) { return true, nil }
	if err := kept.Scan(nil, nil, noop); !errors.Is(err, orrery.ErrInternal) {
		t.Errorf("Txn.Scan after Update: %v", err)
	}
	if err := keptReader.Scan(nil, nil, noop); !errors.Is(err, orrery.ErrInternal) {
		t.Errorf("reader Scan after View: %v", err)
	}
}

func TestValuesStayOutOfTheValueLog(t *testing.T) {
	t.Parallel()
	opts := quietOptions()
	opts.MemTableBytes = 1 << 20 // value threshold lowered to the 153 KiB batch cap
	s := openStore(t, t.TempDir(), opts)
	if got, want := s.MaxValueBytes(), s.MaxBatchBytes()-1; got != want {
		t.Errorf("MaxValueBytes = %d, want %d", got, want)
	}
	err := s.Update(func(txn *Txn) error { return txn.Set([]byte("big"), make([]byte, s.MaxValueBytes()+1)) })
	if !errors.Is(err, ErrValueTooBig) || !errors.Is(err, orrery.ErrInternal) {
		t.Fatalf("oversized value: %v, want ErrValueTooBig", err)
	}
	if got := viewAll(t, s); len(got) != 0 {
		t.Errorf("oversized value left %d keys", len(got))
	}
	if d := int64(DefaultValueThresholdBytes - 1); openStore(t, t.TempDir(), quietOptions()).MaxValueBytes() != d {
		t.Errorf("default MaxValueBytes is not %d", d)
	}
}

func TestBatchWithARefusedWriteNeverCommits(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), quietOptions())
	err := s.Update(func(txn *Txn) error {
		_ = txn.Set([]byte("a"), []byte("1"))
		_ = txn.Set([]byte("big"), make([]byte, s.MaxValueBytes()+1)) // error ignored on purpose
		return nil
	})
	if !errors.Is(err, ErrValueTooBig) {
		t.Fatalf("Update = %v, want the refused write's error", err)
	}
	if got := viewAll(t, s); len(got) != 0 {
		t.Errorf("a batch with a refused write committed %v", got)
	}
}

func TestBadgerCacheReportIsNotLogged(t *testing.T) {
	var buf strings.Builder
	l := slogLogger{logger: slog.New(slog.NewTextHandler(&buf, nil))}
	l.Warningf("Block cache might be too small. Metrics: hit: 1 miss: 2\n")
	l.Warningf("Cache life expectancy (in seconds): \n -- Histogram: \n")
	if buf.Len() != 0 {
		t.Fatalf("cache report logged: %q", buf.String())
	}
	l.Warningf("value log GC failed: %v", "disk")
	if !strings.Contains(buf.String(), "value log GC failed") {
		t.Fatalf("a real warning was dropped: %q", buf.String())
	}
}

// TestFlushStaggerShrinksTheMemtable: stores opened with FlushStagger 0..7 get eight different
// memtable sizes (so their transaction limits differ), the eighth repeats the first, and the
// smallest is what MinMaxBatchBytes reports.
func TestFlushStaggerShrinksTheMemtable(t *testing.T) {
	t.Parallel()
	seen := map[int64]bool{}
	var smallest int64
	for stagger := range 9 {
		opts := quietOptions()
		opts.MemTableBytes = 1 << 20
		opts.FlushStagger = stagger
		s := openStore(t, t.TempDir(), opts)
		limit := s.MaxBatchBytes()
		if stagger == 8 {
			if !seen[limit] || limit != int64(15*(1<<20)/100) {
				t.Errorf("FlushStagger 8: limit %d, want the unstaggered %d", limit, 15*(1<<20)/100)
			}
			continue
		}
		if seen[limit] {
			t.Errorf("FlushStagger %d repeats limit %d", stagger, limit)
		}
		seen[limit] = true
		if smallest == 0 || limit < smallest {
			smallest = limit
		}
	}
	opts := quietOptions()
	opts.MemTableBytes = 1 << 20
	if got := MinMaxBatchBytes(opts); got != smallest {
		t.Errorf("MinMaxBatchBytes = %d, want the smallest limit %d", got, smallest)
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

// TestScansAcrossManyTablesMatchAReference writes enough through small memtables to spread
// keys over many tables and levels, then checks range scans against a sorted reference.
func TestScansAcrossManyTablesMatchAReference(t *testing.T) {
	t.Parallel()
	opts := quietOptions()
	opts.MemTableBytes = 1 << 20
	s := openStore(t, t.TempDir(), opts)
	ref := map[string]string{}
	value := bytes.Repeat([]byte("v"), 100)
	for batch := range 40 {
		err := s.Update(func(txn *Txn) error {
			for i := range 500 {
				k := fmt.Sprintf("k/%05d", (batch*500+i*7919)%20000)
				if i%5 == 0 {
					delete(ref, k)
					if err := txn.Delete([]byte(k)); err != nil {
						return err
					}
					continue
				}
				ref[k] = string(value)
				if err := txn.Set([]byte(k), value); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var sorted []string
	for k := range ref {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	for _, r := range [][2]string{{"k/00000", "k/20000"}, {"k/01234", "k/01299"}, {"k/1", "k/2"}, {"k/19990", "k/3"}, {"a", "l"}} {
		var got []string
		err := s.View(func(rd kv.Reader) error {
			return rd.Scan([]byte(r[0]), []byte(r[1]), func(key, _ []byte) (bool, error) {
				got = append(got, string(key))
				return true, nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, k := range sorted {
			if k >= r[0] && k < r[1] {
				want = append(want, k)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("scan [%s, %s): %d keys, want %d", r[0], r[1], len(got), len(want))
		}
	}
}
