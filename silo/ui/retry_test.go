package ui_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/internal/testkit"
)

// TestUIShowsAQueuesRetryPolicyAndAMessagesLastFailure: a lane's row shows its queue's retry
// policy (attempts, backoff, what happens after), and peeking the lane shows a failed
// message's last failure: when, and its error.
func TestUIShowsAQueuesRetryPolicyAndAMessagesLastFailure(t *testing.T) {
	b := startBrowser(t)
	s := startSilo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "ui-retry", Queue: "jobs", Key: "k1"}
	cl := s.Client()
	// Retry policies need apply version 19, which each partition takes once its leader has opened.
	policy := &client.MessageRetry{MaxAttempts: 4, InitialBackoff: time.Minute, MaxBackoff: time.Hour, OnExhausted: client.RetryDrop}
	testkit.UntilTaken(t, 30*time.Second, "set the retry policy", func() error {
		return cl.SetQueueRetryPolicy(ctx, lane.GetNamespace(), lane.GetQueue(), policy)
	})
	if _, err := cl.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "flaky", PayloadJson: `{}`}); err != nil {
		t.Fatal(err)
	}
	msgs, err := cl.Receive(ctx, cl.PartitionOf(lane), &orreryv1.Receive{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Max: 1}, 0)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	if _, err := cl.ReleaseFailed(ctx, lane, "flaky", msgs[0].GetLease().GetToken(), client.Failure{Err: errors.New("gateway timeout"), Backoff: true}); err != nil {
		t.Fatal(err)
	}
	b.open("http://" + s.AdminAddress() + "/")
	b.typeInto("#token", testToken)
	b.click("#token-form button[type=submit]")
	b.typeInto("#namespace", lane.GetNamespace())
	b.click("#load")
	b.typeInto("#lane-queue", lane.GetQueue())
	b.typeInto("#lane-key", lane.GetKey())
	b.click("#lane-form button[type=submit]")
	row := `tr[data-lane="jobs/k1"]:not(.messages-row)`
	b.poll("the row showing the queue's retry policy", func() (bool, error) {
		text := b.textOf(row + " .badge.retry-policy")
		return strings.Contains(text, "4 attempts") && strings.Contains(text, "1 min→1 h") && strings.Contains(text, "then drop"), nil
	})
	b.click(row + " button.link")
	b.poll("the peeked message's last failure", func() (bool, error) {
		text := b.textOf(`tr.messages-row li[data-message-id="flaky"] .last-failure`)
		return strings.Contains(text, "gateway timeout") && strings.Contains(text, "failed "), nil
	})
	if text := b.textOf(`tr.messages-row li[data-message-id="flaky"]`); !strings.Contains(text, "deliveries 1") {
		t.Fatalf("the peeked message: %q, want its one delivery", text)
	}
}
