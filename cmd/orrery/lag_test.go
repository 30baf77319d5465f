package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// TestLagShowsEveryPartitionAndAQueuesBacklog: lag has a row per partition; with --queue it
// counts the queue's visible messages and the age of the oldest, and --fail-over exits 1 once
// that age passes it.
func TestLagShowsEveryPartitionAndAQueuesBacklog(t *testing.T) {
	s := startSilo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "cli-lag", Queue: "jobs", Key: "k"}
	if _, err := s.Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "m1", PayloadJson: `{}`}); err != nil {
		t.Fatal(err)
	}
	table := ok(t, s, "", "lag")
	if !strings.HasPrefix(table, "PARTITION") || strings.Count(table, "\n") != testPartitions+1 {
		t.Fatalf("lag table:\n%s", table)
	}
	var doc struct {
		Partitions []struct {
			Partition int     `json:"partition"`
			Visible   uint64  `json:"visible"`
			Age       float64 `json:"oldest_visible_age_seconds"`
			Error     string  `json:"error"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(ok(t, s, "", "-o", "json", "lag", "--namespace", "cli-lag", "--queue", "jobs")), &doc); err != nil {
		t.Fatal(err)
	}
	visible := 0
	for _, p := range doc.Partitions {
		if p.Error != "" {
			t.Errorf("partition %d: %s", p.Partition, p.Error)
		}
		if p.Visible > 0 {
			visible += int(p.Visible)
			if p.Age <= 0 {
				t.Errorf("partition %d: the oldest message is %.3f s old, want its age", p.Partition, p.Age)
			}
		}
	}
	if len(doc.Partitions) != testPartitions || visible != 1 {
		t.Fatalf("lag -o json: %+v, want %d partitions and the one visible message", doc, testPartitions)
	}
	if r := cli(t, s, "", "lag", "--namespace", "cli-lag", "--queue", "jobs", "--fail-over", "1ms"); r.code != 1 || !strings.Contains(r.stderr, "behind by more than 1ms") {
		t.Errorf("lag --fail-over 1ms with a message older than that: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := cli(t, s, "", "lag", "--fail-over", "1h"); r.code != 0 {
		t.Errorf("lag --fail-over 1h: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := cli(t, s, "", "lag", "--queue", "jobs"); r.code != 2 {
		t.Errorf("lag --queue without --namespace: exit %d", r.code)
	}
}
