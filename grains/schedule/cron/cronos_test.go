package cron

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
)

// cronosToday is the date Cronos' facts use for a bare time of day.
var cronosToday = time.Date(2016, 12, 9, 0, 0, 0, 0, time.UTC)

// parseInstant reads "2006-01-02 15:04[:05[.fffffff]] -07:00".
func parseInstant(t *testing.T, text string) time.Time {
	t.Helper()
	for _, layout := range []string{"2006-01-02 15:04 -07:00", "2006-01-02 15:04:05 -07:00"} {
		if at, err := time.Parse(layout, strings.TrimSpace(text)); err == nil {
			return at
		}
	}
	t.Fatalf("bad instant %q", text)
	return time.Time{}
}

// parseLocal reads a wall-clock time of location, as Cronos' GetInstantFromLocalTime does.
func parseLocal(t *testing.T, text string, location *time.Location) time.Time {
	t.Helper()
	text = strings.TrimSpace(text)
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if at, err := time.Parse(layout, text); err == nil {
			return time.Date(at.Year(), at.Month(), at.Day(), at.Hour(), at.Minute(), at.Second(), 0, location)
		}
	}
	for _, layout := range []string{"15:04:05", "15:04"} {
		if at, err := time.Parse(layout, text); err == nil {
			return time.Date(cronosToday.Year(), cronosToday.Month(), cronosToday.Day(),
				at.Hour(), at.Minute(), at.Second(), 0, location)
		}
	}
	t.Fatalf("bad local time %q", text)
	return time.Time{}
}

// afterFor turns Cronos' (from, inclusive) into the instant Next must be strictly after:
// Cronos floors a from with a fraction of a second and then excludes it.
func afterFor(from time.Time, inclusive bool) time.Time {
	if inclusive && from.Nanosecond() == 0 {
		return from.Add(-time.Nanosecond)
	}
	return from
}

// hashKeyForOffset finds a HashKey whose H/step offset in field is want, computing fnv64a of
// the key and the field digit independently of the production code.
func hashKeyForOffset(t *testing.T, field fieldIndex, step, want uint64) string {
	t.Helper()
	for i := 0; i < 10000; i++ {
		key := fmt.Sprintf("cronos-jitter-%d", i)
		h := fnv.New64a()
		h.Write([]byte(key + string(rune('0'+field))))
		if h.Sum64()%step == want {
			return key
		}
	}
	t.Fatal("no hash key found")
	return ""
}

// inclusiveAtGapEnd lists facts whose from is exactly the first instant after a gap, where a
// shifted occurrence fires. Cronos' inclusive search starts at from's wall time and so does not
// return it, while its exclusive search from just before the gap does (the neighbouring facts).
// Next has no inclusive form; asked from just before from it returns the shifted occurrence,
// so these facts are checked in their exclusive form: after firing at from, the next is want.
var inclusiveAtGapEnd = map[string]bool{
	"Asia/Amman|30 0 L  * *|2017-03-31 01:00 +03:00": true,
	"Asia/Amman|30 0 LW * *|2018-03-30 01:00 +03:00": true,
}

func TestCronosDSTFacts(t *testing.T) {
	t.Parallel()
	key := hashKeyForOffset(t, minuteField, 30, 8) // Cronos' seed 3 gives H/30 = 8,38
	count := 0
	for _, group := range cronosDSTFacts {
		for _, fact := range group.facts {
			count++
			name := fmt.Sprintf("%s %q from %s inclusive=%v", group.zone, fact.expression, fact.from, fact.inclusive)
			schedule, err := parseIn(fact.expression, group.zone, Options{HashKey: key})
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			from, want := parseInstant(t, fact.from), parseInstant(t, fact.want)
			after := afterFor(from, fact.inclusive)
			if inclusiveAtGapEnd[group.zone+"|"+fact.expression+"|"+fact.from] {
				after = from
			}
			got, ok := schedule.Next(after)
			if !ok {
				t.Errorf("%s: no occurrence, want %s", name, want)
				continue
			}
			_, gotOffset := got.Zone()
			_, wantOffset := want.Zone()
			if !got.Equal(want) || gotOffset != wantOffset {
				t.Errorf("%s: got %s, want %s", name, got.Format(time.RFC3339), want.Format(time.RFC3339))
			}
		}
	}
	t.Logf("%d Cronos DST facts", count)
}

// TestCronosDSTBorderFacts ports Cronos' single-case DST facts.
func TestCronosDSTBorderFacts(t *testing.T) {
	t.Parallel()
	newYork, _ := time.LoadLocation("America/New_York")

	// HandlesBorderConditions_WhenDSTEnds: one tick before 02:00 -05:00, inclusive.
	schedule := mustParse(t, "59 59 01 * * *", "America/New_York", Options{})
	from := time.Date(2016, 11, 6, 2, 0, 0, 0, time.FixedZone("", -5*3600)).Add(-100 * time.Nanosecond)
	got, _ := schedule.Next(from)
	want := time.Date(2016, 11, 7, 1, 59, 59, 0, newYork)
	if !got.Equal(want) {
		t.Errorf("border when DST ends: got %s, want %s", got, want)
	}

	// ReturnsAGreaterValue_EvenWhenMillisecondTruncationRuleIsAppliedDueToDST.
	schedule = mustParse(t, "* * * * * *", "Asia/Amman", Options{})
	from = parseInstant(t, "2021-03-25 23:59:59.9999999 +02:00")
	if got, ok := schedule.Next(from); !ok || !got.After(from) {
		t.Errorf("truncation near DST: got %s after %s", got, from)
	}

	// GetOccurrence_PassesTests_DefinedInTheGitHubIssue53.
	schedule = mustParse(t, "0 0 * * SAT", "America/New_York", Options{})
	jan1 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.FixedZone("", -5*3600))
	for _, c := range []struct {
		after time.Time
		want  time.Time
	}{
		{jan1.Add(-time.Millisecond), jan1},
		{jan1.Add(-time.Nanosecond), jan1}, // inclusive
		{jan1, jan1.AddDate(0, 0, 7)},
		{jan1.Add(time.Hour), jan1.AddDate(0, 0, 7)},
		{jan1.Add(61 * time.Second), jan1.AddDate(0, 0, 7)},
	} {
		if got, _ := schedule.Next(c.after); !got.Equal(c.want) {
			t.Errorf("issue 53 after %s: got %s, want %s", c.after, got, c.want)
		}
	}
}

func TestCronosLocalFacts(t *testing.T) {
	t.Parallel()
	count := 0
	for _, group := range cronosLocalFacts {
		location, err := time.LoadLocation(group.zone)
		if err != nil {
			t.Fatal(err)
		}
		for _, fact := range group.facts {
			count++
			name := fmt.Sprintf("%s %q from %s", group.zone, fact.expression, fact.from)
			schedule, err := parseIn(fact.expression, group.zone, Options{})
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			from, want := parseLocal(t, fact.from, location), parseLocal(t, fact.want, location)
			got, ok := schedule.Next(afterFor(from, group.inclusive))
			if !ok || !got.Equal(want) {
				t.Errorf("%s: got %s (%v), want %s", name, got, ok, want)
			}
		}
	}
	t.Logf("%d Cronos facts", count)
}

func TestCronosUnreachable(t *testing.T) {
	t.Parallel()
	for _, expression := range cronosUnreachable {
		schedule := mustParse(t, expression, "America/New_York", Options{})
		if got, ok := schedule.Next(time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)); ok {
			t.Errorf("%q: got %s, want none", expression, got)
		}
		if got, ok := schedule.Next(time.Date(2080, 1, 1, 0, 0, 0, 0, time.UTC)); ok {
			t.Errorf("%q: got %s, want none", expression, got)
		}
	}
}

func TestCronosYearLimit(t *testing.T) {
	t.Parallel()
	schedule := mustParse(t, "* * * * * *", "", Options{})
	last := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	if got, ok := schedule.Next(last.Add(-time.Nanosecond)); !ok || !got.Equal(last) {
		t.Errorf("very last result: got %s (%v), want %s", got, ok, last)
	}
	if got, ok := schedule.Next(last); ok {
		t.Errorf("out of range: got %s, want none", got)
	}
	if got, ok := schedule.Next(time.Time{}.Add(-time.Nanosecond)); !ok || !got.Equal(time.Time{}) {
		t.Errorf("first instant of year 1: got %s (%v)", got, ok)
	}
}

// TestCronosMakesProgress ports MakesProgressInsideLoop: 100 strictly increasing occurrences.
func TestCronosMakesProgress(t *testing.T) {
	t.Parallel()
	newYork, _ := time.LoadLocation("America/New_York")
	for _, c := range []struct{ expression, from string }{
		{"* * * * * *", "1991-01-01 00:00"},
		{"0 * * * * *", "1991-03-02 00:00"},
		{"* 0 * * * *", "1991-03-15 00:00"},
		{"* * 0 * * *", "1991-03-31 00:00"},
		{"* * * 1 * *", "1991-04-15 00:00"},
		{"* * * * 1 *", "1991-05-25 00:00"},
		{"* * * * * 0", "1991-06-27 00:00"},
		{"0 0 0 * * *", "1991-07-16 00:00"},
		{"0 0 0 1 * *", "1991-10-30 00:00"},
		{"0 0 0 1 1 *", "1991-12-31 00:00"},
		{"0 0 0 1 * 1", "1991-12-31 00:00"},
	} {
		schedule := mustParse(t, c.expression, "America/New_York", Options{})
		at := parseLocal(t, c.from, newYork)
		for i := 0; i < 100; i++ {
			next, ok := schedule.Next(at)
			if !ok || !next.After(at) {
				t.Fatalf("%q: no progress after %s: %s", c.expression, at, next)
			}
			at = next
		}
	}
}

func TestCronosInvalid(t *testing.T) {
	t.Parallel()
	for _, c := range cronosInvalid {
		_, err := parseIn(c.expression, "", Options{HashKey: "k"})
		var e *orrery.Error
		if !errors.As(err, &e) || e.Code != orrery.CodeValidation || e.Field != "expression" {
			t.Errorf("%q: got %v, want a validation error on expression", c.expression, err)
			continue
		}
		fields := len(strings.Fields(c.expression))
		if c.field != "" && fields >= 5 && fields <= 6 && !strings.Contains(e.Message, "("+c.field+")") {
			t.Errorf("%q: error %q does not name %s", c.expression, e.Message, c.field)
		}
	}
}

func TestCronosValid(t *testing.T) {
	t.Parallel()
	for _, expression := range cronosValid {
		if _, err := parseIn(expression, "", Options{}); err != nil {
			t.Errorf("%q: %v", expression, err)
		}
	}
}

func TestCronosEquivalent(t *testing.T) {
	t.Parallel()
	for _, c := range cronosEquivalent {
		left := mustParse(t, c.left, "", Options{}).spec
		right := mustParse(t, c.right, "", Options{}).spec
		left.interval, right.interval = false, false // Cronos' equality ignores it too
		if (left == right) != c.equal {
			t.Errorf("%q vs %q: equal=%v, want %v", c.left, c.right, left == right, c.equal)
		}
	}
}

func mustParse(t testing.TB, expression, zone string, opts Options) *Schedule {
	t.Helper()
	schedule, err := parseIn(expression, zone, opts)
	if err != nil {
		t.Fatalf("parseIn(%q, %q): %v", expression, zone, err)
	}
	return schedule
}
