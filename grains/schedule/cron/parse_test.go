package cron

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
)

// TestParseValid checks what accepted expressions mean: the first occurrences in UTC after
// 2017-01-01 00:00 (a Sunday).
func TestParseValid(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		expression string
		want       []string // 2006-01-02 15:04:05
	}{
		{"* * * * *", []string{"2017-01-01 00:01:00", "2017-01-01 00:02:00"}},
		{"* * * * * *", []string{"2017-01-01 00:00:01", "2017-01-01 00:00:02"}},
		{" \t30\t2 * * *  ", []string{"2017-01-01 02:30:00", "2017-01-02 02:30:00"}},
		{"0 22-2/2 * * *", []string{"2017-01-01 00:00:00", "2017-01-01 02:00:00", "2017-01-01 22:00:00"}[1:]},
		{"10,20-22 5 * * *", []string{"2017-01-01 05:10:00", "2017-01-01 05:20:00", "2017-01-01 05:21:00"}},
		{"15/20 0 * * *", []string{"2017-01-01 00:15:00", "2017-01-01 00:35:00", "2017-01-01 00:55:00"}},
		{"0 0 1 feb,Jul-aug *", []string{"2017-02-01 00:00:00", "2017-07-01 00:00:00", "2017-08-01 00:00:00"}},
		{"0 0 * * MON-wed", []string{"2017-01-02 00:00:00", "2017-01-03 00:00:00", "2017-01-04 00:00:00"}},
		{"0 0 * * 7", []string{"2017-01-08 00:00:00", "2017-01-15 00:00:00"}},
		{"0 0 * * fri-sun", []string{"2017-01-06 00:00:00", "2017-01-07 00:00:00", "2017-01-08 00:00:00"}},
		{"0 0 * * 5-7", []string{"2017-01-06 00:00:00", "2017-01-07 00:00:00", "2017-01-08 00:00:00"}},
		{"0 0 * * 7-1", []string{"2017-01-02 00:00:00", "2017-01-08 00:00:00", "2017-01-09 00:00:00"}},
		{"0 0 L * ?", []string{"2017-01-31 00:00:00", "2017-02-28 00:00:00"}},
		{"0 0 L-2 * *", []string{"2017-01-29 00:00:00", "2017-02-26 00:00:00"}},
		{"0 0 LW * *", []string{"2017-01-31 00:00:00", "2017-02-28 00:00:00", "2017-03-31 00:00:00", "2017-04-28 00:00:00"}},
		{"0 0 1W * *", []string{"2017-01-02 00:00:00", "2017-02-01 00:00:00", "2017-03-01 00:00:00", "2017-04-03 00:00:00"}},
		{"0 0 31W * *", []string{"2017-01-31 00:00:00", "2017-03-31 00:00:00", "2017-05-31 00:00:00", "2017-07-31 00:00:00"}},
		{"0 0 * * 5L", []string{"2017-01-27 00:00:00", "2017-02-24 00:00:00"}},
		{"0 0 * * SAT#2", []string{"2017-01-14 00:00:00", "2017-02-11 00:00:00"}},
		{"0 0 13 * FRI", []string{"2017-01-13 00:00:00", "2017-10-13 00:00:00", "2018-04-13 00:00:00"}},
		{"0 0 29 2 *", []string{"2020-02-29 00:00:00", "2024-02-29 00:00:00"}},
		{"@hourly", []string{"2017-01-01 01:00:00", "2017-01-01 02:00:00"}},
		{"@DAILY", []string{"2017-01-02 00:00:00"}},
		{"@weekly", []string{"2017-01-08 00:00:00"}},
		{"@monthly", []string{"2017-02-01 00:00:00"}},
		{"@yearly", []string{"2018-01-01 00:00:00"}},
		{"@annually", []string{"2018-01-01 00:00:00"}},
		{"@midnight", []string{"2017-01-02 00:00:00"}},
		{"@every_minute", []string{"2017-01-01 00:01:00"}},
		{"@every-minute", []string{"2017-01-01 00:01:00"}},
		{"@every_second", []string{"2017-01-01 00:00:01"}},
	} {
		schedule := mustParse(t, c.expression, "", Options{})
		at := time.Date(2017, 1, 1, 0, 0, 0, 0, time.UTC)
		for _, want := range c.want {
			next, ok := schedule.Next(at)
			wantTime, _ := time.Parse(time.DateTime, want)
			if !ok || !next.Equal(wantTime) {
				t.Errorf("%q after %s: got %s (%v), want %s", c.expression, at, next, ok, want)
				break
			}
			at = next
		}
	}
}

// TestParseInvalid checks the error: Validation on field "expression", naming the field
// number and the character position.
func TestParseInvalid(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		expression string
		hashKey    string
		want       string // the message starts with this
	}{
		{"", "", "field 1 (minute), position 1: empty expression"},
		{"   ", "", "field 1 (minute), position 4: empty expression"},
		{"0 0 * *", "", "field 5 (day-of-week), position 8: missing; expected 5 or 6 fields, got 4"},
		{"0 0 * * * * *", "", "field 7, position 13: too many fields"},
		{"60 * * * *", "", "field 1 (minute), position 1: value 60 out of range 0-59"},
		{"* 24 * * *", "", "field 2 (hour), position 3: value 24 out of range 0-23"},
		{"0 0 0 * * 8", "", "field 6 (day-of-week), position 11: value 8 out of range 0-7"},
		{"60 0 0 * * *", "", "field 1 (second), position 1: value 60 out of range 0-59"},
		{"*/0 * * * *", "", "field 1 (minute), position 3: step 0 out of range 1-59"},
		{"*/24 */24 * * *", "", "field 2 (hour), position 8: step 24 out of range 1-23"},
		{"5- * * * *", "", "field 1 (minute), position 3: missing value"},
		{"1,,2 * * * *", "", "field 1 (minute), position 3: unexpected character ','"},
		{"1-5/ * * * *", "", "field 1 (minute), position 5: missing number"},
		{"*#1 * * * *", "", "field 1 (minute), position 2: unexpected character '#'"},
		{"L * * * *", "", "field 1 (minute), position 1: unexpected character 'L'"},
		{"0 0 0 * JUN-JANUARY *", "", "field 5 (month), position 16: unexpected character 'U'"},
		{"0 0 32 * *", "", "field 3 (day-of-month), position 5: value 32 out of range 1-31"},
		{"0 0 1-2W * *", "", "field 3 (day-of-month), position 8: W needs a single day value"},
		{"0 0 1,2W * *", "", "field 3 (day-of-month), position 8: W needs a single day value"},
		{"0 0 W * *", "", "field 3 (day-of-month), position 5: unexpected character 'W'"},
		{"0 0 L-31 * *", "", "field 3 (day-of-month), position 7: offset 31 out of range 0-30"},
		{"0 0 1LW * *", "", "field 3 (day-of-month), position 6: unexpected character 'L'"},
		{"0 0 MON * *", "", "field 3 (day-of-month), position 5: unexpected character 'M'"},
		{"0 0 * 13 *", "", "field 4 (month), position 7: value 13 out of range 1-12"},
		{"0 0 * * FOO", "", "field 5 (day-of-week), position 9: unknown name \"FOO\""},
		{"0 0 * * SU", "", "field 5 (day-of-week), position 9: unknown name \"SU\""},
		{"0 0 * * MON#6", "", "field 5 (day-of-week), position 13: week number 6 out of range 1-5"},
		{"0 0 * * 1#050", "", "field 5 (day-of-week), position 11: number has more than two digits"},
		{"0 0 * * 5L,3", "", "field 5 (day-of-week), position 11: unexpected character ','"},
		{"0 0 * * L", "", "field 5 (day-of-week), position 9: unknown name \"L\""},
		{"0 0 ? * 100", "", "field 5 (day-of-week), position 9: number has more than two digits"},
		{"\t0 0 * * \u00ff", "", "field 5 (day-of-week), position 10: unexpected character 'ÿ'"},
		{"0 \u00e9\u00e9 * * 8", "", "field 2 (hour), position 3: unexpected character 'é'"},
		{"0 0 * * \u00e9 8", "", "field 5 (month), position 9: unexpected character 'é'"},
		{"H * * * *", "", "field 1 (minute), position 1: H needs a hash key"},
		{"H(30-10) * * * *", "k", "field 1 (minute), position 6: H range 30-10 is reversed"},
		{"H(0-70) * * * *", "k", "field 1 (minute), position 5: value 70 out of range 0-59"},
		{"H/61 * * * *", "k", "field 1 (minute), position 3: step 61 out of range 1-60"},
		{"0 0 H/29 * *", "k", "field 3 (day-of-month), position 7: step 29 out of range 1-28"},
		{"H,5 * * * *", "k", "field 1 (minute), position 2: unexpected character ','"},
		{"H(1-5 * * * *", "k", "field 1 (minute), position 6: unexpected end of field"},
		{"@every_hour", "", "position 1: unknown macro \"@every_hour\""},
		{"@daily x", "", "position 8: unexpected text after macro"},
		{"@", "", "position 1: unknown macro"},
	} {
		_, err := parseIn(c.expression, "", Options{HashKey: c.hashKey})
		var e *orrery.Error
		if !errors.As(err, &e) || !errors.Is(err, orrery.ErrValidation) || e.Field != "expression" {
			t.Errorf("%q: got %v, want a validation error on expression", c.expression, err)
			continue
		}
		if !strings.HasPrefix(e.Message, c.want) {
			t.Errorf("%q: message %q, want prefix %q", c.expression, e.Message, c.want)
		}
	}
}

func TestParseZoneAndOptions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		zone  string
		opts  Options
		field string
	}{
		{"Mars/Olympus_Mons", Options{}, "time_zone"},
		{"Local", Options{}, "time_zone"},
		{"america/new_york ", Options{}, "time_zone"},
		{"UTC", Options{Gap: 7}, "gap_policy"},
		{"UTC", Options{Repeat: -1}, "repeat_policy"},
		{"UTC", Options{Repeat: RepeatBoth + 1}, "repeat_policy"},
	} {
		_, err := parseIn("* * * * *", c.zone, c.opts)
		var e *orrery.Error
		if !errors.As(err, &e) || e.Code != orrery.CodeValidation || e.Field != c.field {
			t.Errorf("zone %q opts %+v: got %v, want validation on %s", c.zone, c.opts, err, c.field)
		}
	}
	for _, zone := range []string{"", "UTC", "Etc/UTC", "America/New_York", "Pacific/Apia", "Asia/Kolkata"} {
		if _, err := parseIn("* * * * *", zone, Options{}); err != nil {
			t.Errorf("zone %q: %v", zone, err)
		}
	}
	if got := mustParse(t, "0 0 * * *", "", Options{}).location; got != time.UTC {
		t.Errorf("empty zone is %v, want UTC", got)
	}
}

// TestHash checks H: stable for a key, spread over keys, within its range, and interval only
// with a step.
func TestHash(t *testing.T) {
	t.Parallel()
	first := mustParse(t, "H H H H H H", "", Options{HashKey: "schedule-a"}).spec
	again := mustParse(t, "H H H H H H", "", Options{HashKey: "schedule-a"}).spec
	if first != again {
		t.Fatal("H differs between two parses with the same key")
	}
	if first.interval {
		t.Error("plain H made the expression interval-based")
	}
	if !mustParse(t, "0 H/15 * * * *", "", Options{HashKey: "k"}).spec.interval {
		t.Error("H/15 in the minute field is not interval-based")
	}
	// The five-field and six-field spellings hash the minute alike.
	five := mustParse(t, "H * * * *", "", Options{HashKey: "k"}).spec.minutes
	six := mustParse(t, "0 H * * * *", "", Options{HashKey: "k"}).spec.minutes
	if five != six {
		t.Error("the minute's H depends on the number of fields")
	}
	minutes := map[uint64]bool{}
	for _, key := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		sp := mustParse(t, "H H(9-17) H * H", "", Options{HashKey: key}).spec
		minutes[sp.minutes] = true
		if sp.hours&^(uint64(1)<<18-1<<9) != 0 || sp.hours == 0 {
			t.Errorf("key %q: H(9-17) gave hours %b", key, sp.hours)
		}
		if sp.days&^(uint64(1)<<29-2) != 0 {
			t.Errorf("key %q: H in day-of-month beyond 28: %b", key, sp.days)
		}
		if sp.weekdays&^allWeekdays != 0 {
			t.Errorf("key %q: H in day-of-week: %b", key, sp.weekdays)
		}
		step := mustParse(t, "H/20 * * * *", "", Options{HashKey: key}).spec.minutes
		if n := popcount(step); n != 3 {
			t.Errorf("key %q: H/20 gave %d minutes", key, n)
		}
	}
	if len(minutes) < 4 {
		t.Errorf("H minutes hardly depend on the key: %d distinct of 8", len(minutes))
	}
}

func popcount(set uint64) int {
	n := 0
	for ; set != 0; set &= set - 1 {
		n++
	}
	return n
}
