package schedule

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// oracleRule is one cron exclusion the oracle checks field by field on the wall clock: local
// hours [fromHour, toHour] on weekdays [fromDay, toDay] (Sunday 0), or local minutes
// [fromMinute, toMinute] of every hour.
type oracleRule struct {
	minutes                          bool
	fromHour, toHour, fromDay, toDay int
	fromMinute, toMinute             int
}

// expression is the rule as a six-field cron expression (seconds "*": every second matches).
func (r oracleRule) expression() string {
	if r.minutes {
		return fmt.Sprintf("* %d-%d * * * *", r.fromMinute, r.toMinute)
	}
	return fmt.Sprintf("* * %d-%d * * %d-%d", r.fromHour, r.toHour, r.fromDay, r.toDay)
}

// matches is the rule read off the wall clock of local, with nothing of the cron package.
func (r oracleRule) matches(local time.Time) bool {
	if r.minutes {
		return local.Minute() >= r.fromMinute && local.Minute() <= r.toMinute
	}
	day := int(local.Weekday())
	return local.Hour() >= r.fromHour && local.Hour() <= r.toHour && day >= r.fromDay && day <= r.toDay
}

// TestExcludedInstantsMatchBruteForceOracle configures random Every schedules in 2026 (across
// the DST changes of New York, Berlin and Lord Howe's half hour) with a random calendar of
// dates, ranges and cron exclusions in a random zone, emits at random advancing logged times,
// and checks every instant passed against a brute-force enumeration: ENQUEUED unless the
// oracle (the instant's local date and wall clock, read with the time package) excludes it,
// EXCLUDED then; and that describe's next fire times are the oracle's next included instants.
func TestExcludedInstantsMatchBruteForceOracle(t *testing.T) {
	zones := []string{"", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata"}
	locations := map[string]*time.Location{"": time.UTC}
	for _, z := range zones[1:] {
		locations[z] = zoneOf(t, z)
	}
	rapid.Check(t, func(rt *rapid.T) {
		zone := rapid.SampledFrom(zones).Draw(rt, "zone")
		location := locations[zone]
		interval := rapid.SampledFrom([]int64{17 * input.Minute, hour, 5*hour + 13*input.Minute, input.Day}).Draw(rt, "interval")
		first := t0 + rapid.Int64Range(0, 120).Draw(rt, "firstDay")*input.Day + rapid.Int64Range(0, input.Day/sec).Draw(rt, "firstSecond")*sec
		date := func(label string) string {
			at := first + rapid.Int64Range(-1, 60).Draw(rt, label)*input.Day
			return time.UnixMicro(at).In(location).Format(dateLayout)
		}
		cal := &orreryv1.Calendar{Namespace: lane.GetNamespace(), Name: "random", TimeZone: zone}
		for i := range rapid.IntRange(0, 6).Draw(rt, "dates") {
			cal.ExcludedDates = append(cal.ExcludedDates, date(fmt.Sprintf("date%d", i)))
		}
		for i := range rapid.IntRange(0, 2).Draw(rt, "ranges") {
			from, to := date(fmt.Sprintf("from%d", i)), date(fmt.Sprintf("to%d", i))
			if to < from {
				from, to = to, from
			}
			cal.ExcludedRanges = append(cal.ExcludedRanges, &orreryv1.CalendarDateRange{From: from, To: to})
		}
		var rules []oracleRule
		for i := range rapid.IntRange(0, 2).Draw(rt, "crons") {
			r := oracleRule{minutes: rapid.Bool().Draw(rt, fmt.Sprintf("minutes%d", i))}
			r.fromHour = rapid.IntRange(0, 23).Draw(rt, fmt.Sprintf("fromHour%d", i))
			r.toHour = rapid.IntRange(r.fromHour, 23).Draw(rt, fmt.Sprintf("toHour%d", i))
			r.fromDay = rapid.IntRange(0, 6).Draw(rt, fmt.Sprintf("fromDay%d", i))
			r.toDay = rapid.IntRange(r.fromDay, 6).Draw(rt, fmt.Sprintf("toDay%d", i))
			r.fromMinute = rapid.IntRange(0, 59).Draw(rt, fmt.Sprintf("fromMinute%d", i))
			r.toMinute = rapid.IntRange(r.fromMinute, 59).Draw(rt, fmt.Sprintf("toMinute%d", i))
			rules = append(rules, r)
			cal.ExcludedCrons = append(cal.ExcludedCrons, r.expression())
		}
		excluded := func(at int64) bool {
			local := time.UnixMicro(at).In(location)
			d := local.Format(dateLayout)
			if slices.Contains(cal.GetExcludedDates(), d) {
				return true
			}
			for _, r := range cal.GetExcludedRanges() {
				if r.GetFrom() <= d && d <= r.GetTo() {
					return true
				}
			}
			for _, r := range rules {
				if r.matches(local) {
					return true
				}
			}
			return false
		}
		v := kv.NewMemory()
		if _, err := putCalendar(v, cal, first-interval); err != nil {
			rt.Fatalf("put calendar: %v", err)
		}
		def := definition(every(first, interval))
		def.Calendars = []string{"random"}
		if _, err := applyConfigure(v, input.DefaultLimits(), "alice", &orreryv1.ConfigureSchedule{Definition: def}, first-interval); err != nil {
			rt.Fatalf("configure: %v", err)
		}
		now := first - interval
		for step := range rapid.IntRange(1, 4).Draw(rt, "steps") {
			now += rapid.Int64Range(0, 60).Draw(rt, fmt.Sprintf("units%d", step))*interval + rapid.Int64Range(0, interval-1).Draw(rt, fmt.Sprintf("phase%d", step))
			for {
				res, err := ApplyEmit(v, input.DefaultLimits(), &orreryv1.EmitOccurrences{
					Lane: lane, ScheduleId: scheduleID, ExpectedGeneration: 1, Max: uint32(rapid.IntRange(1, 32).Draw(rt, "max")),
				}, now)
				if err != nil {
					rt.Fatalf("emit at %s: %v", instant(now), err)
				}
				if res.GetRevision() == mustLoadRapid(rt, v).GetRevision() && len(res.GetEnqueuedIds()) == 0 && res.GetPassedWithoutMessage() == 0 {
					break
				}
			}
		}
		ledger := map[int64]*orreryv1.LedgerRecord{}
		for _, e := range ledgerAll(rt, v) {
			ledger[e.GetNominalDueAtUnixMicros()] = e
		}
		n := 0
		for at := first; at <= now; at += interval {
			want := orreryv1.LedgerOutcome_LEDGER_OUTCOME_ENQUEUED
			if excluded(at) {
				want = orreryv1.LedgerOutcome_LEDGER_OUTCOME_EXCLUDED
			}
			if got := ledger[at].GetOutcome(); got != want {
				rt.Fatalf("instant %s (%s in %q): %v, oracle %v", instant(at), time.UnixMicro(at).In(location), zone, got, want)
			}
			n++
		}
		if len(ledger) != n {
			rt.Fatalf("%d ledger records, %d instants due", len(ledger), n)
		}
		insp, err := Inspect(v, lane, scheduleID, now)
		if err != nil {
			rt.Fatal(err)
		}
		var wantNext []int64
		// Describe looks at most InspectLookahead instants ahead (a calendar may exclude them all).
		for looked, at := 0, first+int64(n)*interval; looked < InspectLookahead && len(wantNext) < InspectFireTimes; looked, at = looked+1, at+interval {
			if !excluded(at) {
				wantNext = append(wantNext, at)
			}
		}
		if got := insp.GetNextFireTimesUnixMicros(); !slices.Equal(got, wantNext) {
			rt.Fatalf("next fire times %v, oracle %v", got, wantNext)
		}
	})
}

// mustLoadRapid loads the test schedule in a property.
func mustLoadRapid(t *rapid.T, v kv.Reader) *orreryv1.ScheduleRecord {
	rec, found, err := Load(v, lane, scheduleID)
	if err != nil || !found {
		t.Fatalf("load: found=%v err=%v", found, err)
	}
	return rec
}

// ledgerAll reads the test schedule's whole ledger in a property.
func ledgerAll(t *rapid.T, v kv.Reader) []*orreryv1.LedgerRecord {
	var all []*orreryv1.LedgerRecord
	var after []byte
	for {
		page, next, err := ReadLedger(v, lane, scheduleID, LedgerQuery{ToMicros: input.MaxInstantMicros, MaxRecords: MaxLedgerRead, After: after})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if next == nil {
			return all
		}
		after = next
	}
}
