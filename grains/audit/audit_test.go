package audit

import (
	"bytes"
	"slices"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/kv"
)

// seed writes one denial per command, each command at its own instant, and a command with
// two records at the last instant.
func seed(t *testing.T, v kv.View, instants ...int64) {
	t.Helper()
	denial := orrery.Errorf(orrery.CodeUnauthorized, `caller "carol" lacks QueuePublish on namespace "acme"`)
	m := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: "acme", Queue: "jobs"}}}
	for i, at := range instants {
		trail := &Trail{}
		trail.Denied(0, "receive", m, denial)
		if i == len(instants)-1 {
			trail.Denied(1, "receive", m, denial)
			trail.Denied(2, "receive", m, orrery.Invalid("lane", "is bad")) // not a denial: not recorded
		}
		if err := trail.Write(v, "carol", "c"+string(rune('a'+i)), at, true, false); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadPagesTheLogOldestFirstWithinItsRange(t *testing.T) {
	v := kv.NewMemory()
	seed(t, v, 300, 100, 200, 400)
	all, next, err := Read(v, &orreryv1.ReadAudit{})
	if err != nil || next != nil {
		t.Fatal(err, next)
	}
	var times []int64
	for _, r := range all {
		times = append(times, r.GetLoggedTimeUnixMicros())
		if r.GetNamespace() != "acme" || r.GetQueue() != "jobs" || r.GetPrincipal() != "carol" || r.GetMutation() != "receive" {
			t.Fatalf("record %v", r)
		}
	}
	if want := []int64{100, 200, 300, 400, 400}; !slices.Equal(times, want) {
		t.Fatalf("logged times %v, want %v", times, want)
	}
	if all[4].GetSequence() != 1 || all[4].GetMutationIndex() != 1 {
		t.Fatalf("the second record of the last command: %v", all[4])
	}

	// Pages of two within [200, 400], resumed by their continuation.
	var paged []int64
	var after []byte
	for pages := 0; ; pages++ {
		page, next, err := Read(v, &orreryv1.ReadAudit{FromUnixMicros: 200, ToUnixMicros: 400, MaxRecords: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			paged = append(paged, r.GetLoggedTimeUnixMicros())
		}
		if next == nil {
			break
		}
		if !bytes.Equal(next, Position(page[len(page)-1])) || pages > 3 {
			t.Fatalf("continuation %x after %v", next, page)
		}
		after = next
	}
	if want := []int64{200, 300, 400, 400}; !slices.Equal(paged, want) {
		t.Fatalf("paged logged times %v, want %v", paged, want)
	}
	if got, _, _ := Read(v, &orreryv1.ReadAudit{FromUnixMicros: 150, ToUnixMicros: 250}); len(got) != 1 || got[0].GetLoggedTimeUnixMicros() != 200 {
		t.Fatalf("[150, 250]: %v", got)
	}
	if _, _, err := Read(v, &orreryv1.ReadAudit{MaxRecords: MaxReadRecords + 1}); orrery.AsError(err).Field != "max_records" {
		t.Fatalf("too many records: %v", err)
	}
}

func TestWriteOfARolledBackCommandKeepsOnlyDenials(t *testing.T) {
	v := kv.NewMemory()
	trail := &Trail{}
	put := &orreryv1.Mutation{Kind: &orreryv1.Mutation_PutGrant{PutGrant: &orreryv1.PutGrant{Principal: "dave"}}}
	trail.GrantChanged(0, "put_grant", put, nil)
	trail.Denied(1, "receive", &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: "acme"}}}, orrery.Errorf(orrery.CodeUnauthorized, "no"))
	trail.Denied(2, "delete_grant", &orreryv1.Mutation{Kind: &orreryv1.Mutation_DeleteGrant{DeleteGrant: &orreryv1.DeleteGrant{Principal: "erin"}}}, orrery.Errorf(orrery.CodeUnauthorized, "no"))
	if err := trail.Write(v, "carol", "c1", 5, false, false); err != nil {
		t.Fatal(err)
	}
	got, _, err := Read(v, &orreryv1.ReadAudit{})
	if err != nil || len(got) != 2 || got[0].GetKind() != orreryv1.AuditKind_AUDIT_KIND_DENIED || got[0].GetSequence() != 0 ||
		got[0].GetNamespace() != "acme" || got[1].GetSequence() != 1 || got[1].GetTargetPrincipal() != "erin" {
		t.Fatalf("a rolled-back command's log: %v (%v)", got, err)
	}
}

func TestPruneRemovesRecordsUpToTheInstantInBoundedSteps(t *testing.T) {
	v := kv.NewMemory()
	seed(t, v, 100, 200, 300)
	if due, err := PruneDue(v, 99); err != nil || due {
		t.Fatalf("nothing at or before 99: due %v (%v)", due, err)
	}
	removed, more, err := Prune(v, 300, 2)
	if err != nil || removed != 2 || !more {
		t.Fatalf("prune 2 of 4: %d %v %v", removed, more, err)
	}
	removed, more, err = Prune(v, 200, 10)
	if err != nil || removed != 0 || more {
		t.Fatalf("nothing left at or before 200: %d %v %v", removed, more, err)
	}
	removed, more, err = Prune(v, 300, 10)
	if err != nil || removed != 2 || more || v.Len() != 0 {
		t.Fatalf("the rest: %d %v %v, %d keys left", removed, more, err, v.Len())
	}
}

func TestSummarizeRules(t *testing.T) {
	rules := []*orreryv1.GrantRule{{Namespace: "*", Capabilities: 1<<4 | 1<<5}, {Namespace: "acme", Queue: "jobs", Capabilities: 1 << 2, Fields: []*orreryv1.FieldPolicy{{Path: "payload.a"}}}}
	if got, want := SummarizeRules(rules), "*:QueueInspect|PolicyAdmin; acme/jobs:QueuePublish (1 field policies)"; got != want {
		t.Fatalf("SummarizeRules = %q, want %q", got, want)
	}
	if got := SummarizeRules(nil); got != "none" {
		t.Fatalf("no rules: %q", got)
	}
}
