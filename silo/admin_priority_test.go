package silo

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/internal/testkit"
)

// enqueueOnceTaken enqueues m, again while the partition refuses it for its apply version (its
// leader raises it when it opens), for up to 30 s.
func enqueueOnceTaken(ctx context.Context, t *testing.T, s *Silo, m *orreryv1.Enqueue) {
	t.Helper()
	testkit.UntilTaken(t, 30*time.Second, "enqueue "+m.GetId(), func() error {
		_, err := s.Client().Enqueue(ctx, m)
		return err
	})
}

// TestAdminLaneShowsPriorities: GET /v1/lanes/{ns}/{queue}/{key} shows each message's priority
// (0 for one enqueued without).
func TestAdminLaneShowsPriorities(t *testing.T) {
	t.Parallel()
	s := startSilo(t, t.TempDir(), nil)
	waitReady(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "admin-priority", Queue: "jobs", Key: "k"}
	enqueueOnceTaken(ctx, t, s, &orreryv1.Enqueue{Lane: lane, Id: "a", PayloadJson: `{}`, Priority: 7})
	enqueueOnceTaken(ctx, t, s, &orreryv1.Enqueue{Lane: lane, Id: "b", PayloadJson: `{}`})
	resp, err := http.Get("http://" + s.AdminAddress() + "/v1/lanes/admin-priority/jobs/k")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Messages []struct {
			ID       string `json:"id"`
			Priority *int   `json:"priority"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET lane: %d (%v)", resp.StatusCode, err)
	}
	if len(page.Messages) != 2 || page.Messages[0].ID != "a" || page.Messages[0].Priority == nil || *page.Messages[0].Priority != 7 ||
		page.Messages[1].Priority == nil || *page.Messages[1].Priority != 0 {
		t.Fatalf("lane page %+v, want a of priority 7 and b of priority 0", page.Messages)
	}
}
