package due

import (
	"testing"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/kv"
)

// TestListReadsTheDueSchedulesOfANamespace: List returns, oldest due first, the schedules of
// the namespace (of the queue or lane, when given) due at or before now, never a saga, another
// namespace's schedule or one due later; a page stops at its refs or at the entries it may
// scan, with a continuation that the next page resumes from, and a last page has none.
func TestListReadsTheDueSchedulesOfANamespace(t *testing.T) {
	v := kv.NewMemory()
	refs := []*orreryv1.DueRef{
		{Kind: orreryv1.DueKind_DUE_KIND_SCHEDULE, Lane: &orreryv1.Lane{Namespace: "other", Queue: "q", Key: "k"}, Id: "foreign", DueAtUnixMicros: 10},
		{Kind: orreryv1.DueKind_DUE_KIND_SCHEDULE, Lane: lane, Id: "a", Token: 1, DueAtUnixMicros: 20},
		{Kind: orreryv1.DueKind_DUE_KIND_SAGA, Lane: lane, Id: "saga", Token: 1, DueAtUnixMicros: 25},
		{Kind: orreryv1.DueKind_DUE_KIND_SCHEDULE, Lane: &orreryv1.Lane{Namespace: "n", Queue: "q", Key: "k2"}, Id: "b", Token: 3, DueAtUnixMicros: 30},
		{Kind: orreryv1.DueKind_DUE_KIND_SCHEDULE, Lane: &orreryv1.Lane{Namespace: "n", Queue: "q2", Key: "k"}, Id: "c", Token: 1, DueAtUnixMicros: 40},
		{Kind: orreryv1.DueKind_DUE_KIND_SCHEDULE, Lane: lane, Id: "later", Token: 1, DueAtUnixMicros: 100},
	}
	for _, r := range refs {
		if err := Put(v, r); err != nil {
			t.Fatal(err)
		}
	}
	const now = 50
	for _, c := range []struct {
		name string
		q    ListQuery
		want string
	}{
		{"namespace", ListQuery{Namespace: "n"}, "[a@20#1 b@30#3 c@40#1]"},
		{"queue", ListQuery{Namespace: "n", Queue: "q2"}, "[c@40#1]"},
		{"lane", ListQuery{Namespace: "n", Lane: lane}, "[a@20#1]"},
	} {
		c.q.MaxRefs, c.q.MaxScanned = 10, 100
		got, next, err := List(v, now, c.q)
		if err != nil || ids(got) != c.want || next != nil {
			t.Fatalf("%s: %s (next %x, %v), want %s and no continuation", c.name, ids(got), next, err, c.want)
		}
	}

	// Paged: one ref a page, then two entries scanned a page.
	var pages []string
	q := ListQuery{Namespace: "n", MaxRefs: 1, MaxScanned: 100}
	for {
		got, next, err := List(v, now, q)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, ids(got))
		if next == nil {
			break
		}
		q.After = next
	}
	if got := pages; len(got) != 3 || got[0] != "[a@20#1]" || got[1] != "[b@30#3]" || got[2] != "[c@40#1]" {
		t.Fatalf("one ref a page: %v", got)
	}
	q = ListQuery{Namespace: "n", MaxRefs: 10, MaxScanned: 1}
	got, next, err := List(v, now, q)
	if err != nil || len(got) != 0 || next == nil {
		t.Fatalf("one entry scanned, another namespace's: %s (next %x, %v), want an empty page with a continuation", ids(got), next, err)
	}
	if got, _, err := List(v, now, ListQuery{Namespace: "n", MaxRefs: 10, MaxScanned: 1, After: next}); err != nil || ids(got) != "[a@20#1]" {
		t.Fatalf("resumed: %s (%v), want a", ids(got), err)
	}
	if _, _, err := List(v, now, ListQuery{Namespace: "n", MaxRefs: MaxListRefs + 1, MaxScanned: 1}); err == nil {
		t.Fatal("a page of more than MaxListRefs refs was accepted")
	}
}
