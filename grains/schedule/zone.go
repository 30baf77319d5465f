package schedule

import (
	"fmt"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/schedule/cron"
	"github.com/orreryhq/orrery/grains/schedule/zonerules"
)

// ZoneRulesFor returns the zone rules a partition's leader carries with the mutations it
// proposes (PartitionCommand.zone_rules): its binary's (package zonerules) for every zone other
// than UTC that a ConfigureSchedule names for a cron spec, a PutCalendar for its calendar or a
// RefreshZoneRules names, one per
// zone, in the order first named. A zone the binary does not know is left out, and apply refuses
// its configure as an unknown time zone. Only a proposer calls it; apply reads nothing but the
// entry and the state.
func ZoneRulesFor(mutations []*orreryv1.Mutation) []*orreryv1.ZoneRules {
	var out []*orreryv1.ZoneRules
	add := func(zone string) {
		if zone == "" || zone == "UTC" || carriedRules(out, zone) != nil {
			return
		}
		if tzif, ok := zonerules.Lookup(zone); ok {
			out = append(out, &orreryv1.ZoneRules{Zone: zone, Version: zonerules.Version, Tzif: tzif})
		}
	}
	for _, m := range mutations {
		add(m.GetConfigureSchedule().GetDefinition().GetSpec().GetCron().GetTimeZone())
		add(m.GetPutCalendar().GetCalendar().GetTimeZone())
		for _, zone := range m.GetRefreshZoneRules().GetZones() {
			add(zone)
		}
	}
	return out
}

// MaxRefreshZones bounds the zones of one RefreshZoneRules.
const MaxRefreshZones = 64

// StaleZones returns, in key order and at most MaxRefreshZones, the zones whose rules the
// partition holds in an older release than this binary's (package zonerules), which the binary
// knows: what a leader proposes a RefreshZoneRules for. Only a proposer calls it.
func StaleZones(r kv.Reader) ([]string, error) {
	var stale []string
	err := kv.ScanPrefix(r, keys.ZoneRules, func(_, value []byte) (bool, error) {
		rules := &orreryv1.ZoneRules{}
		if err := record.Unmarshal(value, rules); err != nil {
			return false, err
		}
		if _, known := zonerules.Lookup(rules.GetZone()); known && rules.GetVersion() < zonerules.Version {
			stale = append(stale, rules.GetZone())
		}
		return len(stale) < MaxRefreshZones, nil
	})
	return stale, err
}

// ApplyRefreshZoneRules makes the carried rules of each zone m names the partition's where it
// holds rules of the zone in an older release (configureZone's rule: a newer release wins, and
// a zone is never taken back); it adds no zone the partition holds no rules of. Carried rules
// that do not load are a Validation error on "zones", and nothing is written. It returns the
// zones whose rules it replaced.
func ApplyRefreshZoneRules(v kv.View, m *orreryv1.RefreshZoneRules, carried []*orreryv1.ZoneRules) ([]string, error) {
	if n := len(m.GetZones()); n > MaxRefreshZones {
		return nil, orrery.Invalid("zones", "%d zones, at most %d", n, MaxRefreshZones)
	}
	var adopt []*orreryv1.ZoneRules
	for i, zone := range m.GetZones() {
		c := carriedRules(carried, zone)
		if c == nil {
			continue
		}
		held, err := loadZoneRules(v, zone)
		if err != nil {
			return nil, err
		}
		if held == nil || c.GetVersion() <= held.GetVersion() {
			continue
		}
		if _, err := cron.LoadZone(zone, c.GetTzif()); err != nil {
			return nil, orrery.Invalid(fmt.Sprintf("zones[%d]", i), "the carried rules of %s (release %s) do not load: %v", zone, c.GetVersion(), err)
		}
		adopt = append(adopt, c)
	}
	refreshed := make([]string, 0, len(adopt))
	for _, rules := range adopt {
		if err := storeZoneRules(v, rules); err != nil {
			return nil, err
		}
		refreshed = append(refreshed, rules.GetZone())
	}
	return refreshed, nil
}

// carriedRules returns the rules of zone among those an entry carries (nil when absent).
func carriedRules(carried []*orreryv1.ZoneRules, zone string) *orreryv1.ZoneRules {
	for _, r := range carried {
		if r.GetZone() == zone {
			return r
		}
	}
	return nil
}

// loadZoneRules returns the rules the partition holds for zone (nil when none).
func loadZoneRules(r kv.Reader, zone string) (*orreryv1.ZoneRules, error) {
	rules := &orreryv1.ZoneRules{}
	found, err := record.Load(r, keys.ZoneRulesKey(zone), rules)
	if err != nil || !found {
		return nil, err
	}
	return rules, nil
}

// configureZone resolves the zone of a cron configure from the entry and the state: the
// carried rules when the partition holds none of the zone or an older release of them,
// otherwise the held ones (a leader on an older binary never takes a zone back). adopt is the
// rules to store (nil when the held ones stay). Errors are Validation errors on "time_zone".
func configureZone(r kv.Reader, zone string, carried []*orreryv1.ZoneRules) (location *time.Location, adopt *orreryv1.ZoneRules, err error) {
	if zone == "" || zone == "UTC" {
		return time.UTC, nil, nil
	}
	held, err := loadZoneRules(r, zone)
	if err != nil {
		return nil, nil, err
	}
	rules := held
	if c := carriedRules(carried, zone); c != nil && (held == nil || c.GetVersion() > held.GetVersion()) {
		rules, adopt = c, c
	}
	location, err = cron.LoadZone(zone, rules.GetTzif())
	if err != nil {
		return nil, nil, err
	}
	return location, adopt, nil
}

// storeZoneRules keeps rules as the partition's rules of their zone.
func storeZoneRules(v kv.View, rules *orreryv1.ZoneRules) error {
	if rules == nil {
		return nil
	}
	_, err := record.Store(v, keys.ZoneRulesKey(rules.GetZone()), rules)
	return err
}

// recordZone returns the location a cron record evaluates in, from the rules its partition
// holds, and their release ("" for UTC). reason says why there is none: the partition holds
// no rules of the zone (a schedule configured before the rules were kept in the state).
func recordZone(r kv.Reader, rec *orreryv1.ScheduleRecord) (location *time.Location, version, reason string, err error) {
	zone := rec.GetDefinition().GetSpec().GetCron().GetTimeZone()
	if zone == "" || zone == "UTC" {
		return time.UTC, "", "", nil
	}
	rules, err := loadZoneRules(r, zone)
	if err != nil {
		return nil, "", "", err
	}
	if rules == nil {
		return nil, "", "this partition holds no rules of time zone " + zone + " (the schedule was configured by an Orrery that did not keep them); configure it again", nil
	}
	location, err = cron.LoadZone(zone, rules.GetTzif())
	if err != nil {
		return nil, "", "", orrery.AsError(err).InField("definition.spec.cron")
	}
	return location, rules.GetVersion(), "", nil
}
