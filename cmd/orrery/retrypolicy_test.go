package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// TestQueuesRetryPolicy: queues retry-policy sets a queue's policy on every partition (queues
// stats shows it), so a failed release backs off by it; queues peek shows the attempt, when it failed and its error
// (on one line in the table, whole in JSON); --remove removes the policy; a bad
// --on-exhausted, or no flag at all, is a usage error, and a policy the partition refuses
// names its field.
func TestQueuesRetryPolicy(t *testing.T) {
	s := startSilo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := ok(t, s, "", "queues", "retry-policy", "cli-retry", "jobs", "--max-attempts", "2", "--initial-backoff", "1h", "--jitter", "10")
	if !strings.HasPrefix(out, "set the retry policy of queue cli-retry/jobs on all") || !strings.Contains(out, "backoff 1h0m0s doubling to 1h0m0s, jitter 10%; after 2 attempts, dead-letter") {
		t.Fatalf("retry-policy printed %q", out)
	}
	if out := ok(t, s, "", "queues", "stats", "cli-retry", "jobs"); !strings.Contains(out, "retry policy on ") || !strings.Contains(out, "after 2 attempts, dead-letter") {
		t.Fatalf("stats show no retry policy:\n%s", out)
	}
	lane := &orreryv1.Lane{Namespace: "cli-retry", Queue: "jobs", Key: "k1"}
	cl := s.Client()
	if _, err := cl.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "a", PayloadJson: `{}`}); err != nil {
		t.Fatal(err)
	}
	msgs, err := cl.Receive(ctx, cl.PartitionOf(lane), &orreryv1.Receive{Namespace: "cli-retry", Queue: "jobs", Max: 10}, 0)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	if _, err := cl.ReleaseFailed(ctx, lane, "a", msgs[0].GetLease().GetToken(), client.Failure{Err: errors.New("card declined\nby the bank"), Backoff: true}); err != nil {
		t.Fatal(err)
	}
	out = ok(t, s, "", "queues", "peek", "cli-retry", "jobs", "k1")
	if !strings.Contains(out, "LAST-ERROR") || !strings.Contains(out, "card declined by the bank") {
		t.Fatalf("peek after a failure:\n%s", out)
	}
	var peeked struct {
		Messages []struct {
			DeliveryCount uint32 `json:"delivery_count"`
			LastError     string `json:"last_error"`
			VisibleAt     string `json:"visible_at_unix_micros"`
			LastFailedAt  string `json:"last_failed_at_unix_micros"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(ok(t, s, "", "-o", "json", "queues", "peek", "cli-retry", "jobs", "k1")), &peeked); err != nil || len(peeked.Messages) != 1 {
		t.Fatalf("peek JSON: %+v (%v)", peeked, err)
	}
	if m := peeked.Messages[0]; m.DeliveryCount != 1 || m.LastError != "card declined\nby the bank" || m.LastFailedAt == "" || m.VisibleAt <= m.LastFailedAt {
		t.Fatalf("peek JSON shows %+v", m)
	}
	ok(t, s, "", "queues", "retry-policy", "cli-retry", "jobs", "--remove")
	if out := ok(t, s, "", "queues", "stats", "cli-retry", "jobs"); strings.Contains(out, "retry policy") {
		t.Fatalf("stats after --remove:\n%s", out)
	}
	if r := cli(t, s, "", "queues", "retry-policy", "cli-retry", "jobs", "--on-exhausted", "retry-forever"); r.code != 2 {
		t.Errorf("a bad --on-exhausted: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := cli(t, s, "", "queues", "retry-policy", "cli-retry", "jobs"); r.code != 2 {
		t.Errorf("no policy flag: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := cli(t, s, "", "queues", "retry-policy", "cli-retry", "jobs", "--jitter", "150"); r.code == 0 || !strings.Contains(r.stderr, "jitter_percent") {
		t.Errorf("jitter 150: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestMessagesAndSchedulesCarryTheirOwnRetryPolicy: messages enqueue --retry-… stores the
// message with its own retry policy (peek's JSON shows it), schedules create --retry-… gives
// each occurrence one (describe's JSON shows it), and a bad --retry-on-exhausted is a usage
// error naming the flag.
func TestMessagesAndSchedulesCarryTheirOwnRetryPolicy(t *testing.T) {
	s := startSilo(t)
	okOnceTaken(t, s, "messages", "enqueue", "cli-own-retry", "jobs", "k1", "--id", "a", "--payload", `{}`,
		"--retry-max-attempts", "3", "--retry-initial-backoff", "2s", "--retry-on-exhausted", "drop")
	var peeked struct {
		Messages []struct {
			Retry struct {
				MaxAttempts    uint32 `json:"max_attempts"`
				InitialBackoff string `json:"initial_backoff_micros"`
				MaxBackoff     string `json:"max_backoff_micros"`
				OnExhausted    string `json:"on_exhausted"`
			} `json:"retry"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(ok(t, s, "", "-o", "json", "queues", "peek", "cli-own-retry", "jobs", "k1")), &peeked); err != nil || len(peeked.Messages) != 1 {
		t.Fatalf("peek JSON: %+v (%v)", peeked, err)
	}
	if r := peeked.Messages[0].Retry; r.MaxAttempts != 3 || r.InitialBackoff != "2000000" || r.MaxBackoff != "3600000000" || r.OnExhausted != "RETRY_EXHAUSTED_DROP" {
		t.Fatalf("the message's retry policy: %+v", r)
	}
	if r := cli(t, s, "", "messages", "enqueue", "cli-own-retry", "jobs", "k1", "--retry-on-exhausted", "never"); r.code != 2 || !strings.Contains(r.stderr, "retry-on-exhausted") {
		t.Errorf("a bad --retry-on-exhausted: exit %d, stderr %q", r.code, r.stderr)
	}
	ok(t, s, "", "schedules", "create", "nightly", "--namespace", "cli-own-retry", "--queue", "jobs", "--every", "1h",
		"--retry-max-attempts", "5", "--retry-jitter", "20")
	described := ok(t, s, "", "schedules", "describe", "cli-own-retry", "jobs", "nightly", "nightly")
	if !strings.Contains(described, "retry policy") || !strings.Contains(described, "jitter 20%; after 5 attempts, dead-letter (each occurrence's)") {
		t.Fatalf("describe shows no retry policy of 5 attempts:\n%s", described)
	}
	doc := ok(t, s, "", "-o", "json", "schedules", "describe", "cli-own-retry", "jobs", "nightly", "nightly")
	if !strings.Contains(doc, `"max_attempts": 5`) || !strings.Contains(doc, `"jitter_percent": 20`) {
		t.Fatalf("describe's JSON shows no retry policy of 5 attempts:\n%s", doc)
	}
}
