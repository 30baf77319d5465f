package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/grains/kv"
)

// smallOptions keep Badger's transaction limit small (about 157 kB), so that a state of a few
// MiB needs many transactions to install.
func smallOptions() Options {
	opts := quietOptions()
	opts.MemTableBytes = 1 << 20
	return opts
}

// openPartition opens a silo store of two partitions in dir and returns partition n's state;
// the store closes when the test ends.
func openPartition(t testing.TB, dir string, opts Options, n int) *PartitionState {
	t.Helper()
	s, err := OpenSiloStore(dir, 2, opts)
	if err != nil {
		t.Fatalf("OpenSiloStore(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	p, err := s.Partition(n)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// reopenPartition closes p's store and opens it again.
func reopenPartition(t testing.TB, p *PartitionState) *PartitionState {
	t.Helper()
	if err := p.store.Close(); err != nil {
		t.Fatal(err)
	}
	return openPartition(t, p.store.Dir(), p.store.opts, p.n)
}

// fill writes keys tag/000000... with values of valueBytes until about totalBytes are written,
// in applies well within the store's limit, and returns what the partition then holds.
func fill(t testing.TB, p *PartitionState, tag string, totalBytes, valueBytes int) []pair {
	t.Helper()
	perApply := max(1, int(p.MaxBatchBytes())/(2*(valueBytes+40)))
	for i := 0; i*valueBytes < totalBytes; {
		update(t, p, func(txn *Txn) error {
			for end := i + perApply; i < end && i*valueBytes < totalBytes; i++ {
				value := bytes.Repeat([]byte{byte('a' + i%26)}, valueBytes)
				if err := txn.Set(fmt.Appendf(nil, "%s/%06d", tag, i), value); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return viewAll(t, p)
}

// readSnapshot reads every chunk of a snapshot of p, checking their bound, and closes it.
func readSnapshot(t testing.TB, p *PartitionState) ([][]byte, AppliedMark) {
	t.Helper()
	snap, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	return readAll(t, snap), snap.Mark()
}

func readAll(t testing.TB, snap *StateSnapshot) [][]byte {
	t.Helper()
	var chunks [][]byte
	for {
		chunk, err := snap.Next()
		if err == io.EOF {
			return chunks
		}
		if err != nil {
			t.Fatalf("snapshot chunk %d: %v", len(chunks), err)
		}
		if len(chunk) == 0 || len(chunk) > MaxSnapshotChunkBytes {
			t.Fatalf("snapshot chunk %d of %d bytes (1 to %d)", len(chunks), len(chunk), MaxSnapshotChunkBytes)
		}
		chunks = append(chunks, chunk)
	}
}

// sliceChunks streams chunks, then err (io.EOF when nil) in place of chunk failAt, if set.
type sliceChunks struct {
	chunks [][]byte
	failAt int // -1: never
	err    error
	next   int
}

func streamOf(chunks [][]byte) *sliceChunks { return &sliceChunks{chunks: chunks, failAt: -1} }

func (c *sliceChunks) Next() ([]byte, error) {
	if c.next == c.failAt {
		return nil, c.err
	}
	if c.next == len(c.chunks) {
		return nil, io.EOF
	}
	c.next++
	return c.chunks[c.next-1], nil
}

// strayKeys lists p's store keys under d/<n>/ that are not of its current generation.
func strayKeys(t testing.TB, p *PartitionState) []string {
	t.Helper()
	var stray []string
	txn, done := p.store.readApplied()
	defer done()
	err := iterate(txn, statePrefix(p.n), kv.PrefixEnd(statePrefix(p.n)), func(key, _ []byte) (bool, error) {
		if !bytes.HasPrefix(key, p.prefix) {
			stray = append(stray, fmt.Sprintf("%q", key))
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return stray
}

// checkState fails unless p holds exactly want at mark, with no key of another generation.
func checkState(t testing.TB, p *PartitionState, want []pair, mark AppliedMark, what string) {
	t.Helper()
	if got := viewAll(t, p); !slices.Equal(got, want) {
		t.Errorf("%s: %d keys, want %d (equal: %v)", what, len(got), len(want), slices.Equal(got, want))
	}
	if got := p.Applied(); got != mark {
		t.Errorf("%s: mark %+v, want %+v", what, got, mark)
	}
	if stray := strayKeys(t, p); len(stray) > 0 {
		t.Errorf("%s: %d keys outside the current generation, first %s", what, len(stray), stray[0])
	}
}

// TestSnapshotInstallReproducesTheState: a state of several chunks, installed into another
// partition of another store in several transactions, replaces that partition's state and
// mark exactly, survives a reopen, takes applies after it, and snapshots to the same stream.
func TestSnapshotInstallReproducesTheState(t *testing.T) {
	t.Parallel()
	src := openPartition(t, t.TempDir(), smallOptions(), 0)
	want := fill(t, src, "k", 3<<20, 1000)
	update(t, src, func(txn *Txn) error { return txn.Delete([]byte("k/000007")) })
	want = viewAll(t, src)
	chunks, mark := readSnapshot(t, src)
	if len(chunks) < 3 || mark != src.Applied() {
		t.Fatalf("snapshot of %d chunks at %+v (state at %+v), want at least 3 chunks at the state's mark", len(chunks), mark, src.Applied())
	}

	dst := openPartition(t, t.TempDir(), smallOptions(), 1)
	fill(t, dst, "old", 200<<10, 500)
	staged := 0
	dst.installHook = func(s installStep) bool {
		if s == stepStaged {
			staged++
		}
		return false
	}
	if err := dst.Install(mark, streamOf(chunks)); err != nil {
		t.Fatal(err)
	}
	dst.installHook = nil
	if staged < 2 {
		t.Errorf("the install staged in %d transactions, want several", staged)
	}
	checkState(t, dst, want, mark, "after the install")
	if again, _ := readSnapshot(t, dst); !slices.EqualFunc(again, chunks, bytes.Equal) {
		t.Error("the installed state's snapshot differs from the one installed")
	}
	dst = reopenPartition(t, dst)
	checkState(t, dst, want, mark, "after the install and a reopen")
	update(t, dst, func(txn *Txn) error { return txn.Set([]byte("k/000007"), []byte("back")) })
	want = slices.Insert(want, 7, pair{"k/000007", "back"})
	dst = reopenPartition(t, dst)
	checkState(t, dst, want, AppliedMark{Index: mark.Index + 1, LoggedTimeMicros: mark.LoggedTimeMicros + 1}, "after an apply on the installed state")
}

// TestSnapshotOfAnEmptyStateInstallsEmpty: an empty state's snapshot is its format byte, and
// installing it empties the target.
func TestSnapshotOfAnEmptyStateInstallsEmpty(t *testing.T) {
	t.Parallel()
	src := openPartition(t, t.TempDir(), quietOptions(), 0)
	chunks, _ := readSnapshot(t, src)
	if len(chunks) != 1 || !bytes.Equal(chunks[0], []byte{snapshotFormat}) {
		t.Fatalf("empty snapshot: %q", chunks)
	}
	dst := openPartition(t, t.TempDir(), quietOptions(), 0)
	fill(t, dst, "old", 10<<10, 100)
	if err := dst.Install(AppliedMark{Index: 9, LoggedTimeMicros: 9}, streamOf(chunks)); err != nil {
		t.Fatal(err)
	}
	checkState(t, dst, nil, AppliedMark{Index: 9, LoggedTimeMicros: 9}, "after installing an empty state")
}

// TestInstallOfAFailingStreamKeepsTheOldState: a stream that breaks after some chunks (or does
// not decode) leaves the old state and mark, and nothing staged, before and after a reopen;
// the error wraps the stream's.
func TestInstallOfAFailingStreamKeepsTheOldState(t *testing.T) {
	t.Parallel()
	src := openPartition(t, t.TempDir(), smallOptions(), 0)
	fill(t, src, "k", 3<<20, 1000)
	chunks, mark := readSnapshot(t, src)

	dst := openPartition(t, t.TempDir(), smallOptions(), 0)
	old := fill(t, dst, "old", 200<<10, 500)
	oldMark := dst.Applied()
	broken := errors.New("stream broken")
	err := dst.Install(mark, &sliceChunks{chunks: chunks, failAt: 2, err: broken})
	if !errors.Is(err, broken) {
		t.Fatalf("Install of a broken stream: %v, want it to wrap the stream's error", err)
	}
	checkState(t, dst, old, oldMark, "after a broken stream")

	corrupt := slices.Clone(chunks)
	corrupt[len(corrupt)-1] = corrupt[len(corrupt)-1][:len(corrupt[len(corrupt)-1])-1] // ends inside a record
	if err := dst.Install(mark, streamOf(corrupt)); err == nil {
		t.Fatal("Install of a stream cut inside a record: no error")
	}
	checkState(t, dst, old, oldMark, "after a corrupt stream")
	dst = reopenPartition(t, dst)
	checkState(t, dst, old, oldMark, "after failed installs and a reopen")
}

// TestInstallCrashAtEveryStepLeavesOldOrNew: an install stopped after any of its transactions
// (staging, the switch, each deletion of the old generation), then the store closed and
// opened again, leaves either the old state and mark (before the switch) or the new ones
// (from it on), never a mix, and no key of another generation; an install then succeeds.
func TestInstallCrashAtEveryStepLeavesOldOrNew(t *testing.T) {
	t.Parallel()
	src := openPartition(t, t.TempDir(), smallOptions(), 0)
	want := fill(t, src, "k", 1200<<10, 1000)
	chunks, mark := readSnapshot(t, src)

	setup := func() (*PartitionState, []pair, AppliedMark) {
		dst := openPartition(t, t.TempDir(), smallOptions(), 1)
		old := fill(t, dst, "old", 120<<10, 20) // many keys: several deletion transactions
		return dst, old, dst.Applied()
	}
	var steps []installStep
	dst, _, _ := setup()
	dst.installHook = func(s installStep) bool { steps = append(steps, s); return false }
	if err := dst.Install(mark, streamOf(chunks)); err != nil {
		t.Fatal(err)
	}
	switched := slices.Index(steps, stepSwitched)
	if switched < 2 || len(steps)-switched < 3 {
		t.Fatalf("steps %v: want several staging transactions, the switch, several deletions", steps)
	}
	for k := range steps {
		dst, old, oldMark := setup()
		calls := 0
		dst.installHook = func(installStep) bool { calls++; return calls == k+1 }
		if err := dst.Install(mark, streamOf(chunks)); !errors.Is(err, errInstallStopped) {
			t.Fatalf("step %d: Install: %v, want it stopped", k, err)
		}
		dst = reopenPartition(t, dst)
		what := fmt.Sprintf("crash after step %d (%v), switch at %d", k, steps[k], switched)
		if k < switched {
			checkState(t, dst, old, oldMark, what)
		} else {
			checkState(t, dst, want, mark, what)
		}
		if k == 0 || k == switched-1 {
			if err := dst.Install(mark, streamOf(chunks)); err != nil {
				t.Fatalf("%s: the next Install: %v", what, err)
			}
			checkState(t, dst, want, mark, what+", then an install")
		}
	}
}

// TestSnapshotStaysConsistentWhileAppliesAndInstallsGoOn: a snapshot taken before applies
// that overwrite, delete and add keys, and before an install that replaces the state (and
// deletes the generation the snapshot reads), streams the state and mark as they were when
// it was taken.
func TestSnapshotStaysConsistentWhileAppliesAndInstallsGoOn(t *testing.T) {
	t.Parallel()
	p := openPartition(t, t.TempDir(), smallOptions(), 0)
	want := fill(t, p, "k", 3<<20, 1000)
	wantChunks, wantMark := readSnapshot(t, p)
	snap, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	first, err := snap.Next()
	if err != nil {
		t.Fatal(err)
	}
	fill(t, p, "k", 1<<20, 900) // overwrites the first keys
	update(t, p, func(txn *Txn) error {
		if err := txn.Delete([]byte(want[len(want)-1].key)); err != nil {
			return err
		}
		return txn.Set([]byte("k/zzz"), []byte("new"))
	})
	other := openPartition(t, t.TempDir(), quietOptions(), 0)
	fill(t, other, "x", 10<<10, 100)
	otherChunks, otherMark := readSnapshot(t, other)
	if err := p.Install(otherMark, streamOf(otherChunks)); err != nil {
		t.Fatal(err)
	}
	got := append([][]byte{first}, readAll(t, snap)...)
	if snap.Mark() != wantMark || !slices.EqualFunc(got, wantChunks, bytes.Equal) {
		t.Fatalf("snapshot read while applies and an install went on: %d chunks at %+v, want %d at %+v (equal: %v)",
			len(got), snap.Mark(), len(wantChunks), wantMark, slices.EqualFunc(got, wantChunks, bytes.Equal))
	}
	dst := openPartition(t, t.TempDir(), smallOptions(), 0)
	if err := dst.Install(snap.Mark(), streamOf(got)); err != nil {
		t.Fatal(err)
	}
	checkState(t, dst, want, wantMark, "the snapshot installed")
}

// TestViewsDuringAnInstallReadOneGeneration: views running while an install switches the
// state each see either the whole old state or the whole new one.
func TestViewsDuringAnInstallReadOneGeneration(t *testing.T) {
	t.Parallel()
	src := openPartition(t, t.TempDir(), smallOptions(), 0)
	update(t, src, func(txn *Txn) error { return txn.Set([]byte("a/generation"), []byte("new")) })
	want := fill(t, src, "k", 1<<20, 1000)
	chunks, mark := readSnapshot(t, src)
	dst := openPartition(t, t.TempDir(), smallOptions(), 0)
	update(t, dst, func(txn *Txn) error { return txn.Set([]byte("a/generation"), []byte("old")) })
	old := fill(t, dst, "k", 300<<10, 700)
	counts := map[string]int{"old": len(old), "new": len(want)}

	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				var gen string
				n := 0
				err := dst.View(func(r kv.Reader) error {
					value, _, err := r.Get([]byte("a/generation"))
					gen = string(value)
					if err != nil {
						return err
					}
					return r.Scan(nil, nil, func(_, _ []byte) (bool, error) { n++; return true, nil })
				})
				if err == nil && n != counts[gen] {
					err = fmt.Errorf("a view of generation %q saw %d keys, want %d", gen, n, counts[gen])
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		}()
	}
	err := dst.Install(mark, streamOf(chunks))
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	checkState(t, dst, want, mark, "after the install")
}

// TestOpenRefusesStateKeysOutsideAnyGeneration: a state key directly under d/<n>/ (the layout
// before generations) fails the open instead of being read or deleted.
func TestOpenRefusesStateKeysOutsideAnyGeneration(t *testing.T) {
	t.Parallel()
	p := openPartition(t, t.TempDir(), quietOptions(), 1)
	key := append(statePrefix(1), "s/schedule"...)
	if _, err := p.store.commitUnsynced([]storeWrite{{key: key, value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	dir := p.store.Dir()
	if err := p.store.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := OpenSiloStore(dir, 2, quietOptions())
	if err == nil {
		_ = s.Close()
		t.Fatal("open of a store with a state key outside any generation: no error")
	}
	if orrery.CodeOf(err) != orrery.CodeInternal {
		t.Fatalf("open: %v, want Internal", err)
	}
}
