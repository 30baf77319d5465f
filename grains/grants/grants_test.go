package grants

import (
	"errors"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// TestCapabilityNumbersAreFrozen: the bits of the capabilities are part of the stored grants
// and the wire; renumbering one would change what every stored grant means.
func TestCapabilityNumbersAreFrozen(t *testing.T) {
	frozen := map[Capability]uint64{
		SchedulerManage: 1, SagaManage: 2, QueuePublish: 4, QueueConsume: 8, QueueInspect: 16, PolicyAdmin: 32,
	}
	var all Capability
	for c, bit := range frozen {
		if uint64(c) != bit {
			t.Errorf("%s = %d, frozen at %d", c, uint64(c), bit)
		}
		if named, ok := Named(c.String()); !ok || named != c {
			t.Errorf("Named(%q) = %v, %v", c.String(), named, ok)
		}
		all |= c
	}
	if all != All {
		t.Errorf("All = %#x, want %#x", uint64(All), uint64(all))
	}
	if got := (QueuePublish | 1<<40).String(); got != "QueuePublish|bit40" {
		t.Errorf("String = %q", got)
	}
}

func rule(namespace, queue string, caps Capability) *orreryv1.GrantRule {
	return &orreryv1.GrantRule{Namespace: namespace, Queue: queue, Capabilities: uint64(caps)}
}

func TestHoldsMatchesNamespaceQueueAndBit(t *testing.T) {
	grant := &orreryv1.GrantRecord{Rules: []*orreryv1.GrantRule{
		rule("acme", "", QueuePublish),
		rule("beta", "jobs", QueueConsume),
		rule(AnyNamespace, "", QueueInspect),
	}}
	cases := []struct {
		capability       Capability
		namespace, queue string
		want             bool
	}{
		{QueuePublish, "acme", "any", true},
		{QueuePublish, "acme", "", true},
		{QueuePublish, "acmex", "any", false},
		{QueueConsume, "acme", "any", false},
		{QueueConsume, "beta", "jobs", true},
		{QueueConsume, "beta", "jobs$dlq", true},
		{QueueConsume, "beta", "other", false},
		{QueueConsume, "beta", "", false}, // a queue rule does not cover the whole namespace
		{QueueInspect, "anything", "q", true},
		{QueueInspect | QueuePublish, "acme", "q", false}, // one rule must hold every bit asked
		{PolicyAdmin, "acme", "", false},
	}
	for _, c := range cases {
		if got := Holds(grant, c.capability, c.namespace, c.queue); got != c.want {
			t.Errorf("Holds(%s, %q, %q) = %v, want %v", c.capability, c.namespace, c.queue, got, c.want)
		}
	}
	if Holds(nil, QueueInspect, "acme", "q") {
		t.Error("no grant holds something")
	}
	everything := Everything("anonymous")
	for _, c := range []Capability{SchedulerManage, SagaManage, QueuePublish, QueueConsume, QueueInspect, PolicyAdmin} {
		if !Holds(&orreryv1.GrantRecord{Rules: everything.GetRules()}, c, "ns", "q") {
			t.Errorf("Everything lacks %s", c)
		}
	}
}

func TestDeniedNamesCapabilityAndPlaceOnly(t *testing.T) {
	err := RequireOf(nil, Caller("bob"), SchedulerManage, "acme", "jobs")
	if !errors.Is(err, orrery.ErrUnauthorized) {
		t.Fatalf("%v, want Unauthorized", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "SchedulerManage") || !strings.Contains(msg, `"acme"`) || !strings.Contains(msg, `"jobs"`) || !strings.Contains(msg, `"bob"`) {
		t.Fatalf("message %q", msg)
	}
	if err := RequireSystem("system:coordinator", "emit_occurrences"); err != nil {
		t.Fatal(err)
	}
	if err := RequireSystem("systemx", "emit_occurrences"); !errors.Is(err, orrery.ErrUnauthorized) {
		t.Fatalf("%v", err)
	}
}

func TestValidateNamesTheBadField(t *testing.T) {
	cases := map[string]*orreryv1.PutGrant{
		"principal":               {},
		"rules[0].namespace":      {Principal: "p", Rules: []*orreryv1.GrantRule{rule("", "", QueuePublish)}},
		"rules[0].queue":          {Principal: "p", Rules: []*orreryv1.GrantRule{rule("acme", "bad queue", QueuePublish)}},
		"rules[0].capabilities":   {Principal: "p", Rules: []*orreryv1.GrantRule{rule("acme", "", 1<<6)}},
		"rules[0].fields[0].path": {Principal: "p", Rules: []*orreryv1.GrantRule{{Namespace: "acme", Fields: []*orreryv1.FieldPolicy{{Path: "body.x"}}}}},
		"rules[0].fields[1].path": {Principal: "p", Rules: []*orreryv1.GrantRule{{Namespace: "acme", Fields: []*orreryv1.FieldPolicy{{Path: "payload.card.number", Write: true}, {Path: "state..x"}}}}},
		"rules":                   {Principal: "p", Rules: make([]*orreryv1.GrantRule, MaxRules+1)},
	}
	for field, m := range cases {
		err := Validate(m)
		if !errors.Is(err, orrery.ErrValidation) || orrery.AsError(err).Field != field {
			t.Errorf("%s: %v", field, err)
		}
	}
	ok := &orreryv1.PutGrant{Principal: "p", Rules: []*orreryv1.GrantRule{{Namespace: AnyNamespace, Capabilities: uint64(All),
		Fields: []*orreryv1.FieldPolicy{{Path: "payload"}, {Path: "headers.x-tenant", Use: true}, {Path: "state.step", Read: true}}}}}
	if err := Validate(ok); err != nil {
		t.Fatal(err)
	}
}

// TestPutAndDeleteNeedPolicyAdminOverTheRules: a grant change needs PolicyAdmin over every
// namespace and queue its old and new rules name, or an Orrery principal; a denial writes
// nothing; PolicyAdmin holds no other capability.
func TestPutAndDeleteNeedPolicyAdminOverTheRules(t *testing.T) {
	v := kv.NewMemory()
	if err := ApplyPut(v, "system:test", &orreryv1.PutGrant{Principal: "admin", Rules: []*orreryv1.GrantRule{rule("acme", "", PolicyAdmin)}}); err != nil {
		t.Fatal(err)
	}
	inAcme := &orreryv1.PutGrant{Principal: "alice", Rules: []*orreryv1.GrantRule{rule("acme", "jobs", QueuePublish)}}
	if err := ApplyPut(v, "admin", inAcme); err != nil {
		t.Fatalf("admin of acme grants in acme: %v", err)
	}
	before := v.Len()
	for name, m := range map[string]*orreryv1.PutGrant{
		"another namespace": {Principal: "alice", Rules: []*orreryv1.GrantRule{rule("beta", "", QueuePublish)}},
		"every namespace":   {Principal: "alice", Rules: []*orreryv1.GrantRule{rule(AnyNamespace, "", QueuePublish)}},
		"no admin":          {Principal: "carol", Rules: []*orreryv1.GrantRule{rule("acme", "", QueuePublish)}},
	} {
		caller := "admin"
		if name == "no admin" {
			caller = "alice"
		}
		if err := ApplyPut(v, caller, m); !errors.Is(err, orrery.ErrUnauthorized) {
			t.Errorf("%s: %v, want Unauthorized", name, err)
		}
	}
	if err := ApplyDelete(v, "alice", &orreryv1.DeleteGrant{Principal: "alice"}); !errors.Is(err, orrery.ErrUnauthorized) {
		t.Errorf("delete without PolicyAdmin: %v", err)
	}
	if v.Len() != before {
		t.Fatalf("denials wrote: %d keys, want %d", v.Len(), before)
	}
	// A grant in beta, put by the system, cannot be replaced by acme's admin.
	if err := ApplyPut(v, "system:test", &orreryv1.PutGrant{Principal: "dave", Rules: []*orreryv1.GrantRule{rule("beta", "", QueueConsume)}}); err != nil {
		t.Fatal(err)
	}
	if err := ApplyPut(v, "admin", &orreryv1.PutGrant{Principal: "dave", Rules: []*orreryv1.GrantRule{rule("acme", "", QueueConsume)}}); !errors.Is(err, orrery.ErrUnauthorized) {
		t.Errorf("replacing a grant of another namespace: %v", err)
	}
	admin, _ := Load(v, "admin")
	if Holds(admin, SchedulerManage, "acme", "jobs") || Holds(admin, QueueInspect, "acme", "jobs") {
		t.Error("PolicyAdmin implies another capability")
	}
	if err := ApplyDelete(v, "admin", &orreryv1.DeleteGrant{Principal: "alice"}); err != nil {
		t.Fatal(err)
	}
	if g, err := Load(v, "alice"); g != nil || err != nil {
		t.Fatalf("alice after delete: %v %v", g, err)
	}
	if _, found, _ := v.Get(keys.GrantKey("alice")); found {
		t.Fatal("the grant key is still there")
	}
}

func TestCheckFieldsLongestPolicyDecides(t *testing.T) {
	fields := func(policies ...*orreryv1.FieldPolicy) *orreryv1.GrantRecord {
		return &orreryv1.GrantRecord{Rules: []*orreryv1.GrantRule{{Namespace: "acme", Capabilities: uint64(QueuePublish), Fields: policies}}}
	}
	protected := fields(&orreryv1.FieldPolicy{Path: "payload.card.number", Use: true})
	allowList := fields(&orreryv1.FieldPolicy{Path: "payload"}, &orreryv1.FieldPolicy{Path: "payload.public", Write: true})
	cases := []struct {
		name  string
		grant *orreryv1.GrantRecord
		doc   Document
		want  bool
	}{
		{"unnamed field", protected, Document{PayloadRoot, `{"card":{"exp":"12/30"},"n":1}`}, true},
		{"protected field", protected, Document{PayloadRoot, `{"card":{"number":"4111"}}`}, false},
		{"overwrites a protected subtree", protected, Document{PayloadRoot, `{"card":"x"}`}, false},
		{"another root", protected, Document{HeadersRoot, `{"card":{"number":"4111"}}`}, true},
		{"empty document", protected, Document{PayloadRoot, ""}, true},
		{"allowed under a forbidden root", allowList, Document{PayloadRoot, `{"public":{"a":[1,2]}}`}, true},
		{"outside the allowed path", allowList, Document{PayloadRoot, `{"public":1,"secret":2}`}, false},
		{"a scalar payload", allowList, Document{PayloadRoot, `"x"`}, false},
		{"no policies", fields(), Document{PayloadRoot, `{"card":{"number":"4111"}}`}, true},
	}
	for _, c := range cases {
		err := CheckFields(c.grant, Caller("bob"), QueuePublish, "acme", "jobs", Write, c.doc)
		if (err == nil) != c.want {
			t.Errorf("%s: %v, want allowed %v", c.name, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "4111") || !errors.Is(err, orrery.ErrUnauthorized)) {
			t.Errorf("%s: the denial %q", c.name, err)
		}
	}
	// use is checked on its own flag; a policy of a rule without the capability does not apply.
	if err := CheckFields(protected, "the creator of the schedule", QueuePublish, "acme", "jobs", Use, Document{PayloadRoot, `{"card":{"number":"4111"}}`}); err != nil {
		t.Errorf("use of a field with use: %v", err)
	}
	if err := CheckFields(protected, Caller("bob"), SagaManage, "acme", "jobs", Write, Document{PayloadRoot, `{"card":{"number":"4111"}}`}); err != nil {
		t.Errorf("the policy of a rule without the capability applied: %v", err)
	}
}

// TestOrrerysOwnPrincipalsReadQueueCountsWithoutAGrant: one of Orrery's own principals without
// a grant (a silo's share rebalancer) may read a queue's counts and a partition's queue list,
// and nothing else; another principal without a grant may read neither.
func TestOrrerysOwnPrincipalsReadQueueCountsWithoutAGrant(t *testing.T) {
	v := kv.NewMemory()
	queueCounts := &orreryv1.InspectRequest_Queue{Queue: &orreryv1.InspectQueue{Namespace: "ns", Queue: "jobs"}}
	queueList := &orreryv1.InspectRequest_ListQueues{ListQueues: &orreryv1.ListQueues{}}
	lanePage := &orreryv1.InspectRequest_Lane{Lane: &orreryv1.InspectLane{Lane: &orreryv1.Lane{Namespace: "ns", Queue: "jobs", Key: "k"}}}
	for _, c := range []struct {
		principal string
		target    any
		allowed   bool
	}{
		{input.SystemPrincipalPrefix + "silo", queueCounts, true},
		{input.SystemPrincipalPrefix + "silo", queueList, true},
		{input.SystemPrincipalPrefix + "silo", lanePage, false},
		{"alice", queueCounts, false},
		{"alice", queueList, false},
	} {
		req := &orreryv1.InspectRequest{Principal: c.principal}
		switch target := c.target.(type) {
		case *orreryv1.InspectRequest_Queue:
			req.Target = target
		case *orreryv1.InspectRequest_ListQueues:
			req.Target = target
		case *orreryv1.InspectRequest_Lane:
			req.Target = target
		}
		if err := AuthorizeInspect(v, req); (err == nil) != c.allowed {
			t.Errorf("%s reading %T: %v, want allowed %v", c.principal, c.target, err, c.allowed)
		}
	}
}
