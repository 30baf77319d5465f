package cron

import (
	"errors"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/grains/schedule/zonerules"
)

// parseIn parses expression in the zone named zone, with the rules compiled into the binary.
func parseIn(expression, zone string, opts Options) (*Schedule, error) {
	tzif, _ := zonerules.Lookup(zone)
	location, err := LoadZone(zone, tzif)
	if err != nil {
		return nil, err
	}
	return Parse(expression, location, opts)
}

// TestLoadZoneReadsOnlyItsRules: the location comes from the bytes given, whatever the
// process's zone database says, and a zone without rules is a Validation error on time_zone.
func TestLoadZoneReadsOnlyItsRules(t *testing.T) {
	t.Setenv("ZONEINFO", t.TempDir()) // an empty zone database: must not matter
	berlin, _ := zonerules.Lookup("Europe/Berlin")
	utc, _ := zonerules.Lookup("UTC")
	summer := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	real, err := LoadZone("Europe/Berlin", berlin)
	if err != nil {
		t.Fatal(err)
	}
	if _, offset := summer.In(real).Zone(); offset != 2*3600 {
		t.Fatalf("Europe/Berlin from its own rules: summer offset %d, want 7200", offset)
	}
	// The same name with other rules (UTC's): what a host with other tzdata would have.
	other, err := LoadZone("Europe/Berlin", utc)
	if err != nil {
		t.Fatal(err)
	}
	if _, offset := summer.In(other).Zone(); offset != 0 {
		t.Fatalf("Europe/Berlin from UTC's rules: summer offset %d, want 0", offset)
	}
	for _, c := range []struct {
		name string
		tzif []byte
	}{{"Europe/Berlin", nil}, {"Local", berlin}, {"Europe/Berlin", []byte("not TZif")}} {
		var e *orrery.Error
		if _, err := LoadZone(c.name, c.tzif); !errors.As(err, &e) || e.Code != orrery.CodeValidation || e.Field != "time_zone" {
			t.Errorf("LoadZone(%q, %d bytes) = %v, want a Validation error on time_zone", c.name, len(c.tzif), err)
		}
	}
	for _, name := range []string{"", "UTC"} {
		if location, err := LoadZone(name, nil); err != nil || location != time.UTC {
			t.Errorf("LoadZone(%q, nil) = %v, %v; want UTC", name, location, err)
		}
	}
}
