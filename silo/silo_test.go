package silo

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/internal/testkit"
)

// These tests start protoactor clusters, so they run without -race (protoactor-go's cluster
// code has data races of its own; the cluster package doc and the Makefile say which).
//
// A test runs in parallel with the others (t.Parallel) when its silos are its own (temp dirs,
// free ports: startSilo, startFounders) and it asserts no timing another test's load could
// break. A test that bounds elections, leader balance, lateness, a liveness or quorum bound,
// membership (DeadAfter, rejoins), an elapsed time or a deadline close to the work it waits
// for, that saturates the cores, or that reads or sets process-wide state (t.Setenv,
// GOMAXPROCS) runs alone.

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func startSilo(t *testing.T, dataDir string, mutate func(*Config)) *Silo {
	t.Helper()
	cfg := Config{DataDir: dataDir, Partitions: 8, Admin: "127.0.0.1:0", Logger: quiet, InsecureDev: true}
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start silo: %v", err)
	}
	stopWhenDone(t, s)
	return s
}

// clusterFull reports whether the cluster tests run at full length (ORRERY_CLUSTER_FULL=1,
// what make cluster-test sets); otherwise they run their short versions.
func clusterFull() bool { return os.Getenv("ORRERY_CLUSTER_FULL") == "1" }

// stopWhenDone stops s, gracefully, when the test ends.
func stopWhenDone(t *testing.T, s *Silo) {
	t.Helper()
	t.Cleanup(s.Stop)
}

// TestALoneSiloStopsAtOnce: a silo with no live peer has nobody to hand its leaderships or
// grains to, so its graceful Stop waits neither for the drain (drainTimeout, 5 s, plus the
// announcement's placement period) nor for protoactor's 2 s hand-over; it took about 7.5 s.
func TestALoneSiloStopsAtOnce(t *testing.T) {
	t.Parallel()
	s := startSilo(t, t.TempDir(), nil)
	begun := time.Now()
	s.Stop()
	if took := time.Since(begun); took >= drainTimeout {
		t.Fatalf("a lone silo took %v to stop, at least drainTimeout (%v): it waited for a hand-over nobody can take", took.Round(time.Millisecond), drainTimeout)
	}
}

func getJSON(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func TestSiloEmitsOccurrencesToAWorker(t *testing.T) {
	t.Parallel()
	s := startSilo(t, t.TempDir(), nil)
	c := s.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	testkit.Eventually(t, 20*time.Second, "readyz", func() bool {
		code, _ := getJSON(t, "http://"+s.AdminAddress()+"/readyz")
		return code == http.StatusOK
	})
	if code, body := getJSON(t, "http://"+s.AdminAddress()+"/healthz"); code != 200 || body["status"] != "ok" {
		t.Fatalf("healthz %d %v", code, body)
	}

	lane := &orreryv1.Lane{Namespace: "test", Queue: "ticks", Key: "k1"}
	id := uuid.NewString()
	first := time.Now().Add(time.Second)
	_, err := c.ConfigureSchedule(ctx, &orreryv1.ScheduleDefinition{
		Lane: lane, ScheduleId: id, Template: &orreryv1.MessageTemplate{PayloadJson: `{"tick":true}`},
		Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{IntervalMicros: time.Second.Microseconds(), FirstDueAtUnixMicros: first.UnixMicro()}}},
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[uint64]time.Time{}
	workerCtx, stopWorker := context.WithCancel(ctx)
	done := make(chan error, 1)
	w := c.NewWorker(client.WorkerConfig{Namespace: "test", Queue: "ticks", Wait: 2 * time.Second, Handler: func(_ context.Context, m *client.Message) error {
		mu.Lock()
		defer mu.Unlock()
		o := m.Occurrence()
		if _, dup := seen[o.GetOrdinal()]; dup {
			t.Errorf("ordinal %d delivered twice", o.GetOrdinal())
		}
		seen[o.GetOrdinal()] = time.Now()
		if due := time.UnixMicro(o.GetNominalDueAtUnixMicros()); time.Now().Before(due) {
			t.Errorf("ordinal %d handled before its due time", o.GetOrdinal())
		}
		return nil
	}})
	go func() { done <- w.Run(workerCtx) }()
	testkit.Eventually(t, 30*time.Second, "three occurrences", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= 3
	})
	stopWorker()
	if err := <-done; err != nil && err != context.Canceled {
		t.Fatalf("worker: %v", err)
	}
	code, body := getJSON(t, "http://"+s.AdminAddress()+"/v1/schedules/test/ticks/k1/"+id)
	if code != 200 || body["record"] == nil || len(body["next_fire_times_unix_micros"].([]any)) != 10 || len(body["last_outcomes"].([]any)) == 0 {
		t.Fatalf("inspect schedule: %d %v", code, body)
	}
	code, body = getJSON(t, "http://"+s.AdminAddress()+"/v1/ledger/test/ticks/k1/"+id+"?max=2")
	if code != 200 || len(body["records"].([]any)) != 2 || body["next_after"] == nil {
		t.Fatalf("ledger page: %d %v", code, body)
	}
	if code, body := getJSON(t, "http://"+s.AdminAddress()+"/v1/ledger/test/ticks/k1/"+id+"?from=yesterday"); code != http.StatusBadRequest {
		t.Fatalf("a bad bound: %d %v", code, body)
	}
	if code, body := getJSON(t, "http://"+s.AdminAddress()+"/v1/schedules/test/ticks/k1/"+uuid.NewString()); code != http.StatusNotFound {
		t.Fatalf("inspect a missing schedule: %d %v", code, body)
	}
	if code, body := getJSON(t, "http://"+s.AdminAddress()+"/v1/partitions"); code != 200 || len(body["partitions"].([]any)) != 8 {
		t.Fatalf("partition table: %d %v", code, body)
	}
}
