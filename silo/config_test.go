package silo

import (
	"runtime"
	"strings"
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

// TestMetricsSchedulesAreChecked: Config.MetricsSchedules takes schedule ids, at most
// MaxMetricsSchedules of them.
func TestMetricsSchedulesAreChecked(t *testing.T) {
	ok := Config{MetricsSchedules: []string{"0f8fad5b-d9cb-469f-a165-70867728950e"}, InsecureDev: true}
	if _, err := ok.withDefaults(); err != nil {
		t.Fatalf("one id: %v", err)
	}
	bad := Config{MetricsSchedules: []string{"nightly"}}
	if _, err := bad.withDefaults(); err == nil || !strings.Contains(err.Error(), "metrics_schedules[0]") {
		t.Fatalf("a name instead of an id: %v", err)
	}
	many := Config{MetricsSchedules: make([]string, MaxMetricsSchedules+1)}
	if _, err := many.withDefaults(); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("too many ids: %v", err)
	}
}
