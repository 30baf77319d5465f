package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/schedule/zonerules"
)

// putCalendar applies a PutCalendar as a partition does: with the zone rules its leader
// carries.
func putCalendar(v kv.View, c *orreryv1.Calendar, now int64) (*orreryv1.CalendarResult, error) {
	m := &orreryv1.PutCalendar{Calendar: c}
	carried := ZoneRulesFor([]*orreryv1.Mutation{{Kind: &orreryv1.Mutation_PutCalendar{PutCalendar: m}}})
	return ApplyPutCalendar(v, "alice", m, carried, now)
}

func mustPutCalendar(t *testing.T, v kv.View, c *orreryv1.Calendar) {
	t.Helper()
	if _, err := putCalendar(v, c, t0); err != nil {
		t.Fatalf("put calendar: %v", err)
	}
}

// zoneOf is the location of zone from the rules Orrery carries (no silo zone database).
func zoneOf(t *testing.T, zone string) *time.Location {
	t.Helper()
	tzif, ok := zonerules.Lookup(zone)
	if !ok {
		t.Fatalf("no rules of %s", zone)
	}
	location, err := time.LoadLocationFromTZData(zone, tzif)
	if err != nil {
		t.Fatal(err)
	}
	return location
}

// ledgerByInstant is a generation's ledger records by nominal instant.
func ledgerByInstant(t *testing.T, v kv.Reader, generation uint64) map[int64]*orreryv1.LedgerRecord {
	t.Helper()
	out := map[int64]*orreryv1.LedgerRecord{}
	for _, e := range ledgerOf(t, v) {
		if e.GetGeneration() == generation && !e.GetManual() {
			out[e.GetNominalDueAtUnixMicros()] = e
		}
	}
	return out
}

// checkExcluded drains an hourly schedule from first to until and checks, instant by instant,
// that exactly those excluded(instant) says are ledgered EXCLUDED (naming the calendar) and
// every other is ENQUEUED; it returns how many were excluded.
func checkExcluded(t *testing.T, v kv.View, first, until int64, calendar string, excluded func(time.Time) bool) int {
	t.Helper()
	ids := drain(t, v, 1, until)
	ledger := ledgerByInstant(t, v, 1)
	n := 0
	for at := first; at <= until; at += hour {
		e := ledger[at]
		switch {
		case e == nil:
			t.Fatalf("no ledger record at %s", instant(at))
		case excluded(time.UnixMicro(at)):
			n++
			if e.GetOutcome() != orreryv1.LedgerOutcome_LEDGER_OUTCOME_EXCLUDED || !strings.Contains(e.GetReason(), `calendar "`+calendar+`"`) || e.GetMessageId() != "" {
				t.Fatalf("at %s: %v, want EXCLUDED by %s", instant(at), e, calendar)
			}
		case e.GetOutcome() != orreryv1.LedgerOutcome_LEDGER_OUTCOME_ENQUEUED:
			t.Fatalf("at %s: %v, want ENQUEUED", instant(at), e)
		}
	}
	if want := int((until-first)/hour) + 1 - n; len(ids) != want || len(messages(t, v)) != want {
		t.Fatalf("enqueued %d (%d live), want %d", len(ids), len(messages(t, v)), want)
	}
	return n
}

// TestCalendarExcludesADateInItsZoneAcrossDST: a calendar in America/New_York excludes
// 2026-03-08, the spring-forward day (23 hours): the 23 hourly instants of that local day, and
// no other, are ledgered EXCLUDED; the series goes on past them.
func TestCalendarExcludesADateInItsZoneAcrossDST(t *testing.T) {
	v := kv.NewMemory()
	mustPutCalendar(t, v, &orreryv1.Calendar{Namespace: "acme", Name: "holidays", TimeZone: "America/New_York", ExcludedDates: []string{"2026-03-08"}})
	first := time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC).UnixMicro()
	def := definition(every(first, hour))
	def.Calendars = []string{"holidays"}
	configure(t, v, def, 0, first-hour)
	ny := zoneOf(t, "America/New_York")
	n := checkExcluded(t, v, first, first+72*hour, "holidays", func(at time.Time) bool {
		return at.In(ny).Format("2006-01-02") == "2026-03-08"
	})
	if n != 23 {
		t.Fatalf("%d instants excluded, want the 23 of the spring-forward day", n)
	}
	if rec := mustLoad(t, v); rec.GetNextNominalUnixMicros() != first+73*hour || rec.GetNextOrdinal() != 73 {
		t.Fatalf("watermark %d at %s, want ordinal 73 (excluded ones passed)", rec.GetNextOrdinal(), instant(rec.GetNextNominalUnixMicros()))
	}
}

// TestCalendarExcludesADateRange: a UTC range of two days excludes both, inclusive.
func TestCalendarExcludesADateRange(t *testing.T) {
	v := kv.NewMemory()
	mustPutCalendar(t, v, &orreryv1.Calendar{Namespace: "acme", Name: "freeze",
		ExcludedRanges: []*orreryv1.CalendarDateRange{{From: "2026-01-02", To: "2026-01-03"}}})
	def := definition(every(t0, hour))
	def.Calendars = []string{"freeze"}
	configure(t, v, def, 0, t0-hour)
	n := checkExcluded(t, v, t0, t0+4*24*hour, "freeze", func(at time.Time) bool {
		d := at.UTC().Format("2006-01-02")
		return d == "2026-01-02" || d == "2026-01-03"
	})
	if n != 48 {
		t.Fatalf("%d instants excluded, want 48", n)
	}
}

// TestCalendarExcludesCronTimes: a cron exclusion of weekday business hours in Europe/Berlin
// (seconds "*": every second of 09:00..17:59 local) excludes exactly the instants an
// independent check of the local wall clock says, across the end of March's DST change.
func TestCalendarExcludesCronTimes(t *testing.T) {
	v := kv.NewMemory()
	mustPutCalendar(t, v, &orreryv1.Calendar{Namespace: "acme", Name: "office", TimeZone: "Europe/Berlin",
		ExcludedCrons: []string{"* * 9-17 * * MON-FRI"}})
	first := time.Date(2026, 3, 26, 0, 0, 0, 0, time.UTC).UnixMicro()
	def := definition(every(first, hour))
	def.Calendars = []string{"office"}
	configure(t, v, def, 0, first-hour)
	berlin := zoneOf(t, "Europe/Berlin")
	n := checkExcluded(t, v, first, first+7*24*hour, "office", func(at time.Time) bool {
		local := at.In(berlin)
		return local.Weekday() != time.Saturday && local.Weekday() != time.Sunday && local.Hour() >= 9 && local.Hour() <= 17
	})
	if n != 5*9 {
		t.Fatalf("%d instants excluded, want 45 (9 hours on each of 5 weekdays)", n)
	}
}

// TestDescribeSkipsExcludedInstants: next fire times leave out the instants a calendar
// excludes, and name ten that fire.
func TestDescribeSkipsExcludedInstants(t *testing.T) {
	v := kv.NewMemory()
	mustPutCalendar(t, v, &orreryv1.Calendar{Namespace: "acme", Name: "odd", ExcludedCrons: []string{"0 0 1/2 * * *"}})
	def := definition(every(t0, hour))
	def.Calendars = []string{"odd"}
	configure(t, v, def, 0, t0-hour)
	insp, err := Inspect(v, lane, scheduleID, t0-hour)
	if err != nil {
		t.Fatal(err)
	}
	times := insp.GetNextFireTimesUnixMicros()
	if len(times) != InspectFireTimes {
		t.Fatalf("next fire times %v, want %d", times, InspectFireTimes)
	}
	for i, at := range times {
		if at != t0+int64(2*i)*hour {
			t.Fatalf("next fire times %v: [%d] = %s, want the even hours only", times, i, instant(at))
		}
	}
}

// TestMisfireSkipFiresTheLastIncludedInstant: under misfire SKIP, a backlog whose latest due
// instant is excluded fires the latest one that is not (the excluded one does not stand for
// it), passes the older SKIPPED_MISFIRE and the excluded one EXCLUDED.
func TestMisfireSkipFiresTheLastIncludedInstant(t *testing.T) {
	v := kv.NewMemory()
	mustPutCalendar(t, v, &orreryv1.Calendar{Namespace: "acme", Name: "three", ExcludedCrons: []string{"0 0 3 * * *"}})
	def := policies(every(t0+hour, hour), orreryv1.MisfirePolicy_MISFIRE_POLICY_SKIP, orreryv1.OverlapPolicy_OVERLAP_POLICY_ALLOW_ALL)
	def.Calendars = []string{"three"}
	configure(t, v, def, 0, t0)
	if ids := drain(t, v, 1, t0+3*hour+30*60*sec); len(ids) != 1 || ids[0] != OccurrenceID(scheduleID, 1, 1) {
		t.Fatalf("enqueued %v, want ordinal 1 (02:00) only", ids)
	}
	got := outcomesOf(t, v, 1)
	if got[0] != orreryv1.LedgerOutcome_LEDGER_OUTCOME_SKIPPED_MISFIRE || got[1] != orreryv1.LedgerOutcome_LEDGER_OUTCOME_ENQUEUED ||
		got[2] != orreryv1.LedgerOutcome_LEDGER_OUTCOME_EXCLUDED {
		t.Fatalf("ledger %v", got)
	}
}

// TestCoalescePassesExcludedInstants: under COALESCE, the occurrence that stands for a backlog
// carries only its included instants; the excluded one among them is ledgered EXCLUDED.
func TestCoalescePassesExcludedInstants(t *testing.T) {
	v := kv.NewMemory()
	mustPutCalendar(t, v, &orreryv1.Calendar{Namespace: "acme", Name: "two", ExcludedCrons: []string{"0 0 2 * * *"}})
	def := policies(every(t0+hour, hour), orreryv1.MisfirePolicy_MISFIRE_POLICY_COALESCE, orreryv1.OverlapPolicy_OVERLAP_POLICY_ALLOW_ALL)
	def.Calendars = []string{"two"}
	configure(t, v, def, 0, t0)
	ids := drain(t, v, 1, t0+4*hour)
	if len(ids) != 1 || ids[0] != OccurrenceID(scheduleID, 1, 3) {
		t.Fatalf("enqueued %v, want one occurrence, ordinal 3", ids)
	}
	msg := messages(t, v)[ids[0]]
	if o := msg.GetOccurrence(); o.GetCoalescedCount() != 3 || o.GetFirstNominalDueAtUnixMicros() != t0+hour {
		t.Fatalf("origin %v, want 3 instants (01:00, 03:00, 04:00) coalesced", o)
	}
	got := outcomesOf(t, v, 1)
	if got[0] != orreryv1.LedgerOutcome_LEDGER_OUTCOME_COALESCED_INTO || got[1] != orreryv1.LedgerOutcome_LEDGER_OUTCOME_EXCLUDED ||
		got[2] != orreryv1.LedgerOutcome_LEDGER_OUTCOME_COALESCED_INTO || got[3] != orreryv1.LedgerOutcome_LEDGER_OUTCOME_ENQUEUED {
		t.Fatalf("ledger %v", got)
	}
}

// TestCalendarReferences: a definition naming a calendar the partition lacks is refused on the
// field; a referenced calendar cannot be deleted (naming the schedule) until the schedule is
// replaced without it or deleted; deleting an absent calendar changes nothing.
func TestCalendarReferences(t *testing.T) {
	v := kv.NewMemory()
	lim := input.DefaultLimits()
	def := definition(every(t0+hour, hour))
	def.Calendars = []string{"holidays"}
	_, err := applyConfigure(v, lim, "alice", &orreryv1.ConfigureSchedule{Definition: def}, t0)
	wantCode(t, err, orrery.ErrValidation, "definition.calendars[0]")
	mustPutCalendar(t, v, &orreryv1.Calendar{Namespace: "acme", Name: "holidays", ExcludedDates: []string{"2026-12-25"}})
	configure(t, v, def, 0, t0)
	del := &orreryv1.DeleteCalendar{Namespace: "acme", Name: "holidays"}
	_, err = ApplyDeleteCalendar(v, del)
	wantCode(t, err, orrery.ErrValidation, "name")
	if !strings.Contains(err.Error(), scheduleID) {
		t.Fatalf("refusal %v does not name the schedule", err)
	}
	replaced := definition(every(t0+hour, hour))
	configure(t, v, replaced, 1, t0)
	if res, err := ApplyDeleteCalendar(v, del); err != nil || !res.GetChanged() {
		t.Fatalf("delete after the replacement: %v %v", res, err)
	}
	if res, err := ApplyDeleteCalendar(v, del); err != nil || res.GetChanged() {
		t.Fatalf("delete of an absent calendar: %v %v, want unchanged", res, err)
	}
	// A schedule deleted drops its references too.
	mustPutCalendar(t, v, &orreryv1.Calendar{Namespace: "acme", Name: "holidays"})
	configure(t, v, def, 2, t0)
	if _, err := ApplyDelete(v, &orreryv1.DeleteSchedule{Lane: lane, ScheduleId: scheduleID, AnyRevision: true}, t0, Newest); err != nil {
		t.Fatal(err)
	}
	if res, err := ApplyDeleteCalendar(v, del); err != nil || !res.GetChanged() {
		t.Fatalf("delete after the schedule's delete: %v %v", res, err)
	}
}

// TestPutCalendarValidatesAndIsIdempotent: each bad field is named with the calendar's path,
// nothing is written then; putting the same calendar again changes nothing.
func TestPutCalendarValidatesAndIsIdempotent(t *testing.T) {
	base := func() *orreryv1.Calendar {
		return &orreryv1.Calendar{Namespace: "acme", Name: "c", ExcludedDates: []string{"2026-01-01"}}
	}
	many := make([]string, MaxCalendarDates+1)
	for i := range many {
		many[i] = "2026-01-01"
	}
	cases := []struct {
		field string
		edit  func(*orreryv1.Calendar)
	}{
		{"calendar.name", func(c *orreryv1.Calendar) { c.Name = "bad name" }},
		{"calendar.namespace", func(c *orreryv1.Calendar) { c.Namespace = "" }},
		{"calendar.time_zone", func(c *orreryv1.Calendar) { c.TimeZone = "Mars/Olympus" }},
		{"calendar.excluded_dates[1]", func(c *orreryv1.Calendar) { c.ExcludedDates = append(c.ExcludedDates, "2026-02-30") }},
		{"calendar.excluded_dates", func(c *orreryv1.Calendar) { c.ExcludedDates = many }},
		{"calendar.excluded_ranges[0].to", func(c *orreryv1.Calendar) {
			c.ExcludedRanges = []*orreryv1.CalendarDateRange{{From: "2026-02-02", To: "2026-02-01"}}
		}},
		{"calendar.excluded_crons[0]", func(c *orreryv1.Calendar) { c.ExcludedCrons = []string{"61 * * * *"} }},
		{"calendar.excluded_crons", func(c *orreryv1.Calendar) { c.ExcludedCrons = make([]string, MaxCalendarCrons+1) }},
	}
	for _, tc := range cases {
		v := kv.NewMemory()
		c := base()
		tc.edit(c)
		_, err := putCalendar(v, c, t0)
		wantCode(t, err, orrery.ErrValidation, tc.field)
		if listed, _, _ := ListCalendars(v, "acme", "", 0); len(listed) != 0 {
			t.Fatalf("%s: a refused put wrote %v", tc.field, listed)
		}
	}
	v := kv.NewMemory()
	first, err := putCalendar(v, base(), t0)
	if err != nil || !first.GetChanged() {
		t.Fatalf("put: %v %v", first, err)
	}
	again, err := putCalendar(v, base(), t0+hour)
	if err != nil || again.GetChanged() || again.GetCalendar().GetPutAtUnixMicros() != t0 {
		t.Fatalf("second put: %v %v, want unchanged with the first record", again, err)
	}
}

// TestListCalendarsPages: the list pages by name with its continuation, within one namespace.
func TestListCalendarsPages(t *testing.T) {
	v := kv.NewMemory()
	for _, name := range []string{"a", "b", "c"} {
		mustPutCalendar(t, v, &orreryv1.Calendar{Namespace: "acme", Name: name})
	}
	mustPutCalendar(t, v, &orreryv1.Calendar{Namespace: "other", Name: "z"})
	page, next, err := ListCalendars(v, "acme", "", 2)
	if err != nil || len(page) != 2 || next != "b" {
		t.Fatalf("page 1: %v %q %v", page, next, err)
	}
	page, next, err = ListCalendars(v, "acme", next, 2)
	if err != nil || len(page) != 1 || page[0].GetCalendar().GetName() != "c" || next != "" {
		t.Fatalf("page 2: %v %q %v", page, next, err)
	}
}

// TestCronScheduleSkipsHolidays: a cron schedule at 09:00 New York time with a calendar of
// New York holidays fires every weekday but the holiday, which is ledgered EXCLUDED, and the
// series goes on to the next Monday.
func TestCronScheduleSkipsHolidays(t *testing.T) {
	v := kv.NewMemory()
	mustPutCalendar(t, v, &orreryv1.Calendar{Namespace: "acme", Name: "us", TimeZone: "America/New_York", ExcludedDates: []string{"2026-07-03"}})
	start := time.Date(2026, 6, 29, 0, 0, 0, 0, time.UTC).UnixMicro() // a Monday
	def := definition(cronSpec("0 9 * * MON-FRI", "America/New_York"))
	def.Calendars = []string{"us"}
	configure(t, v, def, 0, start)
	ids := drain(t, v, 1, start+7*24*hour)
	if len(ids) != 4 {
		t.Fatalf("enqueued %d, want Monday to Thursday", len(ids))
	}
	holiday := time.Date(2026, 7, 3, 13, 0, 0, 0, time.UTC).UnixMicro() // 09:00 EDT
	if e := ledgerByInstant(t, v, 1)[holiday]; e.GetOutcome() != orreryv1.LedgerOutcome_LEDGER_OUTCOME_EXCLUDED {
		t.Fatalf("the holiday: %v, want EXCLUDED", e)
	}
	if rec := mustLoad(t, v); rec.GetNextNominalUnixMicros() != time.Date(2026, 7, 6, 13, 0, 0, 0, time.UTC).UnixMicro() {
		t.Fatalf("next instant %s, want the Monday after", instant(rec.GetNextNominalUnixMicros()))
	}
}
