package cron

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
)

var fuzzZones = []string{
	"UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "America/Santiago",
	"Asia/Kolkata", "Pacific/Apia",
}

// FuzzParse: Parse never panics, rejects with a positioned Validation error, and an accepted
// expression yields strictly increasing occurrences that Next finds again from just before.
// The seed corpus is testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add("*/15 9-17 * * MON-FRI", uint8(1), int64(1458000000), uint8(0))
	f.Add("0 30 1 * * *", uint8(1), int64(1478400000), uint8(6))
	f.Add("H H(1-5)/2 L-3W * 5#2", uint8(6), int64(1325152800), uint8(3))
	f.Fuzz(func(t *testing.T, expression string, zoneIndex uint8, afterUnix int64, policy uint8) {
		opts := Options{HashKey: "fuzz", Gap: GapPolicy(policy & 1), Repeat: RepeatPolicy(policy >> 1 & 3)}
		zone := fuzzZones[int(zoneIndex)%len(fuzzZones)]
		schedule, err := parseIn(expression, zone, opts)
		if err != nil {
			var e *orrery.Error
			if !errors.As(err, &e) || e.Code != orrery.CodeValidation || e.Field != "expression" {
				t.Fatalf("parseIn(%q): %v is not a validation error on expression", expression, err)
			}
			if !strings.Contains(e.Message, "position ") && !strings.Contains(e.Message, "UTF-8") {
				t.Fatalf("parseIn(%q): %q names no position", expression, e.Message)
			}
			return
		}
		span := maxSupportedUnix - minSupportedUnix
		at := time.Unix(minSupportedUnix+((afterUnix%span)+span)%span, 0)
		for i := 0; i < 16; i++ {
			next, ok := schedule.Next(at)
			if !ok {
				return
			}
			if !next.After(at) {
				t.Fatalf("%q in %s: Next(%s) = %s is not after it", expression, zone, at, next)
			}
			if again, ok := schedule.Next(next.Add(-time.Nanosecond)); !ok || !again.Equal(next) {
				t.Fatalf("%q in %s: Next(%s - 1ns) = %s, want %s", expression, zone, next, again, next)
			}
			at = next
		}
	})
}
