package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// stringsFlag is a repeatable flag collecting its values in order.
type stringsFlag []string

// String is the values, comma-separated.
func (s *stringsFlag) String() string { return strings.Join(*s, ",") }

// Set adds one value.
func (s *stringsFlag) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// calendars runs a calendars subcommand.
func (c *command) calendars(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("calendars: a subcommand is required: put, delete, get or list")
	}
	switch args[0] {
	case "put":
		return c.putCalendar(ctx, args[1:])
	case "delete":
		return c.deleteCalendar(ctx, args[1:])
	case "get":
		return c.getCalendar(ctx, args[1:])
	case "list":
		return c.listCalendars(ctx, args[1:])
	}
	return usagef("calendars: unknown subcommand %q: want put, delete, get or list", args[0])
}

// putCalendar creates or replaces a calendar, whole, on every partition (client.PutCalendar).
func (c *command) putCalendar(ctx context.Context, args []string) error {
	fs := c.flagSet("calendars put")
	var zone, description string
	var dates, ranges, crons stringsFlag
	fs.StringVar(&zone, "tz", "", "IANA time zone of the dates and cron exclusions (default UTC)")
	fs.Var(&dates, "date", "an excluded date, YYYY-MM-DD; repeatable")
	fs.Var(&ranges, "range", "excluded dates FROM..TO, both YYYY-MM-DD and inclusive; repeatable")
	fs.Var(&crons, "cron", `a cron exclusion: the seconds it matches are excluded ("* * 9-17 * * MON-FRI"); repeatable`)
	fs.StringVar(&description, "description", "", "what the calendar is for (optional)")
	positional, err := c.parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 2 {
		return usagef("calendars put: want NAMESPACE NAME, got %d arguments", len(positional))
	}
	cal := &orreryv1.Calendar{Namespace: positional[0], Name: positional[1], TimeZone: zone, ExcludedDates: dates,
		ExcludedCrons: crons, Description: description}
	for _, r := range ranges {
		from, to, ok := strings.Cut(r, "..")
		if !ok {
			return usagef("range: want FROM..TO (2026-12-24..2026-12-26), got %q", r)
		}
		cal.ExcludedRanges = append(cal.ExcludedRanges, &orreryv1.CalendarDateRange{From: from, To: to})
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.PutCalendar(ctx, cal); err != nil {
		return fmt.Errorf("put calendar %s/%s: %w", cal.GetNamespace(), cal.GetName(), err)
	}
	if c.output == "json" {
		return writeJSON(c.stdout, map[string]any{"namespace": cal.GetNamespace(), "name": cal.GetName(), "partitions": cl.Partitions()})
	}
	fmt.Fprintf(c.stdout, "put calendar %s/%s on all %d partitions\n", cal.GetNamespace(), cal.GetName(), cl.Partitions())
	return nil
}

// deleteCalendar removes a calendar from every partition (client.DeleteCalendar).
func (c *command) deleteCalendar(ctx context.Context, args []string) error {
	positional, err := c.parseInterspersed(c.flagSet("calendars delete"), args)
	if err != nil {
		return err
	}
	if len(positional) != 2 {
		return usagef("calendars delete: want NAMESPACE NAME, got %d arguments", len(positional))
	}
	namespace, name := positional[0], positional[1]
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.DeleteCalendar(ctx, namespace, name); err != nil {
		return fmt.Errorf("delete calendar %s/%s: %w", namespace, name, err)
	}
	if c.output == "json" {
		return writeJSON(c.stdout, map[string]any{"namespace": namespace, "name": name, "deleted": true, "partitions": cl.Partitions()})
	}
	fmt.Fprintf(c.stdout, "deleted calendar %s/%s on all %d partitions\n", namespace, name, cl.Partitions())
	return nil
}

// getCalendar prints one calendar.
func (c *command) getCalendar(ctx context.Context, args []string) error {
	positional, err := c.parseInterspersed(c.flagSet("calendars get"), args)
	if err != nil {
		return err
	}
	if len(positional) != 2 {
		return usagef("calendars get: want NAMESPACE NAME, got %d arguments", len(positional))
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	rec, err := cl.GetCalendar(ctx, positional[0], positional[1])
	if err != nil {
		return fmt.Errorf("calendar %s/%s: %w", positional[0], positional[1], err)
	}
	if c.output == "json" {
		raw, err := protoValue(rec)
		if err != nil {
			return err
		}
		return writeJSON(c.stdout, raw)
	}
	cal := rec.GetCalendar()
	w := newTable(c.stdout, "FIELD", "VALUE")
	w.row("namespace", cal.GetNamespace())
	w.row("name", cal.GetName())
	w.row("zone", zoneName(cal.GetTimeZone()))
	w.row("description", cal.GetDescription())
	w.row("dates", strings.Join(cal.GetExcludedDates(), ","))
	w.row("ranges", rangesText(cal.GetExcludedRanges()))
	w.row("crons", strings.Join(cal.GetExcludedCrons(), " | "))
	w.row("put by", rec.GetPutBy())
	w.row("put at", instant(rec.GetPutAtUnixMicros()))
	return w.flush()
}

// listCalendars prints a page of a namespace's calendars.
func (c *command) listCalendars(ctx context.Context, args []string) error {
	fs := c.flagSet("calendars list")
	var after string
	var maxCalendars int
	fs.StringVar(&after, "after", "", "start after this calendar name (a previous page's next)")
	fs.IntVar(&maxCalendars, "max", 0, "calendars per page (default 100, at most 1000)")
	positional, err := c.parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		return usagef("calendars list: want NAMESPACE, got %d arguments", len(positional))
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	page, next, err := cl.ListCalendars(ctx, positional[0], after, maxCalendars)
	if err != nil {
		return fmt.Errorf("calendars of %s: %w", positional[0], err)
	}
	if c.output == "json" {
		records := make([]json.RawMessage, 0, len(page))
		for _, rec := range page {
			raw, err := protoValue(rec)
			if err != nil {
				return err
			}
			records = append(records, raw)
		}
		out := map[string]any{"calendars": records}
		if next != "" {
			out["next_after"] = next
		}
		return writeJSON(c.stdout, out)
	}
	w := newTable(c.stdout, "NAME", "ZONE", "DATES", "RANGES", "CRONS", "DESCRIPTION")
	for _, rec := range page {
		cal := rec.GetCalendar()
		w.row(cal.GetName(), zoneName(cal.GetTimeZone()), fmt.Sprint(len(cal.GetExcludedDates())), fmt.Sprint(len(cal.GetExcludedRanges())),
			fmt.Sprint(len(cal.GetExcludedCrons())), cal.GetDescription())
	}
	if err := w.flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(c.stdout, "more: --after %s\n", next)
	}
	return nil
}

// zoneName is a zone as shown: UTC for "".
func zoneName(zone string) string {
	if zone == "" {
		return "UTC"
	}
	return zone
}

// rangesText is date ranges as FROM..TO, comma-separated.
func rangesText(ranges []*orreryv1.CalendarDateRange) string {
	parts := make([]string, len(ranges))
	for i, r := range ranges {
		parts[i] = r.GetFrom() + ".." + r.GetTo()
	}
	return strings.Join(parts, ",")
}
