package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/grants"
)

// TestAuditShowsDenialsAndGrantChanges: `orrery audit` lists a denied mutation and a grant
// change, with who, what and when, as a table and as JSON; --since bounds the page.
func TestAuditShowsDenialsAndGrantChanges(t *testing.T) {
	s := startSilo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "cli-audit", Queue: "jobs", Key: "k"}
	if _, err := s.Client().As("mallory").Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "m1", PayloadJson: `{}`}); !errors.Is(err, orrery.ErrUnauthorized) {
		t.Fatalf("mallory's enqueue: %v, want Unauthorized", err)
	}
	if err := s.Client().PutGrant(ctx, &orreryv1.PutGrant{Principal: "dave", Rules: []*orreryv1.GrantRule{{Namespace: "cli-audit", Capabilities: uint64(grants.QueueConsume)}}}); err != nil {
		t.Fatal(err)
	}
	table := ok(t, s, "", "audit", "--since", "1h", "--max", "1000")
	if lineOf(table, "mallory", "denied", "enqueue", "cli-audit/jobs", "lacks QueuePublish") == "" {
		t.Errorf("audit shows no denial of mallory's enqueue:\n%s", table)
	}
	if lineOf(table, client.DefaultPrincipal, "grant_put", "put_grant", "dave: none -> cli-audit:QueueConsume") == "" { // Silo.Client acts as its ClientPrincipal
		t.Errorf("audit shows no put of dave's grant:\n%s", table)
	}
	var doc struct {
		Records []struct {
			Partition int             `json:"partition"`
			Record    json.RawMessage `json:"record"`
		} `json:"records"`
		NextAfter *string `json:"next_after"`
	}
	out := ok(t, s, "", "-o", "json", "audit", "--max", "1000")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("audit -o json: %v\n%s", err, out)
	}
	denials := 0
	for _, item := range doc.Records {
		rec := &orreryv1.AuditRecord{}
		if err := protojson.Unmarshal(item.Record, rec); err != nil {
			t.Fatal(err)
		}
		if rec.GetPrincipal() == "mallory" && rec.GetKind() == orreryv1.AuditKind_AUDIT_KIND_DENIED && rec.GetLoggedTimeUnixMicros() > 0 &&
			item.Partition == client.PartitionOf(lane, testPartitions) {
			denials++
		}
	}
	if denials != 1 || doc.NextAfter != nil {
		t.Errorf("audit -o json: %d denials of mallory in partition %d, next %v, want 1 and none:\n%s", denials, client.PartitionOf(lane, testPartitions), doc.NextAfter, out)
	}
	// The same denial again within a minute counts on its record (once the partition takes
	// apply version 16, which its leader raises when it opens).
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := s.Client().As("mallory").Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "m1", PayloadJson: `{}`}); !errors.Is(err, orrery.ErrUnauthorized) {
			t.Fatalf("mallory's enqueue again: %v, want Unauthorized", err)
		}
		table := ok(t, s, "", "audit", "--since", "1h", "--max", "1000")
		if lineOf(table, "mallory", "denied", "lacks QueuePublish", "more times until") != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit shows no repeated denial of mallory's enqueue:\n%s", table)
		}
	}
	if r := cli(t, s, "", "audit", "--since", "-1h"); r.code != 2 || !strings.Contains(r.stderr, "since") {
		t.Errorf("audit --since -1h: exit %d, stderr %q; want 2 naming since", r.code, r.stderr)
	}
}
