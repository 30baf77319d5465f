package silo

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/cluster/raftnet"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/internal/testkit"
)

// messagesLike returns the records whose message starts with prefix and, when partition is
// not negative, whose partition attribute is it.
func (r *recorded) messagesLike(prefix string, partition int) []slog.Record {
	return r.find(func(rec slog.Record) bool {
		if !strings.HasPrefix(rec.Message, prefix) {
			return false
		}
		if partition < 0 {
			return true
		}
		match := false
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "partition" && a.Value.String() == strconv.Itoa(partition) {
				match = true
			}
			return true
		})
		return match
	})
}

// gaugeOf is the value of family name's sample labelled partition=p (-1 when absent).
func (sc scrape) gaugeOf(name string, p int) float64 {
	f, ok := sc[name]
	if !ok {
		return -1
	}
	for _, m := range f.GetMetric() {
		if labelOf(m, "partition") == strconv.Itoa(p) {
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// TestWatchdogReportsAScheduleIntoAFullLane: a schedule whose lane is full fails every emit.
// The silo logs it failing once across its retries, /metrics counts it failing in its
// partition, and the schedule's inspection (admin JSON, the client) says failing with the
// reason; once the lane has room the silo logs its recovery once and all of it clears.
func TestWatchdogReportsAScheduleIntoAFullLane(t *testing.T) {
	logs := &recorded{}
	limits := input.DefaultLimits()
	limits.MaxLaneMessages = 1
	s := startSilo(t, t.TempDir(), func(c *Config) { c.Limits, c.Logger, c.LateAfter = limits, slog.New(logs), 2*time.Second })
	waitReady(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "watch", Queue: "jobs", Key: "full"}
	partition := s.Client().PartitionOf(lane)
	if _, err := s.Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "filler", PayloadJson: `{}`}); err != nil {
		t.Fatal(err)
	}
	def := client.NamedSchedule(lane, "stuck", client.Every(time.Hour, time.Now()), `{}`)
	if _, err := s.Client().ConfigureSchedule(ctx, def, 0); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "three failed emits", func() bool { return s.CoordinatorStats().RefsSkipped >= 3 })

	if n := len(logs.messagesLike("due coordinator: schedule failing", partition)); n != 1 {
		t.Fatalf("%d failing log lines after three failed emits, want 1", n)
	}
	sc := scrapeMetrics(t, s)
	if got := sc.gaugeOf("orrery_due_failing_records", partition); got != 1 {
		t.Fatalf("orrery_due_failing_records{partition=%d} = %v, want 1", partition, got)
	}
	changes := sc.sum(t, "orrery_due_liveness_changes_total")
	if changes < 1 {
		t.Fatalf("orrery_due_liveness_changes_total = %v", changes)
	}
	in, err := s.Client().ScheduleInspection(ctx, lane, def.GetScheduleId())
	if err != nil {
		t.Fatal(err)
	}
	if l := in.GetLiveness(); l.GetState() != "failing" || !strings.Contains(l.GetReason(), "lane") || l.GetSinceUnixMicros() == 0 {
		t.Fatalf("inspection liveness %v, want failing for the full lane", l)
	}
	adminPath := fmt.Sprintf("http://%s/v1/schedules/watch/jobs/full/%s", s.AdminAddress(), def.GetScheduleId())
	code, doc := getJSON(t, adminPath)
	if l, _ := doc["liveness"].(map[string]any); code != http.StatusOK || l["state"] != "failing" || l["since"] == nil {
		t.Fatalf("admin schedule JSON %d liveness %v, want failing with since", code, doc["liveness"])
	}

	msgs, err := s.Client().Receive(ctx, partition, &orreryv1.Receive{Namespace: "watch", Queue: "jobs", Max: 10, Owner: "w"}, 0)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive the filler: %v %v", msgs, err)
	}
	if _, err := s.Client().Ack(ctx, lane, msgs[0].GetId(), msgs[0].GetLease().GetToken()); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "the recovery logged", func() bool {
		return len(logs.messagesLike("due coordinator: schedule recovered", partition)) == 1
	})
	in, err = s.Client().ScheduleInspection(ctx, lane, def.GetScheduleId())
	if err != nil || in.GetLiveness() != nil {
		t.Fatalf("inspection liveness after recovery %v (%v), want none", in.GetLiveness(), err)
	}
	if _, doc := getJSON(t, adminPath); doc["liveness"] != nil {
		t.Fatalf("admin schedule JSON liveness after recovery %v, want null", doc["liveness"])
	}
	sc = scrapeMetrics(t, s)
	if got := sc.gaugeOf("orrery_due_failing_records", partition); got != 0 {
		t.Fatalf("orrery_due_failing_records{partition=%d} after recovery = %v, want 0", partition, got)
	}
	if got := sc.sum(t, "orrery_due_liveness_changes_total"); got != changes+1 {
		t.Fatalf("orrery_due_liveness_changes_total %v → %v, want one more", changes, got)
	}
	if n := len(logs.messagesLike("due coordinator: schedule failing", partition)); n != 1 {
		t.Fatalf("%d failing log lines in all, want 1", n)
	}
}

// TestQuorumWatchReportsAnIsolatedReplica: a silo cut off from the two others sees no leader
// of any partition; past the bound it logs each partition without quorum once, /metrics and
// /v1/partitions say so, and the two others report nothing. Healed, it logs each partition's
// leader again and the gauge clears.
func TestQuorumWatchReportsAnIsolatedReplica(t *testing.T) {
	const partitions = 2
	// Above two election timeouts of the loopback profile, so that the majority's election
	// after the cut is not itself reported.
	const quorumBound = 4 * time.Second
	var mu sync.Mutex
	logs := map[string]*recorded{} // by data dir
	silos := startFounders(t, 3, partitions, func(c *Config) {
		mu.Lock()
		defer mu.Unlock()
		logs[c.DataDir] = &recorded{}
		c.Logger, c.RaftFaults, c.LateAfter = slog.New(logs[c.DataDir]), &raftnet.Faults{}, quorumBound
	})
	logOf := func(s *Silo) *recorded {
		mu.Lock()
		defer mu.Unlock()
		return logs[s.cfg.DataDir]
	}
	testkit.Eventually(t, 60*time.Second, "every partition to have three voters and a leader everywhere", func() bool {
		for _, s := range silos {
			for n := range partitions {
				if st, ok := s.host.Status(n); !ok || st.Leader == 0 || len(st.Voters) != 3 {
					return false
				}
			}
		}
		return true
	})
	cut := silos[0]
	for _, s := range silos[1:] {
		s.cfg.RaftFaults.Cut(cut.SiloID())
		cut.cfg.RaftFaults.Cut(s.SiloID())
	}
	cutLogs := logOf(cut)
	testkit.Eventually(t, 60*time.Second, "every partition reported without quorum on the cut-off silo", func() bool {
		for n := range partitions {
			if len(cutLogs.messagesLike("partition without quorum", n)) != 1 {
				return false
			}
		}
		return true
	})
	reportedAt := time.Now()
	sc := scrapeMetrics(t, cut)
	for n := range partitions {
		if got := sc.gaugeOf("orrery_partition_without_quorum", n); got != 1 {
			for _, r := range cutLogs.messagesLike("partition", -1) {
				t.Log(r.Time.Format("15:04:05.000"), r.Message)
			}
			t.Fatalf("orrery_partition_without_quorum{partition=%d} on the cut-off silo = %v, want 1", n, got)
		}
	}
	_, table := getJSON(t, "http://"+cut.AdminAddress()+"/v1/partitions")
	for _, row := range table["partitions"].([]any) {
		replica := row.(map[string]any)["replica"].(map[string]any)
		if replica["without_quorum_since"] == nil {
			t.Fatalf("/v1/partitions row %v has no without_quorum_since", row)
		}
	}
	// More checks go by: the report is not repeated.
	testkit.Eventually(t, 20*time.Second, "two more bounds to pass", func() bool { return time.Since(reportedAt) > 2*quorumBound })
	for n := range partitions {
		if got := len(cutLogs.messagesLike("partition without quorum", n)); got != 1 {
			t.Fatalf("partition %d reported without quorum %d times, want once", n, got)
		}
	}
	for _, s := range silos[1:] {
		if got := logOf(s).messagesLike("partition without quorum", -1); len(got) != 0 {
			t.Fatalf("silo %d of the majority reported %d partitions without quorum", s.SiloID(), len(got))
		}
	}

	for _, s := range silos {
		s.cfg.RaftFaults.HealAll()
	}
	testkit.Eventually(t, 60*time.Second, "every partition's leader again on the healed silo", func() bool {
		for n := range partitions {
			if len(cutLogs.messagesLike("partition has a leader again", n)) != 1 {
				return false
			}
		}
		return true
	})
	sc = scrapeMetrics(t, cut)
	for n := range partitions {
		if got := sc.gaugeOf("orrery_partition_without_quorum", n); got != 0 {
			t.Fatalf("orrery_partition_without_quorum{partition=%d} after healing = %v, want 0", n, got)
		}
	}
	if got := sc.sum(t, "orrery_partition_quorum_changes_total"); got != 2*partitions {
		t.Fatalf("orrery_partition_quorum_changes_total = %v, want %d", got, 2*partitions)
	}
}
