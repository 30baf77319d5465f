package schedule

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/schedule/zonerules"
)

// TestRefreshZoneRulesMovesHeldZonesOntoNewerRules: a partition whose Berlin rules are an
// older release (one in which Berlin is UTC) is refreshed without a configure: StaleZones names
// Berlin, the RefreshZoneRules that carries this binary's rules replaces them, and the zone's
// schedule follows them from its next instant on (its cursor, computed under the old rules,
// stays). Older or equal carried releases, zones the partition holds no rules of, rules that do
// not load and too many zones change nothing.
func TestRefreshZoneRulesMovesHeldZonesOntoNewerRules(t *testing.T) {
	real, _ := zonerules.Lookup("Europe/Berlin")
	asUTC, _ := zonerules.Lookup("UTC")
	summer := utc(t, "2026-07-01T00:00:00Z")
	tenPMBerlin, tenPMUTC := utc(t, "2026-07-01T20:00:00Z"), utc(t, "2026-07-01T22:00:00Z")
	v := kv.NewMemory()
	def := definition(cronSpec("0 22 * * *", "Europe/Berlin"))
	old := []*orreryv1.ZoneRules{{Zone: "Europe/Berlin", Version: "2000a", Tzif: asUTC}}
	res, err := ApplyConfigure(v, input.DefaultLimits(), "alice", &orreryv1.ConfigureSchedule{Definition: def}, old, summer, Newest)
	if err != nil || res.GetNextDueAtUnixMicros() != tenPMUTC {
		t.Fatalf("configure under the old rules: %v, %v", res, err)
	}
	if stale, err := StaleZones(v); err != nil || !slices.Equal(stale, []string{"Europe/Berlin"}) {
		t.Fatalf("stale zones %v (%v), want Europe/Berlin", stale, err)
	}
	refresh := func(zones []string, carried ...*orreryv1.ZoneRules) ([]string, error) {
		return ApplyRefreshZoneRules(v, &orreryv1.RefreshZoneRules{Zones: zones}, carried)
	}
	unchanged := func(what string, refreshed []string, err error) {
		t.Helper()
		if err != nil || len(refreshed) != 0 || heldRules(t, v, "Europe/Berlin").GetVersion() != "2000a" {
			t.Fatalf("%s: refreshed %v (%v), held %s; want nothing changed", what, refreshed, err, heldRules(t, v, "Europe/Berlin").GetVersion())
		}
	}
	refreshed, err := refresh([]string{"Europe/Berlin"}, &orreryv1.ZoneRules{Zone: "Europe/Berlin", Version: "1999z", Tzif: real})
	unchanged("an older carried release", refreshed, err)
	refreshed, err = refresh([]string{"Europe/Berlin"}, &orreryv1.ZoneRules{Zone: "Europe/Berlin", Version: "2000a", Tzif: real})
	unchanged("an equal carried release", refreshed, err)
	refreshed, err = refresh([]string{"Europe/Berlin"})
	unchanged("no carried rules", refreshed, err)
	before := v.Clone()
	_, err = refresh([]string{"America/New_York", "Europe/Berlin"}, ZoneRulesFor([]*orreryv1.Mutation{{Kind: &orreryv1.Mutation_RefreshZoneRules{
		RefreshZoneRules: &orreryv1.RefreshZoneRules{Zones: []string{"America/New_York"}}}}})[0],
		&orreryv1.ZoneRules{Zone: "Europe/Berlin", Version: "2030a", Tzif: []byte("not TZif")})
	wantCode(t, err, orrery.ErrValidation, "zones[1]")
	if !v.Equal(before) {
		t.Fatal("a refresh with rules that do not load wrote")
	}
	many := make([]string, MaxRefreshZones+1)
	for i := range many {
		many[i] = fmt.Sprintf("Etc/GMT+%d", i%12)
	}
	if _, err := refresh(many); !errors.Is(err, orrery.ErrValidation) {
		t.Fatalf("%d zones: %v, want a Validation error", len(many), err)
	}

	carried := ZoneRulesFor([]*orreryv1.Mutation{{Kind: &orreryv1.Mutation_RefreshZoneRules{
		RefreshZoneRules: &orreryv1.RefreshZoneRules{Zones: []string{"Europe/Berlin", "America/New_York"}}}}})
	if len(carried) != 2 || carried[0].GetVersion() != zonerules.Version {
		t.Fatalf("a leader carries %v, want this binary's rules of both zones", carried)
	}
	refreshed, err = refresh([]string{"Europe/Berlin", "America/New_York"}, carried...)
	if err != nil || !slices.Equal(refreshed, []string{"Europe/Berlin"}) || heldRules(t, v, "Europe/Berlin").GetVersion() != zonerules.Version {
		t.Fatalf("refresh: %v (%v), held %s; want Berlin at %s", refreshed, err, heldRules(t, v, "Europe/Berlin").GetVersion(), zonerules.Version)
	}
	if rules, err := loadZoneRules(v, "America/New_York"); err != nil || rules != nil {
		t.Fatalf("a zone the partition held no rules of was added: %v, %v", rules, err)
	}
	insp, err := Inspect(v, lane, scheduleID, summer)
	if err != nil || insp.GetZoneRulesVersion() != zonerules.Version {
		t.Fatalf("inspection after the refresh: %v, %v", insp, err)
	}
	if next := insp.GetNextFireTimesUnixMicros(); next[0] != tenPMUTC || next[1] != tenPMBerlin+input.Day {
		t.Fatalf("next instants %s, %s; want the cursor %s kept, then %s under the new rules", instant(next[0]), instant(next[1]),
			instant(tenPMUTC), instant(tenPMBerlin+input.Day))
	}
	if stale, err := StaleZones(v); err != nil || len(stale) != 0 {
		t.Fatalf("stale zones after the refresh: %v (%v)", stale, err)
	}
}
