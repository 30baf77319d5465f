package cron

import (
	"testing"
	"time"
)

// TestPolicies checks each DST policy on known transitions: the occurrences after a start.
func TestPolicies(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, expression, zone string
		opts                   Options
		after                  string // an instant, 2006-01-02 15:04[:05] -07:00
		want                   []string
	}{
		// New York: 2016-03-13 02:00 -05:00 jumps to 03:00 -04:00.
		{"gap shift", "30 2 * * *", "America/New_York", Options{}, "2016-03-12 03:00 -05:00",
			[]string{"2016-03-13 03:00 -04:00", "2016-03-14 02:30 -04:00"}},
		{"gap skip", "30 2 * * *", "America/New_York", Options{Gap: GapSkip}, "2016-03-12 03:00 -05:00",
			[]string{"2016-03-14 02:30 -04:00"}},
		{"gap shift collapses", "*/20 2-3 * * *", "America/New_York", Options{}, "2016-03-13 01:00 -05:00",
			[]string{"2016-03-13 03:00 -04:00", "2016-03-13 03:20 -04:00", "2016-03-13 03:40 -04:00", "2016-03-14 02:00 -04:00"}},
		{"gap skip interval", "*/20 2-3 * * *", "America/New_York", Options{Gap: GapSkip}, "2016-03-13 01:00 -05:00",
			[]string{"2016-03-13 03:00 -04:00", "2016-03-13 03:20 -04:00", "2016-03-13 03:40 -04:00", "2016-03-14 02:00 -04:00"}},

		// New York: 2016-11-06 02:00 -04:00 falls back to 01:00 -05:00.
		{"repeat auto fixed", "30 1 * * *", "America/New_York", Options{}, "2016-11-06 00:00 -04:00",
			[]string{"2016-11-06 01:30 -04:00", "2016-11-07 01:30 -05:00"}},
		{"repeat first", "30 1 * * *", "America/New_York", Options{Repeat: RepeatFirst}, "2016-11-06 00:00 -04:00",
			[]string{"2016-11-06 01:30 -04:00", "2016-11-07 01:30 -05:00"}},
		{"repeat last", "30 1 * * *", "America/New_York", Options{Repeat: RepeatLast}, "2016-11-06 00:00 -04:00",
			[]string{"2016-11-06 01:30 -05:00", "2016-11-07 01:30 -05:00"}},
		{"repeat both", "30 1 * * *", "America/New_York", Options{Repeat: RepeatBoth}, "2016-11-06 00:00 -04:00",
			[]string{"2016-11-06 01:30 -04:00", "2016-11-06 01:30 -05:00", "2016-11-07 01:30 -05:00"}},
		{"repeat auto interval", "*/30 1 * * *", "America/New_York", Options{}, "2016-11-06 00:00 -04:00",
			[]string{"2016-11-06 01:00 -04:00", "2016-11-06 01:30 -04:00", "2016-11-06 01:00 -05:00", "2016-11-06 01:30 -05:00", "2016-11-07 01:00 -05:00"}},
		{"repeat first interval", "*/30 1 * * *", "America/New_York", Options{Repeat: RepeatFirst}, "2016-11-06 00:00 -04:00",
			[]string{"2016-11-06 01:00 -04:00", "2016-11-06 01:30 -04:00", "2016-11-07 01:00 -05:00"}},
		{"repeat last interval", "*/30 1 * * *", "America/New_York", Options{Repeat: RepeatLast}, "2016-11-06 00:00 -04:00",
			[]string{"2016-11-06 01:00 -05:00", "2016-11-06 01:30 -05:00", "2016-11-07 01:00 -05:00"}},
		{"repeat last from first pass", "30 1 * * *", "America/New_York", Options{Repeat: RepeatLast}, "2016-11-06 01:45 -04:00",
			[]string{"2016-11-06 01:30 -05:00"}},
		{"repeat auto from second pass", "*/30 1 * * *", "America/New_York", Options{}, "2016-11-06 01:10 -05:00",
			[]string{"2016-11-06 01:30 -05:00", "2016-11-07 01:00 -05:00"}},

		// Pacific/Apia skipped 2011-12-30: 23:59:59 -10:00 on the 29th is followed by 00:00 +14:00 on the 31st.
		{"day skipped shift", "0 12 * * *", "Pacific/Apia", Options{}, "2011-12-29 00:00 -10:00",
			[]string{"2011-12-29 12:00 -10:00", "2011-12-31 00:00 +14:00", "2011-12-31 12:00 +14:00"}},
		{"day skipped skip", "0 12 * * *", "Pacific/Apia", Options{Gap: GapSkip}, "2011-12-29 00:00 -10:00",
			[]string{"2011-12-29 12:00 -10:00", "2011-12-31 12:00 +14:00"}},
		{"day skipped midnight", "0 0 * * *", "Pacific/Apia", Options{}, "2011-12-28 12:00 -10:00",
			[]string{"2011-12-29 00:00 -10:00", "2011-12-31 00:00 +14:00", "2012-01-01 00:00 +14:00"}},
		{"day skipped date", "0 9 30 12 *", "Pacific/Apia", Options{}, "2011-06-01 00:00 -11:00",
			[]string{"2011-12-31 00:00 +14:00", "2012-12-30 09:00 +14:00"}},

		// Lord Howe: 2017-10-01 02:00 +10:30 jumps to 02:30 +11:00.
		{"half hour gap", "0 15 2 * * *", "Australia/Lord_Howe", Options{}, "2017-09-30 12:00 +10:30",
			[]string{"2017-09-30 02:15 +11:00", "2017-10-01 02:30 +11:00", "2017-10-02 02:15 +11:00"}[1:]},
		{"half hour gap skip", "0 15 2 * * *", "Australia/Lord_Howe", Options{Gap: GapSkip}, "2017-09-30 12:00 +10:30",
			[]string{"2017-10-02 02:15 +11:00"}},

		// No DST at all.
		{"kolkata", "0 9 * * *", "Asia/Kolkata", Options{}, "2020-03-08 00:00 +05:30",
			[]string{"2020-03-08 09:00 +05:30", "2020-03-09 09:00 +05:30"}},
	} {
		schedule := mustParse(t, c.expression, c.zone, c.opts)
		at := parseInstant(t, c.after)
		for _, wantText := range c.want {
			want := parseInstant(t, wantText)
			next, ok := schedule.Next(at)
			_, gotOffset := next.Zone()
			_, wantOffset := want.Zone()
			if !ok || !next.Equal(want) || gotOffset != wantOffset {
				t.Errorf("%s: %q after %s: got %s (%v), want %s", c.name, c.expression, at.Format(time.RFC3339),
					next.Format(time.RFC3339), ok, want.Format(time.RFC3339))
				break
			}
			if next.Location().String() != c.zone {
				t.Errorf("%s: result in %s, want %s", c.name, next.Location(), c.zone)
			}
			at = next
		}
	}
}

// TestNextSubSecond checks that Next is strictly after an instant with a fraction of a second.
func TestNextSubSecond(t *testing.T) {
	t.Parallel()
	schedule := mustParse(t, "* * * * * *", "Europe/London", Options{})
	at := time.Date(2020, 3, 29, 0, 59, 59, 500_000_000, time.UTC) // clocks jump at 01:00 UTC
	next, _ := schedule.Next(at)
	if want := time.Date(2020, 3, 29, 1, 0, 0, 0, time.UTC); !next.Equal(want) {
		t.Errorf("got %s, want %s", next, want)
	}
	before := time.Date(2020, 3, 29, 1, 0, 0, 0, time.UTC).Add(-time.Nanosecond)
	if next, _ := schedule.Next(before); !next.Equal(before.Add(time.Nanosecond)) {
		t.Errorf("got %s, want the next whole second", next)
	}
}

// TestNextFarAhead checks the limits: rare expressions, year 9999, years before 1.
func TestNextFarAhead(t *testing.T) {
	t.Parallel()
	schedule := mustParse(t, "0 0 29 2 MON", "America/New_York", Options{})
	next, ok := schedule.Next(time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC))
	if want := "2044-02-29T00:00:00-05:00"; !ok || next.Format(time.RFC3339) != want {
		t.Errorf("leap Monday: got %s, want %s", next.Format(time.RFC3339), want)
	}
	if _, ok := mustParse(t, "0 0 1 1 *", "", Options{}).Next(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)); ok {
		t.Error("an occurrence in year 10000")
	}
	if next, ok := mustParse(t, "0 0 1 1 *", "Pacific/Kiritimati", Options{}).Next(time.Date(9998, 12, 31, 0, 0, 0, 0, time.UTC)); !ok || next.Year() != 9999 {
		t.Errorf("last new year: got %s (%v)", next, ok)
	}
	// The last hours of year 9999 west of UTC are instants of year 10000 (found by fuzzing).
	santiago := mustParse(t, "0 * * * *", "America/Santiago", Options{})
	last := parseInstant(t, "9999-12-31 21:00 -03:00")
	if next, ok := santiago.Next(last.Add(-time.Nanosecond)); !ok || !next.Equal(last) {
		t.Errorf("last hours of 9999: got %s (%v), want %s", next, ok, last)
	}
	if next, ok := santiago.Next(parseInstant(t, "9999-12-31 23:00 -03:00")); ok {
		t.Errorf("after the last hour of 9999: got %s", next)
	}
	if next, ok := mustParse(t, "0 0 1 1 *", "", Options{}).Next(time.Date(-5, 6, 1, 0, 0, 0, 0, time.UTC)); !ok || next.Year() != 1 {
		t.Errorf("from before year 1: got %s (%v), want year 1", next, ok)
	}
}
