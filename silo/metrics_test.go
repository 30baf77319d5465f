package silo

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/internal/testkit"
)

// scrape is one parse of a silo's /metrics.
type scrape map[string]*dto.MetricFamily

func scrapeMetrics(t *testing.T, s *Silo) scrape {
	t.Helper()
	resp, err := http.Get("http://" + s.AdminAddress() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

// samples returns the samples of family name, failing when it is absent.
func (sc scrape) samples(t *testing.T, name string) []*dto.Metric {
	t.Helper()
	f, ok := sc[name]
	if !ok || len(f.GetMetric()) == 0 {
		t.Fatalf("/metrics has no series %s", name)
	}
	return f.GetMetric()
}

// sum adds up the values of every sample of a counter or gauge family (a histogram's counts).
func (sc scrape) sum(t *testing.T, name string) float64 {
	t.Helper()
	total := 0.0
	for _, m := range sc.samples(t, name) {
		switch {
		case m.GetCounter() != nil:
			total += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			total += m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// A silo's /metrics, scraped during a workload of an Every 1s schedule and a worker: every
// series names the silo; each partition reports its term (at least 1) and exactly one leader
// in all (this silo, the only one); and between a scrape before the occurrences and one after
// three were handled, the enqueue lateness histogram, the per-partition occurrence counters,
// the due coordinator's commands, the Raft persists and the persisted entries all grew, and so
// did the series of the schedule named in MetricsSchedules (and no other schedule has any).
// A backlog queue's depth series appear with its three messages (one delayed) and a growing
// oldest visible age, and the due head holds the schedule's next occurrence. The worker's own
// series (WorkerConfig.Metrics) count its handler runs.
func TestMetricsMoveDuringAWorkload(t *testing.T) {
	watched := uuid.NewString()
	s := startSilo(t, t.TempDir(), func(cfg *Config) { cfg.MetricsSchedules = []string{watched} })
	waitReady(t, s)
	c := s.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	before := scrapeMetrics(t, s)
	silo := cluster.FormatID(s.SiloID())
	for name, f := range before {
		if len(name) < 7 || name[:7] != "orrery_" {
			continue
		}
		for _, m := range f.GetMetric() {
			if got := labelOf(m, "silo"); got != silo {
				t.Fatalf("series %s has silo label %q, want %q", name, got, silo)
			}
		}
	}
	if got := before.sum(t, "orrery_partition_leader"); got != 8 {
		t.Fatalf("leader gauges sum to %v, want the partition count 8", got)
	}
	if n := len(before.samples(t, "orrery_partition_term")); n != 8 {
		t.Fatalf("%d term series, want one per partition (8)", n)
	}
	for _, m := range before.samples(t, "orrery_partition_term") {
		if m.GetGauge().GetValue() < 1 {
			t.Fatalf("partition %s at term %v, want at least 1", labelOf(m, "partition"), m.GetGauge().GetValue())
		}
	}
	if got := before.sum(t, "orrery_partition_voters"); got != 8 {
		t.Fatalf("voter gauges sum to %v, want one voter per partition", got)
	}
	if got := before.sum(t, "orrery_store_disk_bytes"); got <= 0 {
		t.Fatalf("store disk bytes %v, want positive", got)
	}
	for _, part := range []string{"state", "raft_log"} {
		var keys, bytes float64
		for _, m := range before.samples(t, "orrery_store_written_keys_total") {
			if labelOf(m, "part") == part {
				keys = m.GetCounter().GetValue()
			}
		}
		for _, m := range before.samples(t, "orrery_store_written_bytes_total") {
			if labelOf(m, "part") == part {
				bytes = m.GetCounter().GetValue()
			}
		}
		if keys <= 0 || bytes <= keys {
			t.Fatalf("store writes of part %s after the silo's start (grants, elections): %v keys, %v bytes; want some of each", part, keys, bytes)
		}
	}

	if got := before.sum(t, "orrery_schedule_occurrences_enqueued_total"); got != 0 || len(before.samples(t, "orrery_schedule_occurrences_enqueued_total")) != 1 {
		t.Fatalf("schedule series before any occurrence: %v", before["orrery_schedule_occurrences_enqueued_total"])
	}
	if _, ok := before["orrery_queue_visible_messages"]; ok {
		t.Fatalf("queue series before any message: %v", before["orrery_queue_visible_messages"])
	}
	backlog := &orreryv1.Lane{Namespace: "test", Queue: "backlog", Key: "b1"}
	for i, delay := range []time.Duration{0, 0, time.Hour} {
		if _, err := c.Enqueue(ctx, &orreryv1.Enqueue{Lane: backlog, Id: strconv.Itoa(i), DelayMicros: delay.Microseconds()}); err != nil {
			t.Fatal(err)
		}
	}

	lane := &orreryv1.Lane{Namespace: "test", Queue: "ticks", Key: "k1"}
	if _, err := c.ConfigureSchedule(ctx, &orreryv1.ScheduleDefinition{
		Lane: lane, ScheduleId: watched, Template: &orreryv1.MessageTemplate{PayloadJson: `{}`},
		Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{
			IntervalMicros: time.Second.Microseconds(), FirstDueAtUnixMicros: time.Now().Add(time.Second).UnixMicro()}}},
	}, 0); err != nil {
		t.Fatal(err)
	}
	workerMetrics := prometheus.NewRegistry()
	var mu sync.Mutex
	handled := 0
	w := c.NewWorker(client.WorkerConfig{Namespace: "test", Queue: "ticks", Wait: 2 * time.Second, Metrics: workerMetrics,
		Handler: func(context.Context, *client.Message) error {
			mu.Lock()
			handled++
			mu.Unlock()
			return nil
		}})
	workerCtx, stopWorker := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(workerCtx) }()
	testkit.Eventually(t, 30*time.Second, "three occurrences handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled >= 3
	})
	stopWorker()
	if err := <-done; err != nil {
		t.Fatalf("worker: %v", err)
	}

	after := scrapeMetrics(t, s)
	grew := func(name string, by float64) {
		t.Helper()
		was, now := 0.0, after.sum(t, name)
		if _, ok := before[name]; ok {
			was = before.sum(t, name)
		}
		if now < was+by {
			t.Errorf("%s went from %v to %v, want a rise of at least %v", name, was, now, by)
		}
	}
	grew("orrery_occurrence_enqueue_lateness_seconds", 3)
	grew("orrery_partition_occurrences_enqueued_total", 3)
	grew("orrery_due_coordinator_commands_total", 3)
	grew("orrery_due_coordinator_scans_total", 1)
	grew("orrery_raft_persist_seconds", 3)
	grew("orrery_raft_persisted_entries_total", 4) // the configure and three due commands
	lateness := after.samples(t, "orrery_occurrence_enqueue_lateness_seconds")[0].GetHistogram()
	if lateness.GetSampleSum() < 0 || lateness.GetSampleSum() > 5*float64(lateness.GetSampleCount()) {
		t.Errorf("enqueue lateness sums to %vs over %d occurrences: not between 0 and 5 s each", lateness.GetSampleSum(), lateness.GetSampleCount())
	}
	stageCount := func(sc scrape, stage string) uint64 {
		for _, m := range sc.samples(t, "orrery_partition_stage_seconds") {
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" && l.GetValue() == stage {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
		t.Fatalf("no orrery_partition_stage_seconds series of stage %q", stage)
		return 0
	}
	// The configure, three due commands, the long polls that leased the three occurrences and
	// the acks.
	for stage, least := range map[string]uint64{"apply": 10, "command": 4, "due": 3, "lease": 3, "committed": 10, "applied": 10} {
		if was, now := stageCount(before, stage), stageCount(after, stage); now < was+least {
			t.Errorf("stage %s timed %d commands, then %d: want a rise of at least %d", stage, was, now, least)
		}
	}
	if got := after.sum(t, "orrery_partition_leader"); got != 8 {
		t.Errorf("leader gauges sum to %v after the workload, want 8", got)
	}
	grew("orrery_schedule_occurrences_enqueued_total", 3)
	grew("orrery_schedule_enqueue_lateness_seconds", 3)
	if n := len(after.samples(t, "orrery_schedule_occurrences_enqueued_total")); n != 1 {
		t.Errorf("%d schedule series, want only the watched schedule's", n)
	}
	queueGauge := func(sc scrape, name string) float64 {
		t.Helper()
		for _, m := range sc.samples(t, name) {
			if labelOf(m, "namespace") == "test" && labelOf(m, "queue") == "backlog" {
				return m.GetGauge().GetValue()
			}
		}
		t.Fatalf("%s has no series of queue test/backlog", name)
		return 0
	}
	if v, d := queueGauge(after, "orrery_queue_visible_messages"), queueGauge(after, "orrery_queue_delayed_messages"); v != 2 || d != 1 {
		t.Errorf("backlog: %v visible, %v delayed; want 2 and 1", v, d)
	}
	if l, dead, inc := queueGauge(after, "orrery_queue_leased_messages"), queueGauge(after, "orrery_queue_dead_letter_messages"), queueGauge(after, "orrery_queue_counts_incomplete"); l != 0 || dead != 0 || inc != 0 {
		t.Errorf("backlog: %v leased, %v dead-lettered, incomplete %v; want 0", l, dead, inc)
	}
	age := queueGauge(after, "orrery_queue_oldest_visible_age_seconds")
	testkit.Eventually(t, 10*time.Second, "the backlog's oldest visible age grows", func() bool {
		return queueGauge(scrapeMetrics(t, s), "orrery_queue_oldest_visible_age_seconds") > age
	})
	if got := after.sum(t, "orrery_queues_omitted") + after.sum(t, "orrery_queue_stats_errors"); got != 0 {
		t.Errorf("queues omitted or partitions failing: %v", got)
	}
	testkit.Eventually(t, 10*time.Second, "the due head holds the schedule's next occurrence", func() bool {
		return scrapeMetrics(t, s).sum(t, "orrery_partition_due_head_entries") >= 1
	})
	if got := gatheredCount(t, workerMetrics, "orrery_worker_handler_start_lateness_seconds"); got < 3 {
		t.Errorf("the worker's start lateness histogram counts %d runs, want at least 3", got)
	}
}

// gatheredCount is the sample count of histogram name in reg (0 when absent).
func gatheredCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var count uint64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				count += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return count
}
