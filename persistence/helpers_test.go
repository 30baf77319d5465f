package persistence

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/orreryhq/orrery/grains/kv"
)

// quietOptions are test options: Badger's warnings go nowhere.
func quietOptions() Options {
	return Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// openState opens a silo store of two partitions in dir and returns partition 0's state; the
// store closes when the test ends.
func openState(t testing.TB, dir string, opts Options) *PartitionState {
	t.Helper()
	s, err := OpenSiloStore(dir, 2, opts)
	if err != nil {
		t.Fatalf("OpenSiloStore(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	p, err := s.Partition(0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// reopen closes p's store and opens it again.
func reopen(t testing.TB, p *PartitionState) *PartitionState {
	t.Helper()
	if err := p.store.Close(); err != nil {
		t.Fatal(err)
	}
	return openState(t, p.store.Dir(), p.store.opts)
}

// nextMark is the mark after p's: the next index, one microsecond later.
func nextMark(p *PartitionState) AppliedMark {
	m := p.Applied()
	return AppliedMark{Index: m.Index + 1, LoggedTimeMicros: m.LoggedTimeMicros + 1}
}

// update applies fn at the next mark and fails the test on error.
func update(t testing.TB, p *PartitionState, fn func(txn *Txn) error) {
	t.Helper()
	if err := p.Apply(nextMark(p), fn); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// pair is one key and value, as strings for readable failures.
type pair struct{ key, value string }

// collect scans [start, end) of r into pairs.
func collect(t testing.TB, r kv.Reader, start, end []byte) []pair {
	t.Helper()
	var got []pair
	err := r.Scan(start, end, func(key, value []byte) (bool, error) {
		got = append(got, pair{string(key), string(value)})
		return true, nil
	})
	if err != nil {
		t.Fatalf("Scan(%q, %q): %v", start, end, err)
	}
	return got
}

// viewAll returns every state key of p.
func viewAll(t testing.TB, p *PartitionState) []pair {
	t.Helper()
	var got []pair
	if err := p.View(func(r kv.Reader) error {
		got = collect(t, r, nil, nil)
		return nil
	}); err != nil {
		t.Fatalf("View: %v", err)
	}
	return got
}

// errDiscard makes Update discard a transaction on purpose.
var errDiscard = errors.New("discard on purpose")
