package client_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// TestReadAuditMergesEveryPartitionInTimeOrder: denials recorded on several partitions are
// read, page by page of every size, each once, oldest first, with the partition holding each;
// a principal without PolicyAdmin on "*" is refused.
func TestReadAuditMergesEveryPartitionInTimeOrder(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	mallory := client.New(b.tr, client.Options{Principal: "mallory"})
	t.Cleanup(func() { _ = mallory.Close() })
	partitions := map[int]bool{}
	const n = 10
	for i := range n {
		// A queue each: the same denial again within a minute would count on its first record.
		l := lane(fmt.Sprintf("jobs-%02d", i), fmt.Sprintf("key-%02d", i))
		partitions[b.c.PartitionOf(l)] = true
		if _, err := mallory.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: fmt.Sprint("m", i), PayloadJson: `{}`}); !errors.Is(err, orrery.ErrUnauthorized) {
			t.Fatalf("mallory's enqueue %d: %v, want Unauthorized", i, err)
		}
	}
	if len(partitions) < 3 {
		t.Fatalf("the keys landed in only %d partitions", len(partitions))
	}
	if _, _, err := mallory.ReadAudit(ctx, client.AuditQuery{}); !errors.Is(err, orrery.ErrUnauthorized) {
		t.Fatalf("mallory reads the audit log: %v, want Unauthorized", err)
	}
	for size := 1; size <= n+1; size++ {
		var got []client.AuditEntry
		var after []byte
		for pages := 0; ; pages++ {
			page, next, err := b.c.ReadAudit(ctx, client.AuditQuery{MaxRecords: size, After: after})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page...)
			if next == nil {
				break
			}
			if pages > n {
				t.Fatalf("size %d: no end", size)
			}
			after = next
		}
		if len(got) != n {
			t.Fatalf("size %d: %d records, want %d", size, len(got), n)
		}
		seen := map[string]bool{}
		for i, e := range got {
			r := e.Record
			if i > 0 && r.GetLoggedTimeUnixMicros() < got[i-1].Record.GetLoggedTimeUnixMicros() {
				t.Fatalf("size %d: record %d logged at %d before its predecessor at %d", size, i, r.GetLoggedTimeUnixMicros(), got[i-1].Record.GetLoggedTimeUnixMicros())
			}
			queue, key := fmt.Sprintf("jobs-%02d", i), fmt.Sprintf("key-%02d", i)
			if r.GetPrincipal() != "mallory" || r.GetMutation() != "enqueue" || seen[r.GetCommandId()] || e.Partition != b.c.PartitionOf(lane(queue, key)) {
				t.Fatalf("size %d: record %d %v in partition %d, want mallory's enqueue into %s", size, i, r, e.Partition, key)
			}
			seen[r.GetCommandId()] = true
		}
	}
}
