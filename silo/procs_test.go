package silo

import (
	"runtime"
	"testing"
	"time"

	"github.com/orreryhq/orrery/grains/partition"
)

// TestMaxProcsDefaultsToSeveralPerCPUUnlessTheOperatorChose: the default raises GOMAXPROCS to
// DefaultProcsPerCPU per processor Go chose, the GOMAXPROCS environment variable leaves it
// alone, and an explicit value is kept.
func TestMaxProcsDefaultsToSeveralPerCPUUnlessTheOperatorChose(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	cfg, err := Config{}.withDefaults()
	if err != nil || cfg.MaxProcs != DefaultProcsPerCPU*processProcs {
		t.Errorf("default MaxProcs %d (err %v), want %d", cfg.MaxProcs, err, DefaultProcsPerCPU*processProcs)
	}
	if cfg, _ := (Config{MaxProcs: 5}).withDefaults(); cfg.MaxProcs != 5 {
		t.Errorf("explicit MaxProcs became %d", cfg.MaxProcs)
	}
	t.Setenv("GOMAXPROCS", "3")
	if cfg, _ := (Config{}).withDefaults(); cfg.MaxProcs >= 0 {
		t.Errorf("MaxProcs %d with GOMAXPROCS set in the environment, want it left alone", cfg.MaxProcs)
	}
}

// TestStartSetsMaxProcs: a started silo runs with its MaxProcs.
func TestStartSetsMaxProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	startSilo(t, t.TempDir(), func(c *Config) { c.MaxProcs = before + 3 })
	if got := runtime.GOMAXPROCS(0); got != before+3 {
		t.Fatalf("GOMAXPROCS %d after Start, want %d", got, before+3)
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
