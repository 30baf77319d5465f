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

// openStore opens a store in dir and closes it when the test ends.
func openStore(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// update runs Update and fails the test on error.
func update(t testing.TB, s *Store, fn func(txn *Txn) error) {
	t.Helper()
	if err := s.Update(fn); err != nil {
		t.Fatalf("Update: %v", err)
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

// viewAll returns every state key of s.
func viewAll(t testing.TB, s *Store) []pair {
	t.Helper()
	var got []pair
	if err := s.View(func(r kv.Reader) error {
		got = collect(t, r, nil, nil)
		return nil
	}); err != nil {
		t.Fatalf("View: %v", err)
	}
	return got
}

// errDiscard makes Update discard a transaction on purpose.
var errDiscard = errors.New("discard on purpose")
