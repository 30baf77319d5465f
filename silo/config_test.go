package silo

import (
	"runtime"
	"testing"
)

// TestStartLeavesGOMAXPROCS: a silo is a library; starting one does not change the host
// program's GOMAXPROCS (only cmd/silo sets it).
func TestStartLeavesGOMAXPROCS(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	startSilo(t, t.TempDir(), nil)
	if got := runtime.GOMAXPROCS(0); got != before {
		runtime.GOMAXPROCS(before)
		t.Fatalf("GOMAXPROCS %d after Start, was %d", got, before)
	}
}
