package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestReportResultLineAndVerdict: the CHAOS RESULT line prints every count in its fixed order
// (linearizable true, false, or unknown when undecided), and a report fails on a violation, an
// inconsistency, a silo exit the nemesis did not cause or a problem, and only then.
func TestReportResultLineAndVerdict(t *testing.T) {
	linearizable := false
	r := &Report{Seed: 42, Silos: 5, Counts: Counts{Kills: 1, Pauses: 2, Partitions: 3, Wipes: 4, Skews: 19, Failpoints: 20, ZoneRules: 21, Splits: 22, Combined: 23, FullDisks: 24, Ops: 5, Occurrences: 6,
		Duplicates: 7, Gaps: 8, Lost: 9, Early: 10, DoubleTimeouts: 15, ReceiptMismatches: 16, Inconsistencies: 11, TwoLeaders: 17, LoggedTimeBackward: 18, Linearizable: &linearizable,
		MaxLatenessMS: 12, UnavailableS: 13.25, ProcessExits: 14}}
	want := "CHAOS RESULT seed=42 silos=5 kills=1 pauses=2 partitions=3 wipes=4 skews=19 failpoints=20 zone_rules=21 splits=22 combined=23 full_disks=24 ops=5 occurrences=6 " +
		"duplicates=7 gaps=8 lost=9 early=10 double_timeouts=15 receipt_mismatches=16 inconsistencies=11 two_leaders=17 logged_time_backward=18 " +
		"linearizable=false max_lateness_ms=12 unavailable_s=13.2 process_exits=14"
	if got := r.ResultLine(); got != want {
		t.Errorf("result line\n got %s\nwant %s", got, want)
	}
	r.Counts.Linearizable = nil
	if got := r.ResultLine(); !strings.Contains(got, " linearizable=unknown ") {
		t.Errorf("undecided: result line %s, want linearizable=unknown", got)
	}
	for d, want := range map[time.Duration]string{10 * time.Minute: "10m", 90 * time.Second: "1m30s", 45 * time.Second: "45s", 2 * time.Hour: "2h"} {
		if got, want := ReproduceCommand(42, d, 5), "make chaos SEED=42 DURATION="+want+" SILOS=5"; got != want {
			t.Errorf("reproduce %q, want %q", got, want)
		}
	}
	for _, tc := range []struct {
		name   string
		report Report
		failed bool
	}{
		{"clean", Report{}, false},
		{"a violation", Report{Violations: []string{"gap"}}, true},
		{"an inconsistency", Report{Counts: Counts{Inconsistencies: 1}}, true},
		{"a silo exit", Report{Counts: Counts{ProcessExits: 1}}, true},
		{"a problem", Report{Problems: []string{"not whole"}}, true},
	} {
		if got := tc.report.Failed(); got != tc.failed {
			t.Errorf("%s: Failed() = %v, want %v", tc.name, got, tc.failed)
		}
	}
}

// TestDrainBoundWaitsForTheClockAhead: the drain after healing is given its 90 s past the
// instant a partition's logged time may still be ahead of the real time.
func TestDrainBoundWaitsForTheClockAhead(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	if got := drainBound(clockAhead{}, now); got != drainTimeout {
		t.Errorf("no clock ahead: %v, want %v", got, drainTimeout)
	}
	if got := drainBound(clockAhead{by: 7 * time.Minute, until: now.Add(-time.Minute)}, now); got != drainTimeout {
		t.Errorf("a clock ahead caught up with: %v, want %v", got, drainTimeout)
	}
	if got := drainBound(clockAhead{by: 7 * time.Minute, until: now.Add(4 * time.Minute)}, now); got != drainTimeout+4*time.Minute {
		t.Errorf("logged time ahead for 4 more minutes: %v, want %v", got, drainTimeout+4*time.Minute)
	}
}

// TestNemesisCountsEachPartOfACombinedFault: a combined fault counts once as combined and once
// under the kind of each of its parts.
func TestNemesisCountsEachPartOfACombinedFault(t *testing.T) {
	n := &nemesis{faults: []Fault{{Kind: FaultKill}, {Kind: FaultCombined, Parts: []FaultKind{FaultKill, FaultPause}}, {Kind: FaultCombined, Parts: []FaultKind{FaultIsolate, FaultSkew}}}}
	got := n.counts()
	want := map[FaultKind]int{FaultKill: 2, FaultPause: 1, FaultIsolate: 1, FaultSkew: 1, FaultCombined: 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts %v, want %v", got, want)
	}
}
