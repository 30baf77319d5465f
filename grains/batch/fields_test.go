package batch

import (
	"testing"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/kv"
)

// TestFieldPoliciesInApply: a caller's write policies bound the fields it enqueues,
// configures and exchanges; a creator's use policies bound what its schedule's emission
// carries; a creator's write policies bound what another caller writes into its saga.
// Denials leave the state as it was.
func TestFieldPoliciesInApply(t *testing.T) {
	w := &creatorWorld{t: t, v: kv.NewMemory()}
	ns := lane.GetNamespace()
	caps := uint64(grants.SchedulerManage | grants.SagaManage | grants.QueuePublish)
	card := &orreryv1.FieldPolicy{Path: "payload.card.number", Use: true} // write: no
	ssn := &orreryv1.FieldPolicy{Path: "state.ssn"}                       // write: no
	putGrant(t, w.v, "bob", &orreryv1.GrantRule{Namespace: ns, Capabilities: caps, Fields: []*orreryv1.FieldPolicy{card, ssn}})
	putGrant(t, w.v, "alice", &orreryv1.GrantRule{Namespace: ns, Capabilities: caps})

	enqueue := func(id, payload string) *orreryv1.Mutation {
		m := enqueueMutation(id)
		m.GetEnqueue().PayloadJson = payload
		return m
	}
	w.denied("bob", t0, enqueue("m1", `{"card":{"number":"4111"}}`), "lacks write on a protected field of payload")
	w.ok("bob", t0, enqueue("m2", `{"card":{"exp":"12/30"}}`))
	cardTemplate := configureMutation(everySpec(t0+hour, hour), 0)
	cardTemplate.GetConfigureSchedule().Definition.Template.PayloadJson = `{"card":{"number":"4111"}}`
	w.denied("bob", t0, cardTemplate, "lacks write on a protected field of payload")
	w.ok("alice", t0, cardTemplate)

	// Alice may still write the card number but no longer use it: her schedule emits nothing.
	putGrant(t, w.v, "alice", &orreryv1.GrantRule{Namespace: ns, Capabilities: caps,
		Fields: []*orreryv1.FieldPolicy{{Path: "payload.card", Write: true}}})
	w.denied(systemTest, t0+hour, emitMutation(1), "the creator of the schedule lacks use on a protected field of payload")
	putGrant(t, w.v, "alice", &orreryv1.GrantRule{Namespace: ns, Capabilities: caps,
		Fields: []*orreryv1.FieldPolicy{{Path: "payload.card", Write: true, Use: true}}})
	if ids := w.ok(systemTest, t0+hour, emitMutation(1)).GetSchedule().GetEnqueuedIds(); len(ids) != 1 {
		t.Fatalf("emit once use is restored: %v", ids)
	}

	// Bob may not write state.ssn; carol may, into alice's saga only while alice may too.
	w.ok("alice", t0, mutationOf(sagaMutation(sagaID, 0, t0+3*hour)))
	putGrant(t, w.v, "carol", &orreryv1.GrantRule{Namespace: ns, Capabilities: caps})
	update := sagaMutation(sagaID, 1, t0+3*hour)
	update.StateJson = `{"ssn":"078-05-1120"}`
	w.denied("bob", t0+1, mutationOf(update), `caller "bob" lacks write on a protected field of state`)
	putGrant(t, w.v, "alice", &orreryv1.GrantRule{Namespace: ns, Capabilities: caps, Fields: []*orreryv1.FieldPolicy{ssn}})
	w.denied("carol", t0+1, mutationOf(update), "the creator of the saga lacks write on a protected field of state")
	putGrant(t, w.v, "alice", &orreryv1.GrantRule{Namespace: ns, Capabilities: caps})
	if r := w.ok("carol", t0+1, mutationOf(update)).GetSaga(); r.GetRevision() != 2 {
		t.Fatalf("carol's update once alice may write the field: %v", r)
	}
}
