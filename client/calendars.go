package client

import (
	"context"
	"fmt"
	"math"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// calendarPartition is the partition the calendar reads ask: every partition holds every
// calendar, so one answers for all once a put or delete has reached them all.
const calendarPartition = 0

// PutCalendar creates or replaces exclusion calendar cal (its namespace and name) on every
// partition, since a schedule of any partition may reference it (ScheduleOptions.Calendars):
// an instant the calendar excludes (a date or date range in its zone, or a time a cron
// exclusion matches on its zone's wall clock) is ledgered "excluded" instead of enqueued. It
// returns once every partition has applied it; when some could not be reached or refused it,
// the error names them (PartitionsError) and calling PutCalendar again completes it (a
// partition that holds the same calendar changes nothing). It needs SchedulerManage on the
// whole namespace, and apply version 17.
func (c *Client) PutCalendar(ctx context.Context, cal *orreryv1.Calendar, opts ...CallOption) error {
	if cal == nil {
		return orrery.Invalid("calendar", "is required")
	}
	m := &orreryv1.PutCalendar{Calendar: cal}
	return c.fanOut(ctx, fmt.Sprintf("put calendar %s/%s", cal.GetNamespace(), cal.GetName()), &orreryv1.Mutation{Kind: &orreryv1.Mutation_PutCalendar{PutCalendar: m}}, opts)
}

// DeleteCalendar removes calendar (namespace, name) from every partition, like PutCalendar.
// A partition where a schedule references it refuses (Validation on name, naming the
// schedule) and keeps it: replace or delete those schedules, then call DeleteCalendar again
// (deleting an absent calendar changes nothing).
func (c *Client) DeleteCalendar(ctx context.Context, namespace, name string, opts ...CallOption) error {
	m := &orreryv1.DeleteCalendar{Namespace: namespace, Name: name}
	return c.fanOut(ctx, fmt.Sprintf("delete calendar %s/%s", namespace, name), &orreryv1.Mutation{Kind: &orreryv1.Mutation_DeleteCalendar{DeleteCalendar: m}}, opts)
}

// GetCalendar reads calendar (namespace, name), as partition 0 holds it (every partition holds
// the same once a put has reached them all); NotFound when there is none. It needs
// QueueInspect on the whole namespace.
func (c *Client) GetCalendar(ctx context.Context, namespace, name string) (*orreryv1.CalendarRecord, error) {
	reply, err := c.inspect(ctx, calendarPartition, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Calendar{
		Calendar: &orreryv1.InspectCalendar{Namespace: namespace, Name: name},
	}})
	if err != nil {
		return nil, err
	}
	if !reply.GetFound() || reply.GetCalendar() == nil {
		return nil, orrery.FieldErrorf(orrery.CodeNotFound, "name", "no calendar %q in namespace %q", name, namespace)
	}
	return reply.GetCalendar(), nil
}

// ListCalendars reads up to maxCalendars (0: 100, at most 1000) of namespace's calendars after
// the name after ("" starts at the beginning), shorter names first, then in byte order, as
// partition 0 holds them; next is the after of the next page, "" when there are no more. It
// needs QueueInspect on the whole namespace.
func (c *Client) ListCalendars(ctx context.Context, namespace, after string, maxCalendars int) (calendars []*orreryv1.CalendarRecord, next string, err error) {
	if maxCalendars < 0 {
		return nil, "", orrery.Invalid("max_calendars", "must not be negative, got %d", maxCalendars)
	}
	reply, err := c.inspect(ctx, calendarPartition, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_ListCalendars{
		ListCalendars: &orreryv1.ListCalendars{Namespace: namespace, After: after, MaxCalendars: uint32(min(int64(maxCalendars), math.MaxUint32))},
	}})
	if err != nil {
		return nil, "", err
	}
	return reply.GetListedCalendars(), string(reply.GetListContinuation()), nil
}
