package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
)

// TestInspectionNeedsQueueInspect: every read of records (schedule, saga, ledger, lane page,
// lists) is denied Unauthorized to a principal without QueueInspect where it reads, and
// answered once it holds it; a queue-scoped grant covers that queue's reads but not a list of
// the whole namespace. Partition status needs no grant.
func TestInspectionNeedsQueueInspect(t *testing.T) {
	h := newHarness(t, nil)
	h.command("alice", request("c1", enqueue("m1", 0)))
	h.commit()
	ns, q := lane.GetNamespace(), lane.GetQueue()
	reads := map[string]*orreryv1.InspectRequest{
		"schedule":       {Target: &orreryv1.InspectRequest_Schedule{Schedule: &orreryv1.InspectSchedule{Lane: lane, ScheduleId: "0f8fad5b-d9cb-469f-a165-70867728950e"}}},
		"saga":           {Target: &orreryv1.InspectRequest_Saga{Saga: &orreryv1.InspectSaga{Lane: lane, SagaId: "0f8fad5b-d9cb-469f-a165-70867728950e"}}},
		"ledger":         {Target: &orreryv1.InspectRequest_Ledger{Ledger: &orreryv1.InspectLedger{Lane: lane, ScheduleId: "0f8fad5b-d9cb-469f-a165-70867728950e"}}},
		"lane":           {Target: &orreryv1.InspectRequest_Lane{Lane: &orreryv1.InspectLane{Lane: lane}}},
		"list schedules": {Target: &orreryv1.InspectRequest_ListSchedules{ListSchedules: &orreryv1.ListSchedules{Namespace: ns, Queue: q}}},
		"list sagas":     {Target: &orreryv1.InspectRequest_ListSagas{ListSagas: &orreryv1.ListSagas{Namespace: ns, Queue: q}}},
		"queue stats":    {Target: &orreryv1.InspectRequest_Queue{Queue: &orreryv1.InspectQueue{Namespace: ns, Queue: q}}},
	}
	put := func(rules ...*orreryv1.GrantRule) {
		t.Helper()
		if err := grants.ApplyPut(h.state.mem, HousekeepingPrincipal, &orreryv1.PutGrant{Principal: "carol", Rules: rules}); err != nil {
			t.Fatal(err)
		}
	}
	inspect := func(req *orreryv1.InspectRequest) error {
		req.Principal = "carol"
		return orrery.FromProto(h.e.Inspect(h.now, req).GetError())
	}
	put(&orreryv1.GrantRule{Namespace: grants.AnyNamespace, Capabilities: uint64(grants.All &^ grants.QueueInspect)})
	for name, req := range reads {
		if err := inspect(req); !errors.Is(err, orrery.ErrUnauthorized) {
			t.Errorf("%s without QueueInspect: %v, want Unauthorized", name, err)
		}
	}
	if err := inspect(&orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Partition{Partition: &orreryv1.InspectPartition{}}}); err != nil {
		t.Errorf("partition status: %v", err)
	}
	put(&orreryv1.GrantRule{Namespace: ns, Queue: q, Capabilities: uint64(grants.QueueInspect)})
	for name, req := range reads {
		if err := inspect(req); err != nil {
			t.Errorf("%s with QueueInspect on its queue: %v", name, err)
		}
	}
	if reply := h.e.Inspect(h.now, reads["lane"]); len(reply.GetMessages()) != 1 {
		t.Errorf("lane page %v, want m1", reply)
	}
	whole := &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_ListSchedules{ListSchedules: &orreryv1.ListSchedules{Namespace: ns}}}
	if err := inspect(whole); !errors.Is(err, orrery.ErrUnauthorized) {
		t.Errorf("a namespace list with a queue's grant: %v, want Unauthorized", err)
	}
	everyQueue := &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_ListQueues{ListQueues: &orreryv1.ListQueues{}}}
	put(&orreryv1.GrantRule{Namespace: ns, Capabilities: uint64(grants.QueueInspect)})
	if err := inspect(everyQueue); !errors.Is(err, orrery.ErrUnauthorized) {
		t.Errorf("the partition's queues with one namespace's grant: %v, want Unauthorized", err)
	}
	put(&orreryv1.GrantRule{Namespace: grants.AnyNamespace, Capabilities: uint64(grants.QueueInspect)})
	if err := inspect(everyQueue); err != nil {
		t.Errorf("the partition's queues with QueueInspect on every namespace: %v", err)
	}
}

// TestALongPollNeedsQueueConsume: a waiting receive of a principal without QueueConsume on its
// queue is answered Unauthorized at once, without waiting and without telling whether a
// message is visible.
func TestALongPollNeedsQueueConsume(t *testing.T) {
	h := newHarness(t, nil)
	h.command("a", request("c1", enqueue("m1", 0)))
	h.commit()
	req := longPoll("r1", 10*time.Second)
	req.Principal = "carol"
	h.command("w", req)
	w := h.answers("w")
	if len(w) != 1 || len(w[0].GetReceipt()) != 0 || !errors.Is(orrery.FromProto(w[0].GetError()), orrery.ErrUnauthorized) || len(h.log) != 0 {
		t.Fatalf("a waiting receive without QueueConsume: %v, %d entries", w, len(h.log))
	}
}

// TestTheAuditLogIsReadByAPolicyAdminOnEveryNamespace: a denied command leaves its record,
// which only a principal holding PolicyAdmin on "*" may read; every other capability, or
// PolicyAdmin on one namespace, is refused Unauthorized.
func TestTheAuditLogIsReadByAPolicyAdminOnEveryNamespace(t *testing.T) {
	h := newHarness(t, nil)
	denied := request("c1", enqueue("m1", 0))
	denied.Principal = "mallory"
	h.command("mallory", denied)
	h.commit()
	put := func(rules ...*orreryv1.GrantRule) {
		t.Helper()
		if err := grants.ApplyPut(h.state.mem, HousekeepingPrincipal, &orreryv1.PutGrant{Principal: "carol", Rules: rules}); err != nil {
			t.Fatal(err)
		}
	}
	read := func() *orreryv1.InspectReply {
		return h.e.Inspect(h.now, &orreryv1.InspectRequest{Principal: "carol", Target: &orreryv1.InspectRequest_Audit{Audit: &orreryv1.ReadAudit{}}})
	}
	put(&orreryv1.GrantRule{Namespace: grants.AnyNamespace, Capabilities: uint64(grants.All &^ grants.PolicyAdmin)})
	if err := orrery.FromProto(read().GetError()); !errors.Is(err, orrery.ErrUnauthorized) {
		t.Fatalf("every capability but PolicyAdmin: %v, want Unauthorized", err)
	}
	put(&orreryv1.GrantRule{Namespace: lane.GetNamespace(), Capabilities: uint64(grants.PolicyAdmin)})
	if err := orrery.FromProto(read().GetError()); !errors.Is(err, orrery.ErrUnauthorized) {
		t.Fatalf("PolicyAdmin on one namespace: %v, want Unauthorized", err)
	}
	put(&orreryv1.GrantRule{Namespace: grants.AnyNamespace, Capabilities: uint64(grants.PolicyAdmin)})
	reply := read()
	if reply.GetError() != nil || len(reply.GetAuditRecords()) != 1 {
		t.Fatalf("PolicyAdmin on every namespace: %v", reply)
	}
	if r := reply.GetAuditRecords()[0]; r.GetPrincipal() != "mallory" || r.GetCommandId() != "c1" || r.GetKind() != orreryv1.AuditKind_AUDIT_KIND_DENIED ||
		r.GetMutation() != "enqueue" || r.GetLoggedTimeUnixMicros() == 0 {
		t.Fatalf("the denial's record: %v", r)
	}
}

// TestInspectScheduleByNameReadsTheNamesCurrentIdentity: a schedule read by name (no id) reads
// the name's current identity and answers which id it read: the name's first while none was
// deleted, live or not; after its schedule is deleted, the next (not found, not deleted),
// while the deleted id read by id is answered deleted. A bad name is a Validation on name.
func TestInspectScheduleByNameReadsTheNamesCurrentIdentity(t *testing.T) {
	h := newHarness(t, nil)
	byName := func(name string) *orreryv1.InspectReply {
		return h.e.Inspect(h.now, &orreryv1.InspectRequest{Principal: "alice",
			Target: &orreryv1.InspectRequest_Schedule{Schedule: &orreryv1.InspectSchedule{Lane: lane, Name: name}}})
	}
	apply := func(id string, m *orreryv1.Mutation) {
		t.Helper()
		out, err := h.applier.ApplyBatch(h.state.mem, "alice", batchOf(id, m), t0.UnixMicro())
		if err != nil || orrery.FromProto(out.Receipt.GetResults()[0].GetError()) != nil {
			t.Fatalf("%s: %v %v", id, err, out.Receipt)
		}
	}
	first := input.ScheduleIDFromName(lane.GetNamespace(), "nightly")
	if r := byName("nightly"); r.GetError() != nil || r.GetFound() || r.GetDeleted() || r.GetScheduleId() != first {
		t.Fatalf("an unused name: %v", r)
	}
	create := configure(first, t0.Add(time.Hour))
	create.GetConfigureSchedule().Definition.Name = "nightly"
	apply("c1", create)
	if r := byName("nightly"); !r.GetFound() || r.GetScheduleId() != first || r.GetInspection().GetRecord().GetDefinition().GetName() != "nightly" {
		t.Fatalf("a live name: %v", r)
	}
	apply("c2", &orreryv1.Mutation{Kind: &orreryv1.Mutation_DeleteSchedule{DeleteSchedule: &orreryv1.DeleteSchedule{Lane: lane, ScheduleId: first, AnyRevision: true}}})
	byID := h.e.Inspect(h.now, &orreryv1.InspectRequest{Principal: "alice",
		Target: &orreryv1.InspectRequest_Schedule{Schedule: &orreryv1.InspectSchedule{Lane: lane, ScheduleId: first}}})
	if byID.GetFound() || !byID.GetDeleted() || byID.GetScheduleId() != first {
		t.Fatalf("the deleted id: %v", byID)
	}
	second := input.ScheduleIDFromNameIncarnation(lane.GetNamespace(), "nightly", 2)
	if r := byName("nightly"); r.GetError() != nil || r.GetFound() || r.GetDeleted() || r.GetScheduleId() != second {
		t.Fatalf("a deleted name: %v, want its second identity %s", r, second)
	}
	if err := orrery.AsError(orrery.FromProto(byName("a\x00b").GetError())); err == nil || err.Code != orrery.CodeValidation || err.Field != "name" {
		t.Fatalf("a bad name: %v", err)
	}
}
