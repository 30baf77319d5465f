package batch

import (
	"errors"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/schedule"
)

func putCalendarMutation(c *orreryv1.Calendar) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_PutCalendar{PutCalendar: &orreryv1.PutCalendar{Calendar: c}}}
}

// TestCalendarsThroughTheBatchPath: at apply version 17 a PutCalendar in a zone and a schedule
// referencing it apply in one batch, the zone's rules coming from the entry (a replica given
// none refuses the zone, whatever its own zone database holds); an emit ledgers the excluded
// instant EXCLUDED; the referenced calendar's delete is refused, and the whole batch of a put
// and a configure naming a missing calendar writes nothing.
func TestCalendarsThroughTheBatchPath(t *testing.T) {
	v := granted(t)
	a := applier()
	a.ApplyVersion = ApplyVersionCalendars
	calendar := &orreryv1.Calendar{Namespace: lane.GetNamespace(), Name: "holidays", TimeZone: "America/New_York", ExcludedDates: []string{"2026-01-01"}}
	configure := withCalendars(configureMutation(everySpec(t0+hour, hour), 0), "holidays")
	b := &orreryv1.Batch{CommandId: "no-rules", AllOrNothing: true, Mutations: []*orreryv1.Mutation{putCalendarMutation(calendar)}}
	out, err := a.ApplyBatch(v, "alice", b, t0)
	if err != nil || !strings.Contains(orrery.FromProto(out.Receipt.GetError()).Error(), "time_zone") {
		t.Fatalf("a put whose entry carries no rules of its zone: %v %v, want refused on its time_zone", out, err)
	}
	b = &orreryv1.Batch{CommandId: "put", AllOrNothing: true, Mutations: []*orreryv1.Mutation{putCalendarMutation(calendar), configure}}
	out, err = a.AsLeader(b).ApplyBatch(v, "alice", b, t0)
	if err != nil || out.Receipt.GetError() != nil {
		t.Fatalf("put and configure: %v %v", out, err)
	}
	if r := out.Receipt.GetResults()[0].GetCalendar(); !r.GetChanged() || r.GetCalendar().GetPutBy() != "alice" {
		t.Fatalf("put result %v", r)
	}
	if _, found, _ := v.Get(keys.ZoneRulesKey("America/New_York")); !found {
		t.Fatal("the put did not keep its zone's rules")
	}
	// 01:00Z on 2026-01-01 is 2025-12-31 in New York; 05:00Z is its 2026-01-01.
	emit := &orreryv1.Batch{CommandId: "emit", Mutations: []*orreryv1.Mutation{emitMutation(1)}}
	for now := t0 + hour; now <= t0+6*hour; now += hour {
		emit.CommandId = "emit-" + schedule.OccurrenceID(scheduleID, 1, uint64(now))
		if _, err := a.ApplyDue(v, systemTest, emit, now); err != nil {
			t.Fatal(err)
		}
	}
	entries, _, err := schedule.ReadLedger(v, lane, scheduleID, schedule.LedgerQuery{ToMicros: t0 + 10*hour, MaxRecords: 100})
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[int64]orreryv1.LedgerOutcome{}
	for _, e := range entries {
		outcomes[e.GetNominalDueAtUnixMicros()] = e.GetOutcome()
	}
	if outcomes[t0+4*hour] != orreryv1.LedgerOutcome_LEDGER_OUTCOME_ENQUEUED || outcomes[t0+5*hour] != orreryv1.LedgerOutcome_LEDGER_OUTCOME_EXCLUDED ||
		outcomes[t0+6*hour] != orreryv1.LedgerOutcome_LEDGER_OUTCOME_EXCLUDED {
		t.Fatalf("ledger %v, want 04:00Z enqueued and 05:00Z, 06:00Z (New York's 2026-01-01) excluded", outcomes)
	}
	del := &orreryv1.Batch{CommandId: "delete", Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_DeleteCalendar{
		DeleteCalendar: &orreryv1.DeleteCalendar{Namespace: lane.GetNamespace(), Name: "holidays"}}}}}
	out, err = a.ApplyBatch(v, "alice", del, t0)
	if err != nil || !errors.Is(resultErr(out.Receipt.GetResults()[0]), orrery.ErrValidation) ||
		!strings.Contains(resultErr(out.Receipt.GetResults()[0]).Error(), scheduleID) {
		t.Fatalf("delete of a referenced calendar: %v %v", out, err)
	}
	missing := withCalendars(configureMutation(everySpec(t0+hour, hour), 0), "nope")
	missing.GetConfigureSchedule().GetDefinition().ScheduleId = newSchedID
	other := &orreryv1.Calendar{Namespace: lane.GetNamespace(), Name: "other"}
	b = &orreryv1.Batch{CommandId: "missing", AllOrNothing: true, Mutations: []*orreryv1.Mutation{putCalendarMutation(other), missing}}
	before := v.Clone()
	out, err = a.AsLeader(b).ApplyBatch(v, "alice", b, t0)
	if e := orrery.FromProto(out.Receipt.GetError()); err != nil || !errors.Is(e, orrery.ErrValidation) ||
		orrery.AsError(e).Field != "mutations[1].configure_schedule.definition.calendars[0]" {
		t.Fatalf("a configure naming a missing calendar: %v %v", out, err)
	}
	if state(t, v) != state(t, before) {
		t.Fatal("the refused batch wrote")
	}
}
