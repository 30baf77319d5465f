package cron

import (
	"errors"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
)

var (
	fingerprintFrom = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	fingerprintTo   = time.Date(2041, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
)

func mustFingerprint(t *testing.T, zone string, from, to int64) string {
	t.Helper()
	fingerprint, err := Fingerprint(zone, from, to)
	if err != nil {
		t.Fatalf("Fingerprint(%q): %v", zone, err)
	}
	return fingerprint
}

// TestFingerprintGolden pins the encoding: changing it must come with a new EvaluatorVersion.
func TestFingerprintGolden(t *testing.T) {
	t.Parallel()
	const utc = "e626ee13a766956cb16ce93033c6554abd5adf538b62f80fc0cbccac242c449c"
	if got := mustFingerprint(t, "UTC", 0, 1_000_000_000); got != utc {
		t.Errorf("UTC fingerprint %s, want %s", got, utc)
	}
}

func TestFingerprintStable(t *testing.T) {
	t.Parallel()
	for _, zone := range oracleZones {
		first := mustFingerprint(t, zone, fingerprintFrom, fingerprintTo)
		if len(first) != 64 {
			t.Errorf("%s: fingerprint %q is not 64 hex digits", zone, first)
		}
		if again := mustFingerprint(t, zone, fingerprintFrom, fingerprintTo); again != first {
			t.Errorf("%s: fingerprint changed between calls", zone)
		}
	}
}

func TestFingerprintDiffers(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, zone := range append(oracleZones, "America/Chicago", "Europe/Dublin", "Australia/Sydney") {
		fingerprint := mustFingerprint(t, zone, fingerprintFrom, fingerprintTo)
		if other, ok := seen[fingerprint]; ok {
			t.Errorf("%s and %s have the same fingerprint", zone, other)
		}
		seen[fingerprint] = zone
	}
	// Same rules, different names: the fingerprint is about rules.
	if mustFingerprint(t, "UTC", fingerprintFrom, fingerprintTo) != mustFingerprint(t, "Etc/UTC", fingerprintFrom, fingerprintTo) {
		t.Error("UTC and Etc/UTC differ")
	}
	// The horizon matters: Apia's 2011 day skip is only in the longer one.
	apia2010 := time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	if mustFingerprint(t, "Pacific/Apia", apia2010, apia2010+365*86400) == mustFingerprint(t, "Pacific/Apia", apia2010, apia2010+3*365*86400) {
		t.Error("Apia's fingerprint ignores the horizon")
	}
	// A quiet horizon in a DST zone equals a fixed zone with the same offset and flag.
	summer := time.Date(2020, 6, 1, 0, 0, 0, 0, time.UTC).Unix()
	if mustFingerprint(t, "Asia/Kolkata", summer, summer+86400) == mustFingerprint(t, "UTC", summer, summer+86400) {
		t.Error("Kolkata and UTC agree")
	}
}

// TestFingerprintDetectsRuleChange simulates a tzdata update: the same name with one
// transition moved must give another fingerprint.
func TestFingerprintDetectsRuleChange(t *testing.T) {
	t.Parallel()
	// TZif v1 data for a zone with a single transition, at 2030-03-10 07:00 UTC or a week later.
	build := func(transition int64) *time.Location {
		location, err := time.LoadLocationFromTZData("Test/Zone", tzif(transition))
		if err != nil {
			t.Fatal(err)
		}
		return location
	}
	from := time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	to := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	march10 := time.Date(2030, 3, 10, 7, 0, 0, 0, time.UTC).Unix()
	a := fingerprintLocation(build(march10), from, to)
	b := fingerprintLocation(build(march10+7*86400), from, to)
	c := fingerprintLocation(build(march10), from, to)
	if a == b {
		t.Error("moving a transition kept the fingerprint")
	}
	if a != c {
		t.Error("identical rules gave different fingerprints")
	}
}

// tzif builds minimal TZif version 1 data: standard -05:00 until transition, then DST -04:00.
func tzif(transition int64) []byte {
	be32 := func(v int64) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
	var data []byte
	data = append(data, "TZif"...)
	data = append(data, make([]byte, 16)...) // version 1, reserved
	// isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
	for _, n := range []int64{0, 0, 0, 1, 2, 8} {
		data = append(data, be32(n)...)
	}
	data = append(data, be32(transition)...)
	data = append(data, 1)                              // transition to type 1
	data = append(data, append(be32(-5*3600), 0, 0)...) // type 0: -05:00, std, abbr "EST"
	data = append(data, append(be32(-4*3600), 1, 4)...) // type 1: -04:00, dst, abbr "EDT"
	data = append(data, "EST\x00EDT\x00"...)
	return data
}

func TestFingerprintErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		zone     string
		from, to int64
		field    string
	}{
		{"Nowhere/Special", 0, 1, "time_zone"},
		{"Local", 0, 1, "time_zone"},
		{"UTC", 10, 1, "horizon"},
		{"UTC", minSupportedUnix - 1, 0, "horizon"},
		{"UTC", 0, maxSupportedUnix + 1, "horizon"},
	} {
		_, err := Fingerprint(c.zone, c.from, c.to)
		var e *orrery.Error
		if !errors.As(err, &e) || e.Code != orrery.CodeValidation || e.Field != c.field {
			t.Errorf("%q %d-%d: got %v, want validation on %s", c.zone, c.from, c.to, err, c.field)
		}
	}
	if _, err := Fingerprint("America/New_York", minSupportedUnix, maxSupportedUnix); err != nil {
		t.Errorf("whole range: %v", err)
	}
}
