package schedule

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/schedule/cron"
)

// Bounds of exclusion calendars (apply version 17).
const (
	// MaxCalendarDates bounds a calendar's excluded dates and date ranges together.
	MaxCalendarDates = 1000
	// MaxCalendarCrons bounds a calendar's cron exclusions.
	MaxCalendarCrons = 16
	// MaxCalendarNameBytes bounds a calendar's name.
	MaxCalendarNameBytes = 128
	// MaxCalendarDescriptionBytes bounds a calendar's description.
	MaxCalendarDescriptionBytes = 1024
	// MaxScheduleCalendars bounds the calendars one schedule definition references.
	MaxScheduleCalendars = 8
	// DefaultListCalendars and MaxListCalendars are ListCalendars.max_calendars's default and
	// bound.
	DefaultListCalendars = 100
	MaxListCalendars     = 1000
)

// dateLayout is the layout of a calendar's dates.
const dateLayout = "2006-01-02"

// CalendarName checks a calendar's name: 1..MaxCalendarNameBytes of ASCII letters, digits, '.',
// '_' and '-', starting with a letter or digit (a queue name's rules).
func CalendarName(field, name string) error {
	if err := input.Name(field, name, MaxCalendarNameBytes); err != nil {
		return err
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			i > 0 && (c == '.' || c == '_' || c == '-')
		if !ok {
			return orrery.Invalid(field, "has %q at byte %d; calendar names use letters, digits, '.', '_' and '-' and start with a letter or digit", c, i)
		}
	}
	return nil
}

// validDate checks one "YYYY-MM-DD" date (a real day of years 0001..9999).
func validDate(field, date string) *orrery.Error {
	parsed, err := time.Parse(dateLayout, date)
	if err != nil || parsed.Format(dateLayout) != date {
		return orrery.Invalid(field, "%q is not a date YYYY-MM-DD", date)
	}
	return nil
}

// parseExclusionCron parses one cron exclusion of the calendar (namespace, name) in location.
// It matches wall-clock seconds only: a spring-forward gap's times match no instant, and a
// repeated time matches in every pass.
func parseExclusionCron(expression, namespace, name string, location *time.Location) (*cron.Schedule, error) {
	return cron.Parse(expression, location, cron.Options{HashKey: namespace + "/" + name, Gap: cron.GapSkip, Repeat: cron.RepeatBoth})
}

// ValidateCalendar checks every field of a calendar, before any write, with its zone's
// location; the error is a Validation error naming the field relative to the calendar.
func ValidateCalendar(c *orreryv1.Calendar, location *time.Location) *orrery.Error {
	if c == nil {
		return orrery.Invalid("", "is required")
	}
	if err := input.Name("namespace", c.GetNamespace(), input.MaxNamespaceBytes); err != nil {
		return orrery.AsError(err)
	}
	if err := CalendarName("name", c.GetName()); err != nil {
		return orrery.AsError(err)
	}
	if n := len(c.GetExcludedDates()) + len(c.GetExcludedRanges()); n > MaxCalendarDates {
		return orrery.Invalid("excluded_dates", "%d dates and date ranges, at most %d together", n, MaxCalendarDates)
	}
	for i, date := range c.GetExcludedDates() {
		if err := validDate(fmt.Sprintf("excluded_dates[%d]", i), date); err != nil {
			return err
		}
	}
	for i, r := range c.GetExcludedRanges() {
		field := fmt.Sprintf("excluded_ranges[%d]", i)
		if err := validDate(field+".from", r.GetFrom()); err != nil {
			return err
		}
		if err := validDate(field+".to", r.GetTo()); err != nil {
			return err
		}
		if r.GetFrom() > r.GetTo() {
			return orrery.Invalid(field+".to", "%s is before from %s", r.GetTo(), r.GetFrom())
		}
	}
	if n := len(c.GetExcludedCrons()); n > MaxCalendarCrons {
		return orrery.Invalid("excluded_crons", "%d cron expressions, at most %d", n, MaxCalendarCrons)
	}
	for i, expression := range c.GetExcludedCrons() {
		field := fmt.Sprintf("excluded_crons[%d]", i)
		parsed, err := parseExclusionCron(expression, c.GetNamespace(), c.GetName(), location)
		if err != nil {
			return orrery.Invalid(field, "%s", orrery.AsError(err).Message)
		}
		if _, ok := parsed.Next(time.Unix(0, 0)); !ok {
			return orrery.Invalid(field, "%q matches no instant between 1970 and 9999", expression)
		}
	}
	if d := c.GetDescription(); d != "" {
		if err := input.Name("description", d, MaxCalendarDescriptionBytes); err != nil {
			return orrery.AsError(err)
		}
	}
	return nil
}

// ApplyPutCalendar creates or replaces calendar m.calendar in this partition, with principal
// and the logged time on its record. Its zone is resolved as a cron schedule's (configureZone:
// the carried rules when the partition holds none of the zone or older ones), so that every
// replica evaluates it alike. Putting the calendar the partition holds already changes nothing
// but the zone's rules (reported changed false, with the record kept). Errors are Validation
// errors on "calendar..." fields; nothing is written then.
func ApplyPutCalendar(v kv.View, principal string, m *orreryv1.PutCalendar, carried []*orreryv1.ZoneRules, loggedNowMicros int64) (*orreryv1.CalendarResult, error) {
	c := m.GetCalendar()
	if c == nil {
		return nil, orrery.Invalid("calendar", "is required")
	}
	location, adopt, err := configureZone(v, c.GetTimeZone(), carried)
	if err != nil {
		return nil, orrery.AsError(err).InField("calendar")
	}
	if err := ValidateCalendar(c, location); err != nil {
		return nil, err.InField("calendar")
	}
	if err := storeZoneRules(v, adopt); err != nil {
		return nil, err
	}
	held, err := LoadCalendar(v, c.GetNamespace(), c.GetName())
	if err != nil {
		return nil, err
	}
	if held != nil && proto.Equal(held.GetCalendar(), c) {
		return &orreryv1.CalendarResult{Calendar: held}, nil
	}
	rec := &orreryv1.CalendarRecord{Calendar: proto.Clone(c).(*orreryv1.Calendar), PutBy: principal, PutAtUnixMicros: loggedNowMicros}
	if _, err := record.Store(v, keys.CalendarKey(c.GetNamespace(), c.GetName()), rec); err != nil {
		return nil, err
	}
	return &orreryv1.CalendarResult{Changed: true, Calendar: rec}, nil
}

// ApplyDeleteCalendar removes calendar (m.namespace, m.name) from this partition. While a
// schedule of the partition references it the delete is refused, Validation on "name" naming
// one such schedule; deleting an absent calendar reports changed false.
func ApplyDeleteCalendar(v kv.View, m *orreryv1.DeleteCalendar) (*orreryv1.CalendarResult, error) {
	if err := input.Name("namespace", m.GetNamespace(), input.MaxNamespaceBytes); err != nil {
		return nil, err
	}
	if err := CalendarName("name", m.GetName()); err != nil {
		return nil, err
	}
	held, err := LoadCalendar(v, m.GetNamespace(), m.GetName())
	if err != nil || held == nil {
		return &orreryv1.CalendarResult{}, err
	}
	prefix := keys.CalendarRefPrefix(m.GetNamespace(), m.GetName())
	var referrer []byte
	if err := kv.ScanPrefix(v, prefix, func(key, _ []byte) (bool, error) {
		referrer = bytes.Clone(key[len(prefix):])
		return false, nil
	}); err != nil {
		return nil, err
	}
	if referrer != nil {
		lane, id, err := keys.SplitLaneID(referrer)
		if err != nil {
			return nil, orrery.Wrap(orrery.CodeInternal, err, "calendar reference %x", referrer)
		}
		return nil, orrery.Invalid("name", "calendar %q is referenced by schedule %s (queue %q, key %q) in this partition: replace or delete the schedules that reference it first",
			m.GetName(), id, lane.GetQueue(), lane.GetKey())
	}
	if err := v.Delete(keys.CalendarKey(m.GetNamespace(), m.GetName())); err != nil {
		return nil, err
	}
	return &orreryv1.CalendarResult{Changed: true}, nil
}

// LoadCalendar returns calendar (namespace, name) of this partition, or nil when it holds none.
func LoadCalendar(r kv.Reader, namespace, name string) (*orreryv1.CalendarRecord, error) {
	rec := &orreryv1.CalendarRecord{}
	found, err := record.Load(r, keys.CalendarKey(namespace, name), rec)
	if err != nil || !found {
		return nil, err
	}
	return rec, nil
}

// ListCalendars returns namespace's calendars of this partition, shorter names first, then in
// byte order (their keys' order), at most maxCalendars (zero: DefaultListCalendars) of those
// after the name after; next is the last name returned when more follow ("" when the list is
// complete).
func ListCalendars(r kv.Reader, namespace, after string, maxCalendars int) (calendars []*orreryv1.CalendarRecord, next string, err error) {
	if err := input.Name("namespace", namespace, input.MaxNamespaceBytes); err != nil {
		return nil, "", err
	}
	if maxCalendars == 0 {
		maxCalendars = DefaultListCalendars
	}
	if maxCalendars < 0 || maxCalendars > MaxListCalendars {
		return nil, "", orrery.Invalid("max_calendars", "must be at most %d, got %d", MaxListCalendars, maxCalendars)
	}
	prefix := keys.CalendarNamespacePrefix(namespace)
	start := prefix
	if after != "" {
		start = append(keys.CalendarKey(namespace, after), 0)
	}
	more := false
	err = r.Scan(start, kv.PrefixEnd(prefix), func(_, value []byte) (bool, error) {
		if len(calendars) == maxCalendars {
			more = true
			return false, nil
		}
		rec := &orreryv1.CalendarRecord{}
		if err := record.Unmarshal(value, rec); err != nil {
			return false, err
		}
		calendars = append(calendars, rec)
		return true, nil
	})
	if err != nil {
		return nil, "", err
	}
	if more {
		next = calendars[len(calendars)-1].GetCalendar().GetName()
	}
	return calendars, next, nil
}

// validateCalendarNames checks a definition's calendar references without the state: at most
// MaxScheduleCalendars names, each a calendar name, none twice.
func validateCalendarNames(def *orreryv1.ScheduleDefinition) *orrery.Error {
	names := def.GetCalendars()
	if len(names) > MaxScheduleCalendars {
		return orrery.Invalid("calendars", "%d calendars, at most %d", len(names), MaxScheduleCalendars)
	}
	for i, name := range names {
		field := fmt.Sprintf("calendars[%d]", i)
		if err := CalendarName(field, name); err != nil {
			return orrery.AsError(err)
		}
		if slices.Contains(names[:i], name) {
			return orrery.Invalid(field, "names calendar %q twice", name)
		}
	}
	return nil
}

// checkCalendarsExist fails, Validation on "calendars[i]", unless every calendar def
// references exists in this partition.
func checkCalendarsExist(r kv.Reader, def *orreryv1.ScheduleDefinition) *orrery.Error {
	namespace := def.GetLane().GetNamespace()
	for i, name := range def.GetCalendars() {
		if _, found, err := r.Get(keys.CalendarKey(namespace, name)); err != nil {
			return orrery.AsError(err)
		} else if !found {
			return orrery.Invalid(fmt.Sprintf("calendars[%d]", i), "no calendar %q in namespace %q: put it first (PutCalendar)", name, namespace)
		}
	}
	return nil
}

// referenceCalendars moves the schedule's calendar references from old's definition (nil: none)
// to def's, so that a calendar a schedule references cannot be deleted (ApplyDeleteCalendar).
func referenceCalendars(v kv.View, old, def *orreryv1.ScheduleDefinition) error {
	for _, name := range old.GetCalendars() {
		if err := v.Delete(keys.CalendarRefKey(name, old.GetLane(), old.GetScheduleId())); err != nil {
			return err
		}
	}
	for _, name := range def.GetCalendars() {
		if err := v.Set(keys.CalendarRefKey(name, def.GetLane(), def.GetScheduleId()), nil); err != nil {
			return err
		}
	}
	return nil
}
