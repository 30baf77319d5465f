package audit

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// deny writes one command's denial of a receive in namespace, by mallory, at at.
func deny(t *testing.T, v kv.View, namespace string, at int64, bounded bool) {
	t.Helper()
	trail := &Trail{}
	m := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: namespace, Queue: "jobs"}}}
	trail.Denied(0, "receive", m, orrery.Errorf(orrery.CodeUnauthorized, "caller \"mallory\" lacks QueueConsume on namespace %q", namespace))
	if err := trail.Write(v, "mallory", fmt.Sprintf("c%d", at), at, true, bounded); err != nil {
		t.Fatal(err)
	}
}

// logged is the log's records, oldest first.
func logged(t *testing.T, r kv.Reader) []*orreryv1.AuditRecord {
	t.Helper()
	all, _, err := Read(r, &orreryv1.ReadAudit{MaxRecords: MaxReadRecords})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// countKeys counts the keys under prefix.
func countKeys(t *testing.T, r kv.Reader, prefix []byte) int {
	t.Helper()
	n := 0
	if err := kv.ScanPrefix(r, prefix, func(_, _ []byte) (bool, error) { n++; return true, nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestABoundedLogCountsRepeatedDenialsAndKeepsItsSize: bounded, the same denial repeated within
// DenialWindowMicros is counted on its first record (repeats, the last time) instead of
// written; another namespace, or the window passed, writes a record; past the cap the oldest
// records go, with their windows' index, and the count follows. Unbounded, every denial is a
// record and nothing else is written.
func TestABoundedLogCountsRepeatedDenialsAndKeepsItsSize(t *testing.T) {
	const second = 1_000_000
	v := kv.NewMemory()
	for i := range 3 {
		deny(t, v, "acme", int64(100+i)*second, true)
	}
	deny(t, v, "other", 103*second, true)
	all := logged(t, v)
	if len(all) != 2 || all[0].GetRepeats() != 2 || all[0].GetLastLoggedTimeUnixMicros() != 102*second || all[1].GetRepeats() != 0 {
		t.Fatalf("three denials in acme and one in other, within a window: %v; want 2 records, the first with 2 repeats until 102 s", all)
	}
	deny(t, v, "acme", 100*second+DenialWindowMicros, true) // the window passed
	if all := logged(t, v); len(all) != 3 || all[2].GetRepeats() != 0 {
		t.Fatalf("the same denial after its window: %v; want a record of its own", all)
	}

	restore := SetMaxRecordsForTest(4)
	defer restore()
	for i := range 6 {
		deny(t, v, fmt.Sprintf("ns-%d", i), int64(200+i)*second, true)
	}
	all = logged(t, v)
	if len(all) != 4 || all[0].GetNamespace() != "ns-2" || all[3].GetNamespace() != "ns-5" {
		t.Fatalf("past a cap of 4: %v; want the 4 newest", all)
	}
	count, _, _ := v.Get(keys.AuditCount)
	if binary.BigEndian.Uint64(count) != 4 || countKeys(t, v, keys.AuditDenial) != 4 {
		t.Fatalf("past the cap: count %d, %d windows; want 4 and 4", binary.BigEndian.Uint64(count), countKeys(t, v, keys.AuditDenial))
	}
	if removed, _, err := Prune(v, 203*second, 10); err != nil || removed != 2 {
		t.Fatalf("a prune by age: %d, %v; want 2", removed, err)
	}
	count, _, _ = v.Get(keys.AuditCount)
	if binary.BigEndian.Uint64(count) != 2 || countKeys(t, v, keys.AuditDenial) != 2 {
		t.Fatalf("after the prune: count %d, %d windows; want 2 and 2", binary.BigEndian.Uint64(count), countKeys(t, v, keys.AuditDenial))
	}

	unbounded := kv.NewMemory()
	for i := range 3 {
		deny(t, unbounded, "acme", int64(100+i)*second, false)
	}
	if all := logged(t, unbounded); len(all) != 3 || countKeys(t, unbounded, keys.AuditDenial) != 0 || countKeys(t, unbounded, keys.AuditCount) != 0 {
		t.Fatalf("unbounded: %d records, %d windows, %d counts; want 3, 0, 0", len(all), countKeys(t, unbounded, keys.AuditDenial), countKeys(t, unbounded, keys.AuditCount))
	}
}
