package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCalendarsPutGetListDelete: calendars put writes a calendar on every partition, get and
// list show it (table and JSON), a schedule created with --calendar names it and describe shows
// it, and delete is refused while the schedule references it, then goes through; bad input is
// a usage error or names the field.
func TestCalendarsPutGetListDelete(t *testing.T) {
	s := startSilo(t)
	out := ok(t, s, "", "calendars", "put", "cli-cal", "holidays", "--tz", "Europe/Berlin", "--date", "2026-12-25", "--date", "2026-12-26",
		"--range", "2026-12-27..2026-12-31", "--cron", "* * 0-5 * * *", "--description", "winter break")
	if !strings.HasPrefix(out, "put calendar cli-cal/holidays on all") {
		t.Fatalf("put printed %q", out)
	}
	out = ok(t, s, "", "calendars", "get", "cli-cal", "holidays")
	for _, want := range []string{"Europe/Berlin", "2026-12-25,2026-12-26", "2026-12-27..2026-12-31", "* * 0-5 * * *", "winter break"} {
		if !strings.Contains(out, want) {
			t.Fatalf("get does not show %q:\n%s", want, out)
		}
	}
	var listed struct {
		Calendars []struct {
			Calendar struct {
				Name          string   `json:"name"`
				ExcludedDates []string `json:"excluded_dates"`
			} `json:"calendar"`
		} `json:"calendars"`
	}
	if err := json.Unmarshal([]byte(ok(t, s, "", "-o", "json", "calendars", "list", "cli-cal")), &listed); err != nil ||
		len(listed.Calendars) != 1 || listed.Calendars[0].Calendar.Name != "holidays" || len(listed.Calendars[0].Calendar.ExcludedDates) != 2 {
		t.Fatalf("list JSON: %+v (%v)", listed, err)
	}
	ok(t, s, "", "schedules", "create", "nightly", "--namespace", "cli-cal", "--queue", "jobs", "--cron", "0 3 * * *", "--calendar", "holidays")
	if out := ok(t, s, "", "schedules", "describe", "cli-cal", "jobs", "nightly", "nightly"); !strings.Contains(out, "holidays") {
		t.Fatalf("describe does not show the calendar:\n%s", out)
	}
	if r := cli(t, s, "", "calendars", "delete", "cli-cal", "holidays"); r.code != 1 || !strings.Contains(r.stderr, "referenced by schedule") {
		t.Fatalf("delete of a referenced calendar: exit %d, stderr %q", r.code, r.stderr)
	}
	ok(t, s, "", "schedules", "delete", "cli-cal", "jobs", "nightly", "nightly")
	if out := ok(t, s, "", "calendars", "delete", "cli-cal", "holidays"); !strings.HasPrefix(out, "deleted calendar cli-cal/holidays") {
		t.Fatalf("delete printed %q", out)
	}
	if r := cli(t, s, "", "calendars", "get", "cli-cal", "holidays"); r.code != 1 || !strings.Contains(r.stderr, "not_found") && !strings.Contains(strings.ToLower(r.stderr), "not found") {
		t.Fatalf("get after the delete: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := cli(t, s, "", "calendars", "put", "cli-cal", "bad", "--date", "2026-02-30"); r.code != 1 || !strings.Contains(r.stderr, "excluded_dates[0]") {
		t.Fatalf("a bad date: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := cli(t, s, "", "calendars", "put", "cli-cal", "bad", "--range", "2026-01-01"); r.code != 2 {
		t.Fatalf("a range without ..: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := cli(t, s, "", "calendars", "get", "cli-cal"); r.code != 2 {
		t.Fatalf("get without a name: exit %d, stderr %q", r.code, r.stderr)
	}
}
