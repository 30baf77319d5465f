package due

import (
	"errors"
	"fmt"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

var lane = &orreryv1.Lane{Namespace: "n", Queue: "q", Key: "k"}

func put(t *testing.T, v kv.View, at int64, kind orreryv1.DueKind, id string, token uint64) {
	t.Helper()
	if err := Put(v, &orreryv1.DueRef{Kind: kind, Lane: lane, Id: id, Token: token, DueAtUnixMicros: at}); err != nil {
		t.Fatal(err)
	}
}

func ids(refs []*orreryv1.DueRef) string {
	var out []string
	for _, r := range refs {
		out = append(out, fmt.Sprintf("%s@%d#%d", r.GetId(), r.GetDueAtUnixMicros(), r.GetToken()))
	}
	return fmt.Sprint(out)
}

func TestScanDueOldestFirstWithTokensAndNextDue(t *testing.T) {
	v := kv.NewMemory()
	put(t, v, 300, orreryv1.DueKind_DUE_KIND_SCHEDULE, "c", 3)
	put(t, v, 100, orreryv1.DueKind_DUE_KIND_SAGA, "a", 7)
	put(t, v, 200, orreryv1.DueKind_DUE_KIND_SCHEDULE, "b", 1)
	put(t, v, 1<<40, orreryv1.DueKind_DUE_KIND_SCHEDULE, "far", 1)
	res, err := ScanDue(v, 250, Budget{MaxRefs: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(res.Refs); got != "[a@100#7 b@200#1]" || res.More || res.NextDueAtMicros != 300 || res.Continuation != nil {
		t.Fatalf("refs %s more %v next %d", got, res.More, res.NextDueAtMicros)
	}
	// Exactly at a due instant it is due.
	if res, _ := ScanDue(v, 300, Budget{MaxRefs: 10}); len(res.Refs) != 3 || res.NextDueAtMicros != 1<<40 {
		t.Fatalf("at 300: %s next %d", ids(res.Refs), res.NextDueAtMicros)
	}
	// Nothing else: next due is zero.
	if res, _ := ScanDue(v, 1<<41, Budget{MaxRefs: 10}); len(res.Refs) != 4 || res.NextDueAtMicros != 0 {
		t.Fatalf("all due: %s next %d", ids(res.Refs), res.NextDueAtMicros)
	}
}

func TestScanDueBudgetIsNeverSilentlyPartial(t *testing.T) {
	v := kv.NewMemory()
	for i := range 5 {
		put(t, v, int64(10+i), orreryv1.DueKind_DUE_KIND_SCHEDULE, fmt.Sprint(i), 1)
	}
	var all []*orreryv1.DueRef
	budget := Budget{MaxRefs: 2}
	for range 10 {
		res, err := ScanDue(v, 100, budget)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, res.Refs...)
		if !res.More {
			break
		}
		if res.NextDueAtMicros != res.Refs[len(res.Refs)-1].GetDueAtUnixMicros()+1 {
			t.Fatalf("next due %d after a cut at %s", res.NextDueAtMicros, ids(res.Refs))
		}
		budget.After = res.Continuation
	}
	if ids(all) != "[0@10#1 1@11#1 2@12#1 3@13#1 4@14#1]" {
		t.Fatalf("continued scan %s", ids(all))
	}
	if _, err := ScanDue(v, 100, Budget{}); !errors.Is(err, orrery.ErrValidation) {
		t.Fatalf("zero budget: %v", err)
	}
	// A byte budget still returns at least one ref.
	if res, _ := ScanDue(v, 100, Budget{MaxRefs: 10, MaxBytes: 1}); len(res.Refs) != 1 || !res.More {
		t.Fatalf("byte budget: %s more %v", ids(res.Refs), res.More)
	}
}

func TestMoveKeepsOneEntry(t *testing.T) {
	v := kv.NewMemory()
	ref := &orreryv1.DueRef{Kind: orreryv1.DueKind_DUE_KIND_SCHEDULE, Lane: lane, Id: "s", Token: 1, DueAtUnixMicros: 50}
	if err := Move(v, 0, ref); err != nil {
		t.Fatal(err)
	}
	moved := &orreryv1.DueRef{Kind: orreryv1.DueKind_DUE_KIND_SCHEDULE, Lane: lane, Id: "s", Token: 2, DueAtUnixMicros: 70}
	if err := Move(v, 50, moved); err != nil {
		t.Fatal(err)
	}
	if res, _ := ScanDue(v, 100, Budget{MaxRefs: 10}); ids(res.Refs) != "[s@70#2]" {
		t.Fatalf("after move %s", ids(res.Refs))
	}
	if err := Move(v, 70, &orreryv1.DueRef{Kind: orreryv1.DueKind_DUE_KIND_SCHEDULE, Lane: lane, Id: "s"}); err != nil || v.Len() != 0 {
		t.Fatalf("move to zero should remove: len %d err %v", v.Len(), err)
	}
}

func TestScanDueFromSkipsEarlierKeys(t *testing.T) {
	v := kv.NewMemory()
	put(t, v, 100, orreryv1.DueKind_DUE_KIND_SCHEDULE, "a", 1)
	put(t, v, 200, orreryv1.DueKind_DUE_KIND_SCHEDULE, "b", 1)
	res, err := ScanDue(v, 1000, Budget{MaxRefs: 10, FromMicros: 150})
	if err != nil || ids(res.Refs) != "[b@200#1]" {
		t.Fatalf("from 150: %s %v", ids(res.Refs), err)
	}
	if res, _ := ScanDue(v, 1000, Budget{MaxRefs: 10, FromMicros: 200}); ids(res.Refs) != "[b@200#1]" {
		t.Fatalf("from exactly 200 must include it: %s", ids(res.Refs))
	}
	if at, ok := DueAtOfKey(keys.DueKey(123, orreryv1.DueKind_DUE_KIND_SAGA, lane, "x")); !ok || at != 123 {
		t.Fatalf("DueAtOfKey %d %v", at, ok)
	}
	if _, ok := DueAtOfKey([]byte("s/other")); ok {
		t.Fatal("a foreign key decoded")
	}
}
