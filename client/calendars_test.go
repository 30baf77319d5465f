package client_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/client/clienttest"
)

// TestCalendarsReachEveryPartition: PutCalendar puts the calendar on every partition, so a
// schedule of any partition may name it; its next fire times leave the excluded instants out,
// and the instants it passes are ledgered "excluded" naming the calendar. DeleteCalendar is
// refused (Validation, naming the schedule) by the partition where a schedule references it,
// and goes through once the schedule is deleted; GetCalendar then says NotFound.
func TestCalendarsReachEveryPartition(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	cal := &orreryv1.Calendar{Namespace: testNamespace, Name: "even-minutes", TimeZone: "Europe/Berlin",
		ExcludedCrons: []string{"* */2 * * * *"}, Description: "no even minutes"}
	if err := b.c.PutCalendar(ctx, cal); err != nil {
		t.Fatal(err)
	}
	if err := b.c.PutCalendar(ctx, cal); err != nil {
		t.Fatalf("putting it again: %v", err)
	}
	got, err := b.c.GetCalendar(ctx, testNamespace, "even-minutes")
	if err != nil || got.GetCalendar().GetDescription() != "no even minutes" || got.GetPutBy() != testPrincipal {
		t.Fatalf("GetCalendar: %v %v", got, err)
	}
	if listed, next, err := b.c.ListCalendars(ctx, testNamespace, "", 0); err != nil || len(listed) != 1 || next != "" {
		t.Fatalf("ListCalendars: %v %q %v", listed, next, err)
	}
	opts := reportOptions("")
	opts.Calendars = []string{"even-minutes"}
	h, err := b.c.Schedules(testNamespace).Create(ctx, "report", opts)
	if err != nil {
		t.Fatal(err)
	}
	d, err := h.Describe(ctx)
	if err != nil || len(d.NextFireTimes) == 0 || len(d.Options.Calendars) != 1 {
		t.Fatalf("described %+v (%v)", d, err)
	}
	for _, at := range d.NextFireTimes {
		if at.Minute()%2 == 0 {
			t.Fatalf("next fire times %v include an even minute", d.NextFireTimes)
		}
	}
	b.clock.Advance(time.Hour + 4*time.Minute)
	if _, err := b.tr.EmitDue(ctx); err != nil {
		t.Fatal(err)
	}
	if d, err = h.Describe(ctx); err != nil {
		t.Fatal(err)
	}
	excluded := 0
	for _, o := range d.LastOutcomes {
		even := o.NominalDue.Minute()%2 == 0
		if even != (o.Outcome == "excluded") || (even && !strings.Contains(o.Reason, `calendar "even-minutes"`)) {
			t.Fatalf("outcome %+v", o)
		}
		if even {
			excluded++
		}
	}
	if excluded == 0 {
		t.Fatalf("no instant ledgered excluded: %+v", d.LastOutcomes)
	}

	err = b.c.DeleteCalendar(ctx, testNamespace, "even-minutes")
	var pe *client.PartitionsError
	if !errors.As(err, &pe) || len(pe.Failed) != 1 || pe.Failed[0].Partition != d.Partition || !errors.Is(err, orrery.ErrValidation) ||
		!strings.Contains(err.Error(), d.ID) {
		t.Fatalf("deleting a referenced calendar: %v, want partition %d refusing, naming %s", err, d.Partition, d.ID)
	}
	if err := h.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.c.DeleteCalendar(ctx, testNamespace, "even-minutes"); err != nil {
		t.Fatalf("deleting it again once unreferenced: %v", err)
	}
	if _, err := b.c.GetCalendar(ctx, testNamespace, "even-minutes"); !errors.Is(err, orrery.ErrNotFound) {
		t.Fatalf("GetCalendar after the delete: %v, want NotFound", err)
	}
	opts.Calendars = []string{"missing"}
	var oe *orrery.Error
	if _, err := b.c.Schedules(testNamespace).Create(ctx, "other", opts); !errors.As(err, &oe) || oe.Code != orrery.CodeValidation || !strings.HasSuffix(oe.Field, "definition.calendars[0]") {
		t.Fatalf("a schedule naming a missing calendar: %v, want Validation on definition.calendars[0]", err)
	}
}

// TestPutCalendarNamesThePartitionsNotReached: a PutCalendar some partitions refuse fails with
// a PartitionsError naming them; calling it again completes it on every partition.
func TestPutCalendarNamesThePartitionsNotReached(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	b.tr.SetFaultHook(func(p int, req *orreryv1.CommandRequest) (clienttest.Fault, error) {
		if p == 2 && req.GetBatch().GetMutations()[0].GetPutCalendar() != nil {
			return clienttest.FaultFailBeforeApply, orrery.Errorf(orrery.CodeUnauthorized, "refused in this test")
		}
		return clienttest.FaultNone, nil
	})
	cal := &orreryv1.Calendar{Namespace: testNamespace, Name: "holidays", ExcludedDates: []string{"2026-12-25"}}
	err := b.c.PutCalendar(ctx, cal)
	var pe *client.PartitionsError
	if !errors.As(err, &pe) || len(pe.Failed) != 1 || pe.Failed[0].Partition != 2 || !strings.Contains(err.Error(), "put calendar") {
		t.Fatalf("PutCalendar with partition 2 refusing: %v", err)
	}
	b.tr.SetFaultHook(nil)
	if err := b.c.PutCalendar(ctx, cal); err != nil {
		t.Fatalf("PutCalendar again: %v", err)
	}
	// A calendar every partition refuses as invalid is that error alone: none applied it.
	bad := &orreryv1.Calendar{Namespace: testNamespace, Name: "bad", ExcludedDates: []string{"2026-02-30"}}
	err = b.c.PutCalendar(ctx, bad)
	var oe *orrery.Error
	if errors.As(err, &pe) || !errors.As(err, &oe) || oe.Code != orrery.CodeValidation || !strings.HasSuffix(oe.Field, "calendar.excluded_dates[0]") {
		t.Fatalf("an invalid calendar: %v, want Validation on excluded_dates[0] and no PartitionsError", err)
	}
	// A schedule on any partition can now name it.
	for i, key := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		opts := reportOptions("")
		opts.Key, opts.Calendars = key, []string{"holidays"}
		if _, err := b.c.Schedules(testNamespace).Create(ctx, "s"+key, opts); err != nil {
			t.Fatalf("schedule %d: %v", i, err)
		}
	}
}
