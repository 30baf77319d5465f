package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/silo"
)

// TestDescribeSaysFailing: describe of a schedule whose lane is full shows the due
// coordinator's "failing" with the reason, as a row and in -o json.
func TestDescribeSaysFailing(t *testing.T) {
	limits := input.DefaultLimits()
	limits.MaxLaneMessages = 1
	s := startSilo(t, func(c *silo.Config) { c.Limits = limits })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "cli-watch", Queue: "jobs", Key: "full"}
	if _, err := s.Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "filler", PayloadJson: `{}`}); err != nil {
		t.Fatal(err)
	}
	def := client.NamedSchedule(lane, "stuck", client.Every(time.Hour, time.Now()), `{}`)
	if _, err := s.Client().ConfigureSchedule(ctx, def, 0); err != nil {
		t.Fatal(err)
	}
	args := []string{"schedules", "describe", lane.GetNamespace(), lane.GetQueue(), lane.GetKey(), def.GetScheduleId()}
	var described string
	deadline := time.Now().Add(30 * time.Second)
	for described = ok(t, s, "", args...); lineOf(described, "liveness", "failing") == ""; described = ok(t, s, "", args...) {
		if time.Now().After(deadline) {
			t.Fatalf("describe never said failing:\n%s", described)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if line := lineOf(described, "liveness", "failing"); !strings.Contains(line, "lane") {
		t.Errorf("liveness row %q does not give the full lane as the reason", line)
	}
	var doc struct {
		Liveness   string `json:"liveness"`
		Inspection struct {
			Liveness struct {
				State  string `json:"state"`
				Reason string `json:"reason"`
			} `json:"liveness"`
		} `json:"inspection"`
	}
	if err := json.Unmarshal([]byte(ok(t, s, "", append([]string{"-o", "json"}, args...)...)), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Liveness != "failing" || doc.Inspection.Liveness.State != "failing" || doc.Inspection.Liveness.Reason == "" {
		t.Errorf("describe -o json: %+v", doc)
	}
}
