package silo

import (
	"runtime"
	"testing"
	"time"

	"github.com/orreryhq/orrery/grains/partition"
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

// TestBusyApplyGapDefaultsAndTurnsOff: zero takes partition.DefaultBusyApplyGap; a negative
// gap stays negative (the silo passes none to its partitions); an explicit one is kept.
func TestBusyApplyGapDefaultsAndTurnsOff(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{{0, partition.DefaultBusyApplyGap}, {-1, -1}, {2 * time.Millisecond, 2 * time.Millisecond}} {
		if cfg, err := (Config{BusyApplyGap: c.in}).withDefaults(); err != nil || cfg.BusyApplyGap != c.want {
			t.Errorf("BusyApplyGap %v became %v (err %v), want %v", c.in, cfg.BusyApplyGap, err, c.want)
		}
	}
}
