package silo

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// TestAdminSetsAQueuesRetryPolicy: PUT /v1/queues/{ns}/{queue}/retry-policy sets the policy on
// every partition, GET /v1/queues/{ns}/{queue} shows it (and on how many partitions), a lane's
// page shows a failed message's attempt and last error, an invalid policy is 400 naming its
// field, and DELETE removes the policy.
func TestAdminSetsAQueuesRetryPolicy(t *testing.T) {
	t.Parallel()
	s := startSilo(t, t.TempDir(), nil)
	waitReady(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := "http://" + s.AdminAddress() + "/v1/queues/retry-admin/jobs"
	code, body := send(t, http.MethodPut, base+"/retry-policy", `{"max_attempts": 3, "initial_backoff_micros": "60000000", "max_backoff_micros": "600000000", "on_exhausted": "RETRY_EXHAUSTED_DROP"}`, nil)
	if policy, _ := body["policy"].(map[string]any); code != http.StatusOK || policy["max_attempts"] != float64(3) || policy["on_exhausted"] != "RETRY_EXHAUSTED_DROP" {
		t.Fatalf("put retry policy: %d %v", code, body)
	}
	code, body = getJSON(t, base)
	partitions, _ := body["partitions"].([]any)
	if policy, _ := body["retry_policy"].(map[string]any); code != http.StatusOK || body["retry_policy_partitions"] != float64(len(partitions)) || len(partitions) == 0 ||
		policy["set_by"] == "" || policy["policy"].(map[string]any)["max_attempts"] != float64(3) {
		t.Fatalf("queue after the put: %d %v", code, body)
	}
	lane := &orreryv1.Lane{Namespace: "retry-admin", Queue: "jobs", Key: "k"}
	cl := s.Client()
	if _, err := cl.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "a", PayloadJson: `{}`}); err != nil {
		t.Fatal(err)
	}
	msgs, err := cl.Receive(ctx, cl.PartitionOf(lane), &orreryv1.Receive{Namespace: "retry-admin", Queue: "jobs", Max: 1}, 0)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	if _, err := cl.ReleaseFailed(ctx, lane, "a", msgs[0].GetLease().GetToken(), client.Failure{Err: errors.New("upstream 503"), Backoff: true}); err != nil {
		t.Fatal(err)
	}
	code, body = getJSON(t, "http://"+s.AdminAddress()+"/v1/lanes/retry-admin/jobs/k")
	if code != http.StatusOK || !strings.Contains(jsonText(t, body), `"last_error":"upstream 503"`) || !strings.Contains(jsonText(t, body), `"last_failed_at_unix_micros"`) {
		t.Fatalf("the lane after a failure: %d %v", code, body)
	}
	code, body = send(t, http.MethodPut, base+"/retry-policy", `{"jitter_percent": 150}`, nil)
	if e, _ := body["error"].(map[string]any); code != http.StatusBadRequest || !strings.HasSuffix(e["field"].(string), "policy.jitter_percent") {
		t.Fatalf("an invalid policy: %d %v", code, body)
	}
	if code, body = send(t, http.MethodDelete, base+"/retry-policy", "", nil); code != http.StatusOK || body["policy"] != nil {
		t.Fatalf("delete retry policy: %d %v", code, body)
	}
	if code, body = getJSON(t, base); code != http.StatusOK || body["retry_policy"] != nil || body["retry_policy_partitions"] != float64(0) {
		t.Fatalf("queue after the delete: %d %v", code, body)
	}
}

// jsonText is v as compact JSON, for checks of what a reply contains.
func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
