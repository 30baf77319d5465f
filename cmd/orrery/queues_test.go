package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/silo"
)

// queueFixture fills lane cli-queues/jobs/k1 of s: a and b dead-lettered, c leased for ten
// minutes, d delayed an hour and e visible.
func queueFixture(t *testing.T, s *silo.Silo) *orreryv1.Lane {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := s.Client()
	lane := &orreryv1.Lane{Namespace: "cli-queues", Queue: "jobs", Key: "k1"}
	partition := cl.PartitionOf(lane)
	enqueue := func(id string, edit func(*orreryv1.Enqueue)) {
		t.Helper()
		m := &orreryv1.Enqueue{Lane: lane, Id: id, PayloadJson: `{"id":"` + id + `"}`}
		if edit != nil {
			edit(m)
		}
		if _, err := cl.Enqueue(ctx, m); err != nil {
			t.Fatalf("enqueue %s: %v", id, err)
		}
	}
	receive := func(lease time.Duration) []*orreryv1.QueueMessage {
		t.Helper()
		msgs, err := cl.Receive(ctx, partition, &orreryv1.Receive{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Max: 10, LeaseDurationMicros: lease.Microseconds()}, 0)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		return msgs
	}
	for _, id := range []string{"a", "b"} {
		enqueue(id, func(m *orreryv1.Enqueue) { m.MaxDeliveries = 1 })
	}
	if got := receive(time.Second); len(got) != 2 {
		t.Fatalf("received %d of a, b", len(got))
	}
	// Once their one-second leases end, a receive moves both to the dead-letter queue.
	for deadline := time.Now().Add(30 * time.Second); ; {
		shares, err := cl.QueueStats(ctx, lane.GetNamespace(), lane.GetQueue(), lane.GetKey())
		if err != nil {
			t.Fatal(err)
		}
		if shares[0].Stats.GetDeadLettered() == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a and b not dead-lettered within 30s: %v", shares[0].Stats)
		}
		time.Sleep(200 * time.Millisecond)
		if got := receive(10 * time.Minute); len(got) != 0 {
			t.Fatalf("received %d dead messages", len(got))
		}
	}
	enqueue("c", nil)
	if got := receive(10 * time.Minute); len(got) != 1 || got[0].GetId() != "c" {
		t.Fatalf("received %v, want c", got)
	}
	enqueue("d", func(m *orreryv1.Enqueue) { m.DelayMicros = time.Hour.Microseconds() })
	enqueue("e", nil)
	return lane
}

// TestQueuesStatsPeekRedrive: stats counts the lane's states and its dead letters, as a table
// and as JSON, for one lane and for the whole queue; peek reads messages without leasing them;
// redrive-dlq moves dead letters back (at most --max), and a second redrive finds none.
func TestQueuesStatsPeekRedrive(t *testing.T) {
	s := startSilo(t)
	lane := queueFixture(t, s)
	partition := itoa(client.PartitionOf(lane, testPartitions))

	// PARTITION VISIBLE LEASED DELAYED DEAD-LETTERED OLDEST-VISIBLE-AGE COMPLETE PAUSED
	out := ok(t, s, "", "queues", "stats", "cli-queues", "jobs", "k1")
	f := strings.Fields(lineOf(out, "true"))
	if len(f) != 8 || f[7] != "-" || f[0] != partition || f[1] != "1" || f[2] != "1" || f[3] != "1" || f[4] != "2" || f[5] == "-" {
		t.Errorf("queues stats (lane): row %q\n%s", f, out)
	}
	var whole struct {
		Partitions []struct {
			Partition int `json:"partition"`
		} `json:"partitions"`
		Total struct {
			Visible, Leased, Delayed, DeadLettered uint64
			Age                                    *float64 `json:"oldest_visible_age_seconds"`
			Complete                               bool     `json:"complete"`
		} `json:"total"`
	}
	out = ok(t, s, "", "-o", "json", "queues", "stats", "cli-queues", "jobs")
	if err := json.Unmarshal([]byte(out), &whole); err != nil {
		t.Fatalf("stats -o json: %v\n%s", err, out)
	}
	if len(whole.Partitions) != testPartitions || whole.Total.Age == nil || !whole.Total.Complete {
		t.Errorf("queues stats -o json (queue):\n%s", out)
	}
	if !strings.Contains(out, `"visible": 1`) || !strings.Contains(out, `"dead_lettered": 2`) {
		t.Errorf("queues stats -o json (queue) totals:\n%s", out)
	}

	// ID ATTEMPT PRIORITY VISIBLE-AT LEASED-UNTIL PAYLOAD-BYTES DEAD-LETTERED-FROM UNIQUE-KEY
	// LAST-FAILED-AT LAST-ERROR, in id order.
	out = ok(t, s, "", "queues", "peek", "cli-queues", "jobs", "k1", "-n", "2")
	if c := strings.Fields(lineOf(out, "c ")); len(c) != 10 || c[1] != "1" || c[2] != "0" || c[4] == "-" || c[5] != "10" {
		t.Errorf("peek: row of c %q\n%s", c, out)
	}
	if d := strings.Fields(lineOf(out, "d ")); len(d) != 10 || d[1] != "0" || d[4] != "-" {
		t.Errorf("peek: row of d %q\n%s", d, out)
	}
	if lineOf(out, "e ") != "" || lineOf(out, "next page: --after d") == "" {
		t.Errorf("peek -n 2 is not one page of two:\n%s", out)
	}
	var dead struct {
		Messages []struct {
			ID          string `json:"id"`
			PayloadJSON string `json:"payload_json"`
			From        string `json:"dead_lettered_from"`
		} `json:"messages"`
	}
	out = ok(t, s, "", "-o", "json", "queues", "peek", "cli-queues", "jobs$dlq", "k1")
	if err := json.Unmarshal([]byte(out), &dead); err != nil {
		t.Fatal(err)
	}
	if len(dead.Messages) != 2 || dead.Messages[0].ID != "a" || dead.Messages[0].PayloadJSON != `{"id":"a"}` || dead.Messages[0].From != "jobs" {
		t.Errorf("peek of the dead-letter queue:\n%s", out)
	}
	// Peeking leased nothing: e is still visible.
	if f := strings.Fields(lineOf(ok(t, s, "", "queues", "stats", "cli-queues", "jobs", "k1"), "true")); len(f) != 8 || f[7] != "-" || f[1] != "1" {
		t.Errorf("after peeking: %q", f)
	}

	if out := ok(t, s, "", "queues", "redrive-dlq", "cli-queues", "jobs", "k1", "--max", "1"); lineOf(out, "redriven 1 dead letters") == "" {
		t.Errorf("redrive-dlq --max 1:\n%s", out)
	}
	var redriven struct {
		Redriven int      `json:"redriven"`
		IDs      []string `json:"ids"`
	}
	out = ok(t, s, "", "-o", "json", "queues", "redrive-dlq", "cli-queues", "jobs", "k1")
	if err := json.Unmarshal([]byte(out), &redriven); err != nil || redriven.Redriven != 1 || len(redriven.IDs) != 1 || redriven.IDs[0] != "b" {
		t.Errorf("redrive-dlq -o json (%v):\n%s", err, out)
	}
	if out := ok(t, s, "", "queues", "redrive-dlq", "cli-queues", "jobs", "k1"); lineOf(out, "redriven 0 dead letters") == "" {
		t.Errorf("second redrive-dlq:\n%s", out)
	}
	out = ok(t, s, "", "queues", "stats", "cli-queues", "jobs", "k1")
	if f := strings.Fields(lineOf(out, "true")); len(f) != 8 || f[7] != "-" || f[1] != "3" || f[4] != "0" {
		t.Errorf("stats after the redrive: row %q\n%s", f, out)
	}
}

// TestQueuesUsageErrors: wrong arguments exit 2 naming what is wrong.
func TestQueuesUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"queues"}, "stats, peek, redrive-dlq, pause, resume, retry-policy or limit"},
		{[]string{"queues", "stats", "ns"}, "NAMESPACE QUEUE [KEY]"},
		{[]string{"queues", "peek", "ns", "q"}, "NAMESPACE QUEUE KEY"},
		{[]string{"queues", "peek", "ns", "q", "k", "-n", "0"}, "n: must be"},
		{[]string{"queues", "redrive-dlq", "ns", "q", "k", "--max", "-1"}, "max"},
		{[]string{"queues", "redrive-dlq", "ns", "q", "k", "--bogus"}, "bogus"},
	} {
		r := cli(t, nil, "", tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("orrery %q: exit %d, stderr %q; want exit 2 naming %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}
