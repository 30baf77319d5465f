package batch

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/audit"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// auditTrail is every audit record of v, oldest first.
func auditTrail(t fataler, v kv.Reader) []*orreryv1.AuditRecord {
	t.Helper()
	var all []*orreryv1.AuditRecord
	var after []byte
	for {
		page, next, err := audit.Read(v, &orreryv1.ReadAudit{MaxRecords: audit.MaxReadRecords, After: after})
		if err != nil {
			t.Fatalf("read the audit log: %v", err)
		}
		all = append(all, page...)
		if next == nil {
			return all
		}
		after = next
	}
}

// requireDenialAudited requires that v holds exactly one audit record more than before: the
// denial of a kind mutation, sent by principal as commandID at now, with denial's message.
func requireDenialAudited(t fataler, v kv.Reader, before int, principal, commandID string, now int64, kind string, denial error) {
	t.Helper()
	trail := auditTrail(t, v)
	if len(trail) != before+1 {
		t.Fatalf("a denied %s left %d audit records, want 1", kind, len(trail)-before)
	}
	var rec *orreryv1.AuditRecord
	for _, r := range trail {
		if r.GetCommandId() == commandID && r.GetPrincipal() == principal {
			rec = r
		}
	}
	if rec == nil || rec.GetKind() != orreryv1.AuditKind_AUDIT_KIND_DENIED || rec.GetLoggedTimeUnixMicros() != now ||
		rec.GetMutation() != kind || rec.GetMessage() != orrery.AsError(denial).Message {
		t.Fatalf("the audit record of a denied %s by %s at %d is %v (denial %v)", kind, principal, now, rec, denial)
	}
}

func TestGrantChangesAreAudited(t *testing.T) {
	v := kv.NewMemory()
	putGrant(t, v, "admin", &orreryv1.GrantRule{Namespace: grants.AnyNamespace, Capabilities: uint64(grants.PolicyAdmin)})
	put := mutationOf(&orreryv1.PutGrant{Principal: "dave", Rules: []*orreryv1.GrantRule{
		{Namespace: "acme", Queue: "jobs", Capabilities: uint64(grants.QueueConsume | grants.QueuePublish), Fields: []*orreryv1.FieldPolicy{{Path: "payload.secret"}}}}})
	out, err := applier().ApplyBatch(v, "admin", &orreryv1.Batch{CommandId: "g1", Mutations: []*orreryv1.Mutation{put}}, t0)
	if err != nil || out.Receipt.GetResults()[0].GetError() != nil {
		t.Fatal(err, out.Receipt)
	}
	del := mutationOf(&orreryv1.DeleteGrant{Principal: "dave"})
	if _, err := applier().ApplyBatch(v, "admin", &orreryv1.Batch{CommandId: "g2", Mutations: []*orreryv1.Mutation{enqueueMutation("m1"), del}}, t0+sec); err != nil {
		t.Fatal(err)
	}
	trail := auditTrail(t, v)
	if len(trail) != 3 {
		t.Fatalf("audit log %v, want the put, the enqueue's denial and the delete", trail)
	}
	want := []struct {
		kind             orreryv1.AuditKind
		command          string
		sequence         uint32
		at               int64
		mutation         string
		oldRules, target string
		newRules         string
	}{
		{orreryv1.AuditKind_AUDIT_KIND_GRANT_PUT, "g1", 0, t0, "put_grant", "none", "dave", "acme/jobs:QueuePublish|QueueConsume (1 field policies)"},
		{orreryv1.AuditKind_AUDIT_KIND_DENIED, "g2", 0, t0 + sec, "enqueue", "", "", ""},
		{orreryv1.AuditKind_AUDIT_KIND_GRANT_DELETE, "g2", 1, t0 + sec, "delete_grant", "acme/jobs:QueuePublish|QueueConsume (1 field policies)", "dave", "none"},
	}
	for i, w := range want {
		r := trail[i]
		if r.GetKind() != w.kind || r.GetCommandId() != w.command || r.GetSequence() != w.sequence || r.GetPrincipal() != "admin" ||
			r.GetLoggedTimeUnixMicros() != w.at || r.GetMutation() != w.mutation || r.GetTargetPrincipal() != w.target ||
			r.GetOldRules() != w.oldRules || r.GetNewRules() != w.newRules {
			t.Errorf("audit record %d: %v, want %+v", i, r, w)
		}
	}
	if d := trail[1]; d.GetNamespace() != lane.GetNamespace() || d.GetQueue() != lane.GetQueue() || d.GetMutationIndex() != 0 ||
		!strings.Contains(d.GetMessage(), "lacks QueuePublish") {
		t.Errorf("the denial's record %v does not say where and what", d)
	}
	if trail[2].GetMutationIndex() != 1 {
		t.Errorf("the delete's mutation index is %d, want 1", trail[2].GetMutationIndex())
	}
}

func TestDenialInARolledBackBatchIsAudited(t *testing.T) {
	v := kv.NewMemory()
	putGrant(t, v, carol, &orreryv1.GrantRule{Namespace: grants.AnyNamespace, Capabilities: uint64(grants.PolicyAdmin)})
	const canary = "canary-4111-1111"
	enqueue := enqueueMutation("m1")
	enqueue.GetEnqueue().PayloadJson = `{"card":"` + canary + `"}`
	b := &orreryv1.Batch{CommandId: "rollback", AllOrNothing: true, Mutations: []*orreryv1.Mutation{
		mutationOf(&orreryv1.PutGrant{Principal: "dave", Rules: []*orreryv1.GrantRule{{Namespace: "acme", Capabilities: uint64(grants.QueueInspect)}}}),
		enqueue,
	}}
	out, err := applier().ApplyBatch(v, carol, b, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got := orrery.FromProto(out.Receipt.GetError()); orrery.CodeOf(got) != orrery.CodeUnauthorized {
		t.Fatalf("the batch's error is %v, want Unauthorized", got)
	}
	if g, err := grants.Load(v, "dave"); err != nil || g != nil {
		t.Fatalf("the rolled-back put left dave's grant %v (%v)", g, err)
	}
	trail := auditTrail(t, v)
	if len(trail) != 1 {
		t.Fatalf("audit log %v, want only the enqueue's denial", trail)
	}
	r := trail[0]
	if r.GetKind() != orreryv1.AuditKind_AUDIT_KIND_DENIED || r.GetPrincipal() != carol || r.GetCommandId() != "rollback" ||
		r.GetLoggedTimeUnixMicros() != t0 || r.GetMutation() != "enqueue" || r.GetMutationIndex() != 1 || r.GetSequence() != 0 {
		t.Fatalf("the denial's record is %v", r)
	}
	if strings.Contains(r.String(), canary) {
		t.Fatalf("the audit record %v carries the payload", r)
	}
	// The replay (refused: carol still lacks QueuePublish) stores nothing more.
	if _, err := applier().ApplyBatch(v, carol, b, t0+sec); orrery.CodeOf(err) != orrery.CodeUnauthorized {
		t.Fatalf("the replay: %v, want Unauthorized", err)
	}
	if n := len(auditTrail(t, v)); n != 1 {
		t.Fatalf("a replay left %d audit records, want 1", n)
	}
}

func TestHousekeepingRemovesExpiredAuditRecords(t *testing.T) {
	a := applier()
	v := granted(t)
	deny := func(id string, at int64) {
		t.Helper()
		if _, err := a.ApplyBatch(v, carol, &orreryv1.Batch{CommandId: id, Mutations: []*orreryv1.Mutation{enqueueMutation(id)}}, at); err != nil {
			t.Fatal(err)
		}
	}
	retention := a.Limits.AuditRetentionMicros
	if retention != 30*input.Day {
		t.Fatalf("the default audit retention is %d µs, want 30 days", retention)
	}
	deny("old1", t0)
	deny("old2", t0)
	deny("young", t0+2*input.Day)
	now := t0 + retention + input.Day
	res := housekeep(t, a, v, "h0", 1000, now)
	if res.GetAuditRecordsRemoved() != 2 || res.GetMore() {
		t.Fatalf("housekeeping past the retention of two records: %v", res)
	}
	due, err := a.HousekeepingDue(v, now)
	if err != nil || due {
		t.Fatalf("after housekeeping, due %v (%v)", due, err)
	}
	trail := auditTrail(t, v)
	if len(trail) != 1 || trail[0].GetCommandId() != "young" {
		t.Fatalf("after housekeeping the audit log is %v, want the young record only", trail)
	}

	// Bounded steps: a Housekeep of one record removes one at a time.
	deny("late1", now)
	deny("late2", now)
	later := now + retention + sec
	if due, err := a.HousekeepingDue(v, later); err != nil || !due {
		t.Fatalf("expired audit records: housekeeping due %v (%v), want due", due, err)
	}
	removed := uint32(0)
	for step := 0; ; step++ {
		r := housekeep(t, a, v, fmt.Sprint("step", step), 1, later)
		if r.GetAuditRecordsRemoved() > 1 || r.GetAuditRecordsRemoved()+r.GetReceiptsRemoved()+r.GetTombstonesRemoved()+r.GetLedgerRecordsRemoved() > 1 {
			t.Fatalf("a Housekeep of at most 1 record: %v", r)
		}
		removed += r.GetAuditRecordsRemoved()
		if !r.GetMore() {
			break
		}
		if step > 20 {
			t.Fatal("housekeeping does not finish")
		}
	}
	if removed != 3 || len(auditTrail(t, v)) != 0 {
		t.Fatalf("stepped housekeeping removed %d audit records, left %v; want 3 and none", removed, auditTrail(t, v))
	}
}

// TestAGrantChangeThatChangesNothingIsNotAudited: putting a grant exactly as it stands, or
// deleting one that is absent, writes no audit record (a development silo puts its grants at
// every start, which wrote one record per partition and grant each time).
func TestAGrantChangeThatChangesNothingIsNotAudited(t *testing.T) {
	v := kv.NewMemory()
	putGrant(t, v, "admin", &orreryv1.GrantRule{Namespace: grants.AnyNamespace, Capabilities: uint64(grants.PolicyAdmin)})
	put := mutationOf(&orreryv1.PutGrant{Principal: "dave", Rules: []*orreryv1.GrantRule{{Namespace: "acme", Capabilities: uint64(grants.QueueConsume)}}})
	for i, cmd := range []string{"p1", "p2", "p3"} {
		if _, err := applier().ApplyBatch(v, "admin", &orreryv1.Batch{CommandId: cmd, Mutations: []*orreryv1.Mutation{put}}, t0+int64(i)*sec); err != nil {
			t.Fatal(err)
		}
	}
	absent := mutationOf(&orreryv1.DeleteGrant{Principal: "erin"})
	if _, err := applier().ApplyBatch(v, "admin", &orreryv1.Batch{CommandId: "d1", Mutations: []*orreryv1.Mutation{absent}}, t0+5*sec); err != nil {
		t.Fatal(err)
	}
	if trail := auditTrail(t, v); len(trail) != 1 || trail[0].GetCommandId() != "p1" || trail[0].GetKind() != orreryv1.AuditKind_AUDIT_KIND_GRANT_PUT {
		t.Fatalf("audit log %v, want only the first put", trail)
	}
}

// TestAPrincipalWithoutGrantsCannotGrowTheAuditLogFromApplyVersion16: from
// ApplyVersionAuditBound, the same denial sent over and over within a minute is one record
// counting its repeats; before it, every denial is a record of its own.
func TestAPrincipalWithoutGrantsCannotGrowTheAuditLogFromApplyVersion16(t *testing.T) {
	for _, version := range []uint32{ApplyVersionAuditBound - 1, ApplyVersionAuditBound} {
		v := granted(t)
		a := applier()
		a.ApplyVersion = version
		for i := range 50 {
			b := &orreryv1.Batch{CommandId: fmt.Sprint("flood-", i), Mutations: []*orreryv1.Mutation{enqueueMutation(fmt.Sprint("m", i))}}
			out, err := a.ApplyBatch(v, "mallory", b, t0+int64(i)*sec/10)
			if err != nil || !errors.Is(resultErr(out.Receipt.GetResults()[0]), orrery.ErrUnauthorized) {
				t.Fatalf("mallory's enqueue: %v %v, want Unauthorized", err, out)
			}
		}
		trail := auditTrail(t, v)
		switch {
		case version < ApplyVersionAuditBound && len(trail) != 50:
			t.Fatalf("apply version %d: %d audit records, want 50", version, len(trail))
		case version >= ApplyVersionAuditBound && (len(trail) != 1 || trail[0].GetRepeats() != 49):
			t.Fatalf("apply version %d: %d audit records (%v), want 1 with 49 repeats", version, len(trail), trail)
		}
	}
}
