package schedule

import (
	"fmt"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/schedule/cron"
)

// exclusion is one calendar as an emit or an inspection evaluates it.
type exclusion struct {
	name     string
	location *time.Location
	dates    map[string]bool
	ranges   []*orreryv1.CalendarDateRange
	crons    []*cron.Schedule
	exprs    []string
}

// exclusions are the calendars a definition references, in its order (nil: none).
type exclusions []exclusion

// loadExclusions prepares the calendars def references from the partition's state alone: each
// in its zone's rules as the partition holds them. A calendar the partition no longer holds, or
// whose zone it holds no rules of, excludes nothing (neither happens: a referenced calendar
// cannot be deleted, and its put keeps its zone's rules).
func loadExclusions(r kv.Reader, def *orreryv1.ScheduleDefinition) (exclusions, error) {
	if len(def.GetCalendars()) == 0 {
		return nil, nil
	}
	out := make(exclusions, 0, len(def.GetCalendars()))
	for _, name := range def.GetCalendars() {
		rec, err := LoadCalendar(r, def.GetLane().GetNamespace(), name)
		if err != nil {
			return nil, err
		}
		if rec == nil {
			continue
		}
		c := rec.GetCalendar()
		location := time.UTC
		if zone := c.GetTimeZone(); zone != "" && zone != "UTC" {
			rules, err := loadZoneRules(r, zone)
			if err != nil {
				return nil, err
			}
			if rules == nil {
				continue
			}
			if location, err = cron.LoadZone(zone, rules.GetTzif()); err != nil {
				continue
			}
		}
		x := exclusion{name: name, location: location, dates: make(map[string]bool, len(c.GetExcludedDates())), ranges: c.GetExcludedRanges()}
		for _, date := range c.GetExcludedDates() {
			x.dates[date] = true
		}
		for _, expression := range c.GetExcludedCrons() {
			parsed, err := parseExclusionCron(expression, c.GetNamespace(), c.GetName(), location)
			if err != nil {
				continue // validated at put; a stored expression always parses
			}
			x.crons = append(x.crons, parsed)
			x.exprs = append(x.exprs, expression)
		}
		out = append(out, x)
	}
	return out, nil
}

// excludes says why a calendar excludes the instant atMicros ("" when none does): the first
// calendar in the definition's order, and its first rule, that does.
func (xs exclusions) excludes(atMicros int64) string {
	if len(xs) == 0 {
		return ""
	}
	at := time.UnixMicro(atMicros)
	second := at.Truncate(time.Second)
	for _, x := range xs {
		date := at.In(x.location).Format(dateLayout)
		zone := x.location.String()
		if x.dates[date] {
			return fmt.Sprintf("calendar %q excludes the date %s (%s)", x.name, date, zone)
		}
		for _, r := range x.ranges {
			if r.GetFrom() <= date && date <= r.GetTo() {
				return fmt.Sprintf("calendar %q excludes the dates %s to %s (%s)", x.name, r.GetFrom(), r.GetTo(), zone)
			}
		}
		for i, c := range x.crons {
			if next, ok := c.Next(second.Add(-time.Second)); ok && next.Equal(second) {
				return fmt.Sprintf("calendar %q excludes the times cron %q matches (%s)", x.name, x.exprs[i], zone)
			}
		}
	}
	return ""
}
