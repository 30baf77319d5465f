package engine

import (
	"slices"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/schedule"
	"github.com/orreryhq/orrery/grains/schedule/zonerules"
)

// holdRules stores rules of zone in release version (with this binary's bytes) as the
// partition's.
func (h *harness) holdRules(zone, version string) {
	h.t.Helper()
	tzif, ok := zonerules.Lookup(zone)
	if !ok {
		h.t.Fatalf("no zone %s", zone)
	}
	if _, err := record.Store(h.state.mem, keys.ZoneRulesKey(zone), &orreryv1.ZoneRules{Zone: zone, Version: version, Tzif: tzif}); err != nil {
		h.t.Fatal(err)
	}
}

// heldRelease is the release of the partition's rules of zone ("" when it holds none).
func (h *harness) heldRelease(zone string) string {
	h.t.Helper()
	rules := &orreryv1.ZoneRules{}
	if _, err := record.Load(h.state.mem, keys.ZoneRulesKey(zone), rules); err != nil {
		h.t.Fatal(err)
	}
	return rules.GetVersion()
}

// reopen opens a new engine on the harness's state, as a new leader would.
func (h *harness) reopen() {
	h.e = New(Config{Partition: 0, Partitions: 1, Applier: h.applier, MaxPending: 100, MaxWaiters: 10,
		MaxWait: 30 * time.Second, HousekeepEvery: 10 * time.Second, Logger: quiet}, h.state)
	h.log = nil
	h.step(Open{})
}

// TestTheLeaderRefreshesOlderZoneRules: a leader whose binary has newer tzdata than rules its
// partition holds proposes them on Open (RefreshZoneRules as ZoneRulesPrincipal, carrying its
// rules of exactly those zones), at most schedule.MaxRefreshZones zones a command and the rest
// in the next; once applied the partition holds this binary's release of every zone, zones it
// held current are untouched, none is added, and a leader opened then proposes nothing.
func TestTheLeaderRefreshesOlderZoneRules(t *testing.T) {
	h := newHarness(t, nil)
	if len(h.log) != 0 {
		t.Fatalf("a partition without zone rules: proposed %v", h.log)
	}
	var stale []string
	for _, zone := range zonerules.Zones() {
		if len(stale) == schedule.MaxRefreshZones+6 {
			break
		}
		if _, ok := zonerules.Lookup(zone); ok && zone != "UTC" && zone != "Europe/Berlin" {
			stale = append(stale, zone)
			h.holdRules(zone, "2000a")
		}
	}
	h.holdRules("Europe/Berlin", zonerules.Version)
	h.reopen()
	if len(h.log) != 1 || h.log[0].principal != ZoneRulesPrincipal {
		t.Fatalf("log %v, want one command of %s", h.log, ZoneRulesPrincipal)
	}
	first := h.log[0].cmd
	zones := first.GetBatch().GetMutations()[0].GetRefreshZoneRules().GetZones()
	if len(zones) != schedule.MaxRefreshZones || slices.ContainsFunc(zones, func(z string) bool { return !slices.Contains(stale, z) }) {
		t.Fatalf("first refresh names %d zones %v, want %d of the stale ones", len(zones), zones, schedule.MaxRefreshZones)
	}
	if len(first.GetZoneRules()) != len(zones) || first.GetZoneRules()[0].GetVersion() != zonerules.Version || first.GetZoneRules()[0].GetZone() != zones[0] {
		t.Fatalf("the entry carries %d rules (first %s %s), want this binary's of the %d zones", len(first.GetZoneRules()),
			first.GetZoneRules()[0].GetZone(), first.GetZoneRules()[0].GetVersion(), len(zones))
	}
	h.commit()
	if len(h.log) != 1 {
		t.Fatalf("after the first refresh: log %v, want one refresh of the remaining 6 zones", h.log)
	}
	rest := h.log[0].cmd.GetBatch().GetMutations()[0].GetRefreshZoneRules().GetZones()
	if all := slices.Sorted(slices.Values(append(slices.Clone(zones), rest...))); !slices.Equal(all, slices.Sorted(slices.Values(stale))) {
		t.Fatalf("the two refreshes name %d and %d zones, want the %d stale ones between them", len(zones), len(rest), len(stale))
	}
	h.commit()
	if h.answeredApplied != 0 {
		t.Fatal("a RefreshZoneRules reply counted as a caller's")
	}
	for _, zone := range append(stale, "Europe/Berlin") {
		if got := h.heldRelease(zone); got != zonerules.Version {
			t.Fatalf("%s: held release %q, want %s", zone, got, zonerules.Version)
		}
	}
	held := 0
	if err := kv.ScanPrefix(h.state.mem, keys.ZoneRules, func(_, _ []byte) (bool, error) { held++; return true, nil }); err != nil || held != len(stale)+1 {
		t.Fatalf("the partition holds rules of %d zones (%v), want the %d it held", held, err, len(stale)+1)
	}
	h.reopen()
	if len(h.log) != 0 {
		t.Fatalf("a leader opened on current rules proposed %v", h.log)
	}
}
