package persistence

import (
	"errors"
	"slices"
	"testing"

	"github.com/orreryhq/orrery"
)

// TestRetiredSilosOnlyGrowAndSurviveAReopen: RecordRetired merges into what is recorded, keeps
// it ascending without repeats, refuses zero without writing, and a reopened store reads it.
func TestRetiredSilosOnlyGrowAndSurviveAReopen(t *testing.T) {
	t.Parallel()
	dir := SiloStoreDir(t.TempDir())
	s := openSiloStore(t, dir, 2)
	if got := s.RetiredSilos(); got != nil {
		t.Fatalf("a new store records retired silos %v", got)
	}
	if err := s.RecordRetired([]uint64{9, 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordRetired([]uint64{3, 5, 9}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordRetired([]uint64{7, 0}); !errors.Is(err, orrery.ErrValidation) {
		t.Errorf("recording silo id 0: %v, want a Validation error", err)
	}
	want := []uint64{3, 5, 9}
	if got := s.RetiredSilos(); !slices.Equal(got, want) {
		t.Fatalf("retired %v, want %v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSiloStore(t, dir, 2)
	if got := s.RetiredSilos(); !slices.Equal(got, want) {
		t.Errorf("retired after reopening %v, want %v", got, want)
	}
}
