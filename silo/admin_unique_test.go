package silo

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// TestAdminLanePeekShowsTheUniqueKey: GET /v1/lanes/{ns}/{queue}/{key} shows the unique key a
// message took (unique_key), and an empty one for a message without.
func TestAdminLanePeekShowsTheUniqueKey(t *testing.T) {
	t.Parallel()
	s := startSilo(t, t.TempDir(), nil)
	waitReady(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "admin-unique", Queue: "jobs", Key: "k"}
	if _, err := s.Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "a", PayloadJson: `1`, Unique: client.Unique("report-7", time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "b", PayloadJson: `2`, Unique: client.Unique("report-7", 0)}); err != nil || res.GetDuplicateOf() != "a" {
		t.Fatalf("duplicate: %v %v", res, err)
	}
	if _, err := s.Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "c", PayloadJson: `3`}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + s.AdminAddress() + "/v1/lanes/admin-unique/jobs/k")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Messages []struct {
			ID        string `json:"id"`
			UniqueKey string `json:"unique_key"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || len(page.Messages) != 2 ||
		page.Messages[0].ID != "a" || page.Messages[0].UniqueKey != "report-7" || page.Messages[1].ID != "c" || page.Messages[1].UniqueKey != "" {
		t.Fatalf("lane page: %+v (%v), want a with unique_key report-7 and c without", page, err)
	}
}
