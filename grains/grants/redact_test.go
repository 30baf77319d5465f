package grants

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

func readGrant(capability Capability, policies ...*orreryv1.FieldPolicy) *orreryv1.GrantRecord {
	return &orreryv1.GrantRecord{Rules: []*orreryv1.GrantRule{{Namespace: "acme", Capabilities: uint64(capability), Fields: policies}}}
}

func TestRedactLongestPolicyDecides(t *testing.T) {
	hideCard := readGrant(QueueInspect, &orreryv1.FieldPolicy{Path: "payload.card", Write: true})
	hideNumber := readGrant(QueueInspect, &orreryv1.FieldPolicy{Path: "payload.card.number"})
	allowList := readGrant(QueueInspect, &orreryv1.FieldPolicy{Path: "payload"}, &orreryv1.FieldPolicy{Path: "payload.public", Read: true})
	hideAll := readGrant(QueueInspect, &orreryv1.FieldPolicy{Path: "payload"})
	readable := readGrant(QueueInspect, &orreryv1.FieldPolicy{Path: "payload.card", Read: true})
	cases := []struct {
		name     string
		grant    *orreryv1.GrantRecord
		json     string
		want     string
		redacted []string
	}{
		{"subtree removed as one path", hideCard, `{"card":{"number":"4111","exp":"12/30"},"n":1}`, `{"n":1}`, []string{"payload.card"}},
		{"a leaf under", hideNumber, `{"card":{"number":"4111","exp":"12/30"}}`, `{"card":{"exp":"12/30"}}`, []string{"payload.card.number"}},
		{"a leaf over a protected path", hideNumber, `{"card":"4111","n":1}`, `{"n":1}`, []string{"payload.card"}},
		{"an array over a protected path", hideNumber, `{"card":[{"number":"4111"}],"n":1}`, `{"n":1}`, []string{"payload.card"}},
		{"an object left empty goes", hideNumber, `{"card":{"number":"4111"},"n":{}}`, `{"n":{}}`, []string{"payload.card.number"}},
		{"a root left empty is withheld", hideNumber, `{"card":{"number":"4111"}}`, ``, []string{"payload"}},
		{"allow list", allowList, `{"public":{"a":[1,2]},"secret":"x","z":{"k":1}}`, `{"public":{"a":[1,2]}}`, []string{"payload.secret", "payload.z"}},
		{"root removed", hideAll, `{"card":{"number":"4111"}}`, ``, []string{"payload"}},
		{"scalar root removed", allowList, `"4111"`, ``, []string{"payload"}},
		{"invalid JSON", hideNumber, `{"card":`, ``, []string{"payload"}},
		{"read allowed: re-encoded, sorted, numbers kept", readable, `{"z":1, "card":{"number":12345678901234567890},"h":"<&>"}`,
			`{"card":{"number":12345678901234567890},"h":"<&>","z":1}`, nil},
		{"duplicate keys: the decoded value decides", hideNumber, `{"card":{"number":"4111"},"card":{"x":1}}`, `{"card":{"x":1}}`, nil},
		{"empty document", hideAll, ``, ``, nil},
	}
	for _, c := range cases {
		got, redacted := Redact(c.grant, QueueInspect, "acme", "jobs", Document{PayloadRoot, c.json})
		if got != c.want || !reflect.DeepEqual(redacted, c.redacted) {
			t.Errorf("%s: Redact = %q %q, want %q %q", c.name, got, redacted, c.want, c.redacted)
		}
	}
}

// TestRedactWithoutReadPolicyIsByteIdentical: only read policies of rules holding the read's
// capability in the read's place apply; without one the document passes unchanged.
func TestRedactWithoutReadPolicyIsByteIdentical(t *testing.T) {
	doc := Document{PayloadRoot, `{ "card" : {"number":"4111"}, "b":1.50 }`}
	for name, grant := range map[string]*orreryv1.GrantRecord{
		"no grant":            nil,
		"no policies":         readGrant(QueueInspect),
		"another capability":  readGrant(QueueConsume, &orreryv1.FieldPolicy{Path: "payload"}),
		"another root":        readGrant(QueueInspect, &orreryv1.FieldPolicy{Path: "headers"}),
		"another namespace":   {Rules: []*orreryv1.GrantRule{{Namespace: "beta", Capabilities: uint64(QueueInspect), Fields: []*orreryv1.FieldPolicy{{Path: "payload"}}}}},
		"another queue":       {Rules: []*orreryv1.GrantRule{{Namespace: "acme", Queue: "other", Capabilities: uint64(QueueInspect), Fields: []*orreryv1.FieldPolicy{{Path: "payload"}}}}},
		"a policy with read":  readGrant(QueueInspect, &orreryv1.FieldPolicy{Path: "payload.x", Read: true}),
		"read wins at a path": {Rules: []*orreryv1.GrantRule{readGrant(QueueInspect, &orreryv1.FieldPolicy{Path: "payload"}).Rules[0], readGrant(QueueInspect, &orreryv1.FieldPolicy{Path: "payload", Read: true}).Rules[0]}},
	} {
		got, redacted := Redact(grant, QueueInspect, "acme", "jobs", doc)
		if strings.HasPrefix(name, "a policy") || strings.HasPrefix(name, "read wins") {
			// A read policy applies: the document is re-encoded, nothing is removed.
			if got != `{"b":1.50,"card":{"number":"4111"}}` || redacted != nil {
				t.Errorf("%s: %q %q", name, got, redacted)
			}
			continue
		}
		if got != doc.JSON || redacted != nil {
			t.Errorf("%s: %q %q, want the document unchanged", name, got, redacted)
		}
	}
}

func TestProjectRecordsWithholdDocumentsAndCreator(t *testing.T) {
	const canary = "CANARY-7f3a"
	lane := &orreryv1.Lane{Namespace: "acme", Queue: "jobs", Key: "k"}
	template := &orreryv1.MessageTemplate{PayloadJson: `{"card":"` + canary + `"}`, HeadersJson: `{"x-secret":"` + canary + `"}`}
	sched := &orreryv1.ScheduleRecord{Creator: "alice", Definition: &orreryv1.ScheduleDefinition{Lane: lane, Template: template}}
	sg := &orreryv1.SagaRecord{Lane: lane, Creator: "alice", StateJson: `{"step":1,"secret":"` + canary + `"}`,
		Timeout: &orreryv1.SagaTimeout{Queue: "timeouts", Template: template}}
	blind := readGrant(QueueInspect, &orreryv1.FieldPolicy{Path: "payload"}, &orreryv1.FieldPolicy{Path: "headers"}, &orreryv1.FieldPolicy{Path: "state.secret"})

	s := ProjectSchedule(blind, "bob", sched)
	if strings.Contains(s.String(), canary) || strings.Contains(s.String(), "alice") {
		t.Errorf("schedule projection shows %s", s)
	}
	if want := []string{"creator", "headers", "payload"}; !reflect.DeepEqual(s.GetRedactedPaths(), want) {
		t.Errorf("schedule redacted %q, want %q", s.GetRedactedPaths(), want)
	}
	// The timeout's queue "timeouts" is covered by the rule on "acme": its read policies apply.
	g := ProjectSaga(blind, "bob", sg)
	if strings.Contains(g.String(), canary) || strings.Contains(g.String(), "alice") || g.GetStateJson() != `{"step":1}` {
		t.Errorf("saga projection shows %s", g)
	}
	if want := []string{"creator", "state.secret", "timeout.headers", "timeout.payload"}; !reflect.DeepEqual(g.GetRedactedPaths(), want) {
		t.Errorf("saga redacted %q, want %q", g.GetRedactedPaths(), want)
	}
	// Without QueueInspect on the timeout's queue its template is withheld whole.
	scoped := &orreryv1.GrantRecord{Rules: []*orreryv1.GrantRule{{Namespace: "acme", Queue: "jobs", Capabilities: uint64(QueueInspect)}}}
	g = ProjectSaga(scoped, "alice", sg)
	if g.GetTimeout().GetTemplate().GetPayloadJson() != "" || g.GetCreator() != "alice" || g.GetStateJson() != sg.GetStateJson() {
		t.Errorf("scoped saga projection %s", g)
	}
	if want := []string{"timeout.headers", "timeout.payload"}; !reflect.DeepEqual(g.GetRedactedPaths(), want) {
		t.Errorf("scoped saga redacted %q, want %q", g.GetRedactedPaths(), want)
	}
	// The creator and a PolicyAdmin of the namespace see the creator; the record is untouched.
	admin := readGrant(QueueInspect | PolicyAdmin)
	if ProjectSchedule(admin, "carol", sched).GetCreator() != "alice" || ProjectSchedule(nil, "alice", sched).GetCreator() != "alice" {
		t.Error("creator withheld from the creator or an admin")
	}
	if sched.GetCreator() != "alice" || !strings.Contains(sched.String(), canary) || !strings.Contains(sg.String(), canary) {
		t.Error("projection changed the stored record")
	}

	msg := &orreryv1.QueueMessage{Id: "m1", Lane: lane, PayloadJson: template.PayloadJson, HeadersJson: template.HeadersJson, Lease: &orreryv1.Lease{Token: "tok"}}
	consume := readGrant(QueueConsume, &orreryv1.FieldPolicy{Path: "payload"}, &orreryv1.FieldPolicy{Path: "headers"})
	m := ProjectMessage(consume, QueueConsume, msg)
	if m.GetPayloadJson() != "" || m.GetHeadersJson() != "" || m.GetId() != "m1" || m.GetLease().GetToken() != "tok" ||
		!reflect.DeepEqual(m.GetRedactedPaths(), []string{"headers", "payload"}) {
		t.Errorf("message projection %s", m)
	}
	if ProjectMessage(consume, QueueInspect, msg) != msg {
		t.Error("a message without read policies under the capability was copied")
	}
	// A message that loses a path loses its unique key (a key by payload hashes it); one that
	// loses nothing keeps it.
	msg.UniqueKey = "0f3a"
	m = ProjectMessage(consume, QueueConsume, msg)
	if m.GetUniqueKey() != "" || !reflect.DeepEqual(m.GetRedactedPaths(), []string{"headers", "payload", UniqueKeyPath}) || msg.GetUniqueKey() != "0f3a" {
		t.Errorf("message projection with a unique key %s", m)
	}
	if m := ProjectMessage(consume, QueueInspect, msg); m.GetUniqueKey() != "0f3a" {
		t.Errorf("a message that lost nothing lost its unique key: %s", m)
	}
}

// TestRedactProperties: for random documents and read policies, the projection is valid JSON
// (or empty), holds no leaf value a policy forbids, lists each removed value's path under the
// root, and projecting it again changes nothing and lists nothing.
func TestRedactProperties(t *testing.T) {
	names := []string{"a", "b", "c"}
	rapid.Check(t, func(t *rapid.T) {
		leaf := 0
		var gen func(depth int) any
		gen = func(depth int) any {
			if depth == 0 || rapid.IntRange(0, 2).Draw(t, "kind") == 0 {
				leaf++
				if rapid.Bool().Draw(t, "array") {
					return []any{fmt.Sprintf("v%d", leaf)}
				}
				return fmt.Sprintf("v%d", leaf)
			}
			object := map[string]any{}
			for _, n := range names {
				if rapid.Bool().Draw(t, "member") {
					object[n] = gen(depth - 1)
				}
			}
			return object
		}
		raw, err := json.Marshal(gen(3))
		if err != nil {
			t.Fatal(err)
		}
		var policies []*orreryv1.FieldPolicy
		for range rapid.IntRange(1, 4).Draw(t, "policies") {
			path := "payload"
			for range rapid.IntRange(0, 3).Draw(t, "depth") {
				path += "." + rapid.SampledFrom(names).Draw(t, "segment")
			}
			policies = append(policies, &orreryv1.FieldPolicy{Path: path, Read: rapid.Bool().Draw(t, "read")})
		}
		grant := readGrant(QueueInspect, policies...)
		decided := fieldPolicies(grant, QueueInspect, "acme", "jobs", PayloadRoot, Read)

		projected, redacted := Redact(grant, QueueInspect, "acme", "jobs", Document{PayloadRoot, string(raw)})
		if projected != "" {
			var value any
			if err := json.Unmarshal([]byte(projected), &value); err != nil {
				t.Fatalf("projection %q is not JSON: %v", projected, err)
			}
			var leaves []string
			collectLeaves(PayloadRoot, value, &leaves)
			for _, l := range leaves {
				if !allowed(decided, l) {
					t.Fatalf("projection %q of %s keeps the forbidden %s", projected, raw, l)
				}
			}
		}
		if len(redacted) == 0 && projected != reencode(t, string(raw)) {
			t.Fatalf("%s projected to %q with no path", raw, projected)
		}
		for _, p := range redacted {
			if p != PayloadRoot && !strings.HasPrefix(p, PayloadRoot+".") {
				t.Fatalf("path %q outside the root", p)
			}
		}
		again, more := Redact(grant, QueueInspect, "acme", "jobs", Document{PayloadRoot, projected})
		if again != projected || len(more) != 0 {
			t.Fatalf("projecting %q again gave %q %q", projected, again, more)
		}
	})
}

// reencode is doc in Redact's encoding.
func reencode(t *rapid.T, doc string) string {
	var value any
	if err := json.Unmarshal([]byte(doc), &value); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(value)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestProjectInspectWithholdsTheKeptGenerations: an inspection's kept generations pass the
// same read policies as its record: a caller without read on the payload sees none of theirs.
func TestProjectInspectWithholdsTheKeptGenerations(t *testing.T) {
	const canary = "CANARY-9c2e"
	lane := &orreryv1.Lane{Namespace: "acme", Queue: "jobs", Key: "k"}
	old := &orreryv1.ScheduleRecord{Creator: "alice", Generation: 1, Definition: &orreryv1.ScheduleDefinition{Lane: lane,
		Template: &orreryv1.MessageTemplate{PayloadJson: `{"card":"` + canary + `"}`}}}
	current := &orreryv1.ScheduleRecord{Creator: "alice", Generation: 2, Definition: &orreryv1.ScheduleDefinition{Lane: lane}}
	v := kv.NewMemory()
	if _, err := record.Store(v, keys.GrantKey("bob"), readGrant(QueueInspect, &orreryv1.FieldPolicy{Path: "payload"})); err != nil {
		t.Fatal(err)
	}
	reply := &orreryv1.InspectReply{Inspection: &orreryv1.ScheduleInspection{Record: current,
		Generations: []*orreryv1.ScheduleGeneration{{Record: old, ReplacedBy: "alice"}}}}
	if err := ProjectInspect(v, "bob", reply); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(reply.String(), canary) {
		t.Fatalf("the projected inspection shows a kept generation's payload: %s", reply)
	}
	if g := reply.GetInspection().GetGenerations()[0].GetRecord(); !slices.Contains(g.GetRedactedPaths(), "payload") {
		t.Fatalf("kept generation redacted %q, want payload among them", g.GetRedactedPaths())
	}
}
