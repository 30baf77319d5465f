package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/internal/testkit"
)

// series returns the samples of the metric family name in reg.
func series(t *testing.T, reg *prometheus.Registry, name string) []*dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()
		}
	}
	return nil
}

// label returns the value of a sample's label.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// A worker with WorkerConfig.Metrics observes each handler run's start lateness from its
// message's enqueue and counts the runs by outcome, labelled with its queue; a second worker
// of the queue shares the series, and a Registerer holding a clashing series fails Run.
func TestWorkerMetricsObserveHandlerStartAndOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	reg := prometheus.NewRegistry()
	const held = 300 * time.Millisecond
	for i := range 3 {
		b.enqueue(lane(testQueue, fmt.Sprintf("k-%d", i)), fmt.Sprintf("m-%d", i))
	}
	enqueued := time.Now()
	var mu sync.Mutex
	runs := map[string]int{}
	w := b.c.NewWorker(client.WorkerConfig{
		Namespace: testNamespace, Queue: testQueue, Concurrency: 2, Wait: time.Second, Metrics: reg,
		Handler: func(_ context.Context, m *client.Message) error {
			mu.Lock()
			defer mu.Unlock()
			runs[m.ID()]++
			if m.ID() == "m-0" && runs[m.ID()] == 1 {
				return errors.New("once more")
			}
			return nil
		},
	})
	// Messages wait at least held before the worker starts.
	time.Sleep(time.Until(enqueued.Add(held)))
	runWorker(t, w)
	testkit.Eventually(t, 10*time.Second, "four handler runs counted", func() bool {
		total := 0.0
		for _, m := range series(t, reg, "orrery_worker_handled_total") {
			total += m.GetCounter().GetValue()
		}
		return total == 4
	})
	outcomes := map[string]float64{}
	for _, m := range series(t, reg, "orrery_worker_handled_total") {
		if label(m, "namespace") != testNamespace || label(m, "queue") != testQueue {
			t.Fatalf("handled series labelled %v", m.GetLabel())
		}
		outcomes[label(m, "outcome")] = m.GetCounter().GetValue()
	}
	if outcomes["ok"] != 3 || outcomes["error"] != 1 {
		t.Fatalf("handled outcomes %v, want 3 ok and 1 error", outcomes)
	}
	hist := series(t, reg, "orrery_worker_handler_start_lateness_seconds")
	if len(hist) != 1 {
		t.Fatalf("%d lateness series, want 1", len(hist))
	}
	h := hist[0].GetHistogram()
	if h.GetSampleCount() != 4 {
		t.Fatalf("lateness observed %d times, want once per handler run (4)", h.GetSampleCount())
	}
	if min := held.Seconds() * 4; h.GetSampleSum() < min {
		t.Fatalf("lateness sum %.3fs, want at least %.3fs: every message waited %v before the worker started", h.GetSampleSum(), min, held)
	}
	again := b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: testQueue, Metrics: reg, Handler: func(context.Context, *client.Message) error { return nil }})
	stopAgain := runWorker(t, again)
	if err := stopAgain(); err != nil {
		t.Fatalf("a second worker of the queue on the same registry: %v", err)
	}
	clash := prometheus.NewRegistry()
	clash.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "orrery_worker_handled_total", Help: "not a counter"}))
	bad := b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: testQueue, Metrics: clash, Handler: func(context.Context, *client.Message) error { return nil }})
	if err := bad.Run(context.Background()); !errors.Is(err, orrery.ErrValidation) {
		t.Fatalf("Run with a clashing series: %v, want Validation", err)
	}
}
