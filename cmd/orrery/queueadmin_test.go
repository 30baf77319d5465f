package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/internal/testkit"
	"github.com/orreryhq/orrery/silo"
)

// TestQueuesPauseResume: queues pause stops the queue's receives on every partition and stats
// shows who paused it and why; queues resume lets a receive lease again. Missing arguments are
// a usage error.
func TestQueuesPauseResume(t *testing.T) {
	s := startSilo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "cli-pause", Queue: "jobs", Key: "k1"}
	if _, err := s.Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "a", PayloadJson: `{}`}); err != nil {
		t.Fatal(err)
	}
	if out := ok(t, s, "", "queues", "pause", "cli-pause", "jobs", "--reason", "deploy"); !strings.HasPrefix(out, "paused queue cli-pause/jobs on all") {
		t.Fatalf("pause printed %q", out)
	}
	receive := func() int {
		msgs, err := s.Client().Receive(ctx, s.Client().PartitionOf(lane), &orreryv1.Receive{Namespace: "cli-pause", Queue: "jobs", Max: 10}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(msgs)
	}
	if n := receive(); n != 0 {
		t.Fatalf("a paused queue leased %d", n)
	}
	out := ok(t, s, "", "queues", "stats", "cli-pause", "jobs")
	if !strings.Contains(out, ": deploy") || !strings.Contains(out, "paused on ") {
		t.Fatalf("stats of the paused queue:\n%s", out)
	}
	var stats struct {
		Total struct {
			PausedPartitions int `json:"paused_partitions"`
		} `json:"total"`
	}
	if err := json.Unmarshal([]byte(ok(t, s, "", "-o", "json", "queues", "stats", "cli-pause", "jobs")), &stats); err != nil || stats.Total.PausedPartitions == 0 {
		t.Fatalf("stats JSON: %+v (%v)", stats, err)
	}
	ok(t, s, "", "queues", "resume", "cli-pause", "jobs")
	if n := receive(); n != 1 {
		t.Fatalf("after the resume a receive leased %d", n)
	}
	if r := cli(t, s, "", "queues", "pause", "cli-pause"); r.code != 2 {
		t.Errorf("pause without a queue: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestMessagesCancel: messages cancel removes a visible message, says so again for a second
// cancel, revokes a leased message's lease, and fails naming the id for an unknown one.
func TestMessagesCancel(t *testing.T) {
	s := startSilo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "cli-cancel", Queue: "jobs", Key: "k1"}
	for _, id := range []string{"a", "b"} {
		if _, err := s.Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: id, PayloadJson: `{}`}); err != nil {
			t.Fatal(err)
		}
	}
	if out := ok(t, s, "", "messages", "cancel", "cli-cancel", "jobs", "k1", "a", "--reason", "duplicate"); !strings.HasPrefix(out, "cancelled message a: removed") {
		t.Fatalf("cancel printed %q", out)
	}
	if out := ok(t, s, "", "messages", "cancel", "cli-cancel", "jobs", "k1", "a"); !strings.Contains(out, "nothing changed") {
		t.Fatalf("a second cancel printed %q", out)
	}
	if _, err := s.Client().Receive(ctx, s.Client().PartitionOf(lane), &orreryv1.Receive{Namespace: "cli-cancel", Queue: "jobs", Max: 10}, 0); err != nil {
		t.Fatal(err)
	}
	var res struct{ Outcome string }
	if err := json.Unmarshal([]byte(ok(t, s, "", "-o", "json", "messages", "cancel", "cli-cancel", "jobs", "k1", "b")), &res); err != nil || res.Outcome != "lease_revoked" {
		t.Fatalf("cancel of the leased message: %+v (%v)", res, err)
	}
	if r := cli(t, s, "", "messages", "cancel", "cli-cancel", "jobs", "k1", "nope"); r.code != 1 || !strings.Contains(r.stderr, "not found: mutations[0].cancel_message.id") {
		t.Errorf("cancel of an unknown id: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := cli(t, s, "", "messages", "cancel", "cli-cancel", "jobs", "k1"); r.code != 2 {
		t.Errorf("cancel without an id: exit %d, stderr %q", r.code, r.stderr)
	}
}

// okOnceTaken is ok for a command the silo's partitions take once their leaders have raised
// their apply version, which they do when they open: it runs the command again while it is
// refused for the apply version, for up to 20 s.
func okOnceTaken(t *testing.T, s *silo.Silo, args ...string) string {
	t.Helper()
	var out string
	testkit.UntilTaken(t, 20*time.Second, "orrery "+strings.Join(args, " "), func() error {
		r := cli(t, s, "", args...)
		if r.code != 0 {
			return fmt.Errorf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		out = r.stdout
		return nil
	})
	return out
}

// TestMessagesEnqueuePriority: messages enqueue stores a message with its --priority (JSON says
// whether it was created), queues peek shows each message's priority, and a receive leases the
// higher priority first; a priority outside 0..9 fails naming the field.
func TestMessagesEnqueuePriority(t *testing.T) {
	s := startSilo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out := ok(t, s, "", "messages", "enqueue", "cli-priority", "jobs", "k1", "--id", "low", "--payload", `{"n":1}`); !strings.HasPrefix(out, "enqueued message low") {
		t.Fatalf("enqueue printed %q", out)
	}
	var res struct {
		ID      string
		Created bool
	}
	if err := json.Unmarshal([]byte(okOnceTaken(t, s, "-o", "json", "messages", "enqueue", "cli-priority", "jobs", "k1", "--id", "high", "--priority", "8")), &res); err != nil || res.ID != "high" || !res.Created {
		t.Fatalf("enqueue -o json: %+v (%v)", res, err)
	}
	if out := ok(t, s, "", "messages", "enqueue", "cli-priority", "jobs", "k1", "--id", "high", "--priority", "8"); !strings.Contains(out, "nothing stored") {
		t.Fatalf("a repeated enqueue printed %q", out)
	}
	if r := cli(t, s, "", "messages", "enqueue", "cli-priority", "jobs", "k1", "--priority", "10"); r.code != 1 || !strings.Contains(r.stderr, "mutations[0].enqueue.priority") {
		t.Errorf("priority 10: exit %d, stderr %q", r.code, r.stderr)
	}
	// ID ATTEMPT PRIORITY VISIBLE-AT ...
	out := ok(t, s, "", "queues", "peek", "cli-priority", "jobs", "k1")
	if h := strings.Fields(lineOf(out, "high ")); len(h) != 10 || h[2] != "8" {
		t.Errorf("peek: row of high %q\n%s", h, out)
	}
	if l := strings.Fields(lineOf(out, "low ")); len(l) != 10 || l[2] != "0" {
		t.Errorf("peek: row of low %q\n%s", l, out)
	}
	lane := &orreryv1.Lane{Namespace: "cli-priority", Queue: "jobs", Key: "k1"}
	msgs, err := s.Client().Receive(ctx, s.Client().PartitionOf(lane), &orreryv1.Receive{Namespace: "cli-priority", Queue: "jobs", Max: 10}, 0)
	if err != nil || len(msgs) != 2 || msgs[0].GetId() != "high" || msgs[0].GetPriority() != 8 {
		t.Fatalf("received %v (%v), want high (priority 8) first", msgs, err)
	}
}

// TestQueuesLimit: queues limit caps a queue on every partition and stats shows the cap and
// the shares; --remove lifts it; neither limit nor --remove, or both, is a usage error.
func TestQueuesLimit(t *testing.T) {
	s := startSilo(t)
	if out := ok(t, s, "", "queues", "limit", "cli-limit", "jobs", "--max-leased", "3", "--per-second", "5"); !strings.HasPrefix(out, "limited queue cli-limit/jobs to 3 leased at once, 5 leases/s on all") {
		t.Fatalf("limit printed %q", out)
	}
	if out := ok(t, s, "", "queues", "stats", "cli-limit", "jobs"); !strings.Contains(out, "limited to 3 leased at once, 5 leases/s cluster-wide") {
		t.Fatalf("stats of the capped queue:\n%s", out)
	}
	if out := ok(t, s, "", "queues", "limit", "cli-limit", "jobs", "--remove"); !strings.HasPrefix(out, "removed the limits of queue cli-limit/jobs") {
		t.Fatalf("remove printed %q", out)
	}
	if out := ok(t, s, "", "queues", "stats", "cli-limit", "jobs"); strings.Contains(out, "limited to") {
		t.Fatalf("stats after the removal:\n%s", out)
	}
	for _, args := range [][]string{{"queues", "limit", "cli-limit", "jobs"}, {"queues", "limit", "cli-limit", "jobs", "--remove", "--max-leased", "1"}} {
		if r := cli(t, s, "", args...); r.code != 2 {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}
