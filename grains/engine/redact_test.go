package engine

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/grants"
)

// canary is planted in every protected field; it must never reach a caller without read.
const canary = "CANARY-90e1"

// TestInspectionShowsOnlyWhatTheCallerMayRead: with a canary in a message's payload and
// headers, a schedule's template (and so its occurrence), a saga's state and its timeout's
// template, no inspection reply (schedule, saga, ledger, lane page, both lists) and no error
// shows the canary or the creator to a caller without read, and the redacted paths name what
// was withheld; a caller with read sees the canary but not the creator; the creator and a
// PolicyAdmin of the namespace see the creator.
func TestInspectionShowsOnlyWhatTheCallerMayRead(t *testing.T) {
	h := newHarness(t, nil)
	id := scheduleID(1)
	sagaID := scheduleID(2)
	secret := `{"card":"` + canary + `","n":1}`
	headers := `{"x-secret":"` + canary + `"}`
	sched := configure(id, t0.Add(time.Hour))
	sched.GetConfigureSchedule().Definition.Template = &orreryv1.MessageTemplate{PayloadJson: secret, HeadersJson: headers}
	msg := enqueue("m1", 0)
	msg.GetEnqueue().PayloadJson, msg.GetEnqueue().HeadersJson = secret, headers
	sg := &orreryv1.Mutation{Kind: &orreryv1.Mutation_CompareExchangeSaga{CompareExchangeSaga: &orreryv1.CompareExchangeSaga{
		Lane: lane, SagaId: sagaID, Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING, StateJson: secret,
		DeadlineUnixMicros: t0.Add(time.Hour).UnixMicro(),
		Timeout:            &orreryv1.SagaTimeout{Queue: "timeouts", Template: &orreryv1.MessageTemplate{PayloadJson: secret, HeadersJson: headers}}}}}
	trigger := &orreryv1.Mutation{Kind: &orreryv1.Mutation_TriggerSchedule{TriggerSchedule: &orreryv1.TriggerSchedule{Lane: lane, ScheduleId: id}}}
	out, err := h.applier.ApplyBatch(h.state.mem, "alice", batchOf("c1", sched, msg, sg, trigger), t0.UnixMicro())
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range out.Receipt.GetResults() {
		if err := orrery.FromProto(r.GetError()); err != nil {
			t.Fatalf("setup mutation %d: %v", i, err)
		}
	}

	ns, q := lane.GetNamespace(), lane.GetQueue()
	reads := map[string]*orreryv1.InspectRequest{
		"schedule":       {Target: &orreryv1.InspectRequest_Schedule{Schedule: &orreryv1.InspectSchedule{Lane: lane, ScheduleId: id}}},
		"saga":           {Target: &orreryv1.InspectRequest_Saga{Saga: &orreryv1.InspectSaga{Lane: lane, SagaId: sagaID}}},
		"ledger":         {Target: &orreryv1.InspectRequest_Ledger{Ledger: &orreryv1.InspectLedger{Lane: lane, ScheduleId: id}}},
		"lane":           {Target: &orreryv1.InspectRequest_Lane{Lane: &orreryv1.InspectLane{Lane: lane}}},
		"list schedules": {Target: &orreryv1.InspectRequest_ListSchedules{ListSchedules: &orreryv1.ListSchedules{Namespace: ns}}},
		"list sagas":     {Target: &orreryv1.InspectRequest_ListSagas{ListSagas: &orreryv1.ListSagas{Namespace: ns}}},
		// Denied or invalid reads: their errors carry nothing of the records either.
		"other queue lane":    {Target: &orreryv1.InspectRequest_Lane{Lane: &orreryv1.InspectLane{Lane: &orreryv1.Lane{Namespace: "beta", Queue: q, Key: lane.GetKey()}}}},
		"malformed schedule":  {Target: &orreryv1.InspectRequest_Schedule{Schedule: &orreryv1.InspectSchedule{Lane: lane, ScheduleId: canary}}},
		"partition status":    {Target: &orreryv1.InspectRequest_Partition{Partition: &orreryv1.InspectPartition{}}},
		"queue stats":         {Target: &orreryv1.InspectRequest_Queue{Queue: &orreryv1.InspectQueue{Namespace: ns, Queue: q}}},
		"timeout queue stats": {Target: &orreryv1.InspectRequest_Queue{Queue: &orreryv1.InspectQueue{Namespace: ns, Queue: "timeouts"}}},
	}
	put := func(principal string, rule *orreryv1.GrantRule) {
		t.Helper()
		if err := grants.ApplyPut(h.state.mem, HousekeepingPrincipal, &orreryv1.PutGrant{Principal: principal, Rules: []*orreryv1.GrantRule{rule}}); err != nil {
			t.Fatal(err)
		}
	}
	// inspectAll returns every reply principal gets, as JSON by read.
	inspectAll := func(principal string) map[string]*orreryv1.InspectReply {
		replies := map[string]*orreryv1.InspectReply{}
		for name, req := range reads {
			req.Principal = principal
			replies[name] = h.e.Inspect(h.now, req)
		}
		return replies
	}
	text := func(reply *orreryv1.InspectReply) string {
		b, err := protojson.Marshal(reply)
		if err != nil {
			t.Fatal(err)
		}
		if reply.GetError() != nil {
			return string(b) + orrery.FromProto(reply.GetError()).Error()
		}
		return string(b)
	}
	blindFields := []*orreryv1.FieldPolicy{{Path: "payload"}, {Path: "headers"}, {Path: "state"}}
	put("carol", &orreryv1.GrantRule{Namespace: ns, Capabilities: uint64(grants.QueueInspect), Fields: blindFields})
	put("dave", &orreryv1.GrantRule{Namespace: ns, Capabilities: uint64(grants.QueueInspect)})
	put("erin", &orreryv1.GrantRule{Namespace: ns, Capabilities: uint64(grants.QueueInspect | grants.PolicyAdmin), Fields: blindFields})

	carol := inspectAll("carol")
	for name, reply := range carol {
		if s := text(reply); strings.Contains(s, canary) || strings.Contains(s, "alice") {
			t.Errorf("%s shows carol the canary or the creator: %s", name, s)
		}
	}
	templatePaths := []string{"creator", "headers", "payload"}
	if got := carol["schedule"].GetSchedule().GetRedactedPaths(); !reflect.DeepEqual(got, templatePaths) {
		t.Errorf("schedule redacted %q, want %q", got, templatePaths)
	}
	if got := carol["schedule"].GetInspection().GetRecord().GetRedactedPaths(); !reflect.DeepEqual(got, templatePaths) {
		t.Errorf("inspection record redacted %q, want %q", got, templatePaths)
	}
	if got := carol["list schedules"].GetListedSchedules()[0].GetRecord().GetRedactedPaths(); !reflect.DeepEqual(got, templatePaths) {
		t.Errorf("listed schedule redacted %q, want %q", got, templatePaths)
	}
	sagaPaths := []string{"creator", "state", "timeout.headers", "timeout.payload"}
	if got := carol["saga"].GetSaga().GetRedactedPaths(); !reflect.DeepEqual(got, sagaPaths) {
		t.Errorf("saga redacted %q, want %q", got, sagaPaths)
	}
	if got := carol["list sagas"].GetListedSagas()[0].GetRedactedPaths(); !reflect.DeepEqual(got, sagaPaths) {
		t.Errorf("listed saga redacted %q, want %q", got, sagaPaths)
	}
	page := carol["lane"].GetMessages()
	if len(page) != 2 { // m1 and the manual occurrence
		t.Fatalf("carol's lane page %v", page)
	}
	for _, m := range page {
		if m.GetId() == "" || !reflect.DeepEqual(m.GetRedactedPaths(), []string{"headers", "payload"}) {
			t.Errorf("lane page message %s", m)
		}
	}
	if len(carol["ledger"].GetLedger()) != 1 {
		t.Errorf("carol's ledger %v", carol["ledger"])
	}

	// dave may read every field but is not the creator: the canary, no creator.
	for name, reply := range inspectAll("dave") {
		s := text(reply)
		if strings.Contains(s, "alice") {
			t.Errorf("%s shows dave the creator: %s", name, s)
		}
		if (name == "schedule" || name == "saga" || name == "lane" || strings.HasPrefix(name, "list")) && !strings.Contains(s, canary) {
			t.Errorf("%s hides the canary from dave, who may read it: %s", name, s)
		}
	}
	// erin administers the namespace's grants: the creator, but no canary; alice sees both.
	if s := text(inspectAll("erin")["saga"]); !strings.Contains(s, `"creator":"alice"`) || strings.Contains(s, canary) {
		t.Errorf("erin's saga %s", s)
	}
	if rec := inspectAll("alice")["schedule"].GetSchedule(); rec.GetCreator() != "alice" || !strings.Contains(rec.GetDefinition().GetTemplate().GetPayloadJson(), canary) || len(rec.GetRedactedPaths()) != 0 {
		t.Errorf("the creator's own schedule %s", rec)
	}
}
