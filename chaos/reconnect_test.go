package chaos

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/route"
	"github.com/orreryhq/orrery/internal/testkit"
)

// recoveryBound is how soon after a restarted silo is ready a client that stayed connected
// must have its calls answered again (the README promises it).
const recoveryBound = 15 * time.Second

// handledLog records what a worker's handler saw.
type handledLog struct {
	mu      sync.Mutex
	byID    map[string]int
	ordinal map[uint64]int
	latest  time.Time // the newest nominal instant handled
}

func (h *handledLog) handle(_ context.Context, m *client.Message) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.byID[m.ID()]++
	h.ordinal[m.Occurrence().GetOrdinal()]++
	if due := time.UnixMicro(m.Occurrence().GetNominalDueAtUnixMicros()); due.After(h.latest) {
		h.latest = due
	}
	return nil
}

func (h *handledLog) newest() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.latest
}

// TestClientAndWorkerSurviveSiloRestarts is issue 15's process test: a client and a Worker
// connected to one real silo process keep working across a SIGTERM and restart and then a
// SIGKILL and restart on the same data directory and ports. After each restart the client's
// calls are answered again within recoveryBound without the application doing anything, and
// the Worker resumes; at the end every occurrence the schedule emitted was handled exactly once.
func TestClientAndWorkerSurviveSiloRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real silo processes")
	}
	spec := &SiloSpec{DataDir: t.TempDir()}
	silo := StartSilo(t, spec)
	logs := &testkit.Buffer{} // the client's log at slog's default level, INFO
	c := dialLogging(t, silo, slog.New(slog.NewTextHandler(logs, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	lane := &orreryv1.Lane{Namespace: "reconnect", Queue: "ticks", Key: uuid.NewString()}
	scheduleID := uuid.NewString()
	first := time.Now().Add(time.Second).Truncate(time.Second)
	if _, err := c.ConfigureSchedule(ctx, &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: scheduleID,
		Template: &orreryv1.MessageTemplate{PayloadJson: `{"tick":true}`},
		Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{
			IntervalMicros: time.Second.Microseconds(), FirstDueAtUnixMicros: first.UnixMicro()}}},
	}, 0); err != nil {
		t.Fatal(err)
	}
	handled := &handledLog{byID: map[string]int{}, ordinal: map[uint64]int{}}
	w := c.NewWorker(client.WorkerConfig{Namespace: lane.Namespace, Queue: lane.Queue, Handler: handled.handle})
	workerCtx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(workerCtx) }()
	testkit.Eventually(t, 30*time.Second, "three occurrences handled", func() bool { return handled.newest().After(first.Add(time.Second)) })

	partition := route.Partition(lane, c.Partitions())
	for _, stop := range []struct {
		name string
		do   func()
	}{
		{"SIGTERM", func() {
			if err := silo.Terminate(30 * time.Second); err != nil {
				t.Fatalf("SIGTERM: %v\n%s", err, silo.Log())
			}
		}},
		{"SIGKILL", func() { silo.Kill() }},
	} {
		// Stop the silo mid-second, with every occurrence so far acked, so that no ack is in
		// flight when it goes: a lost ack would be a redelivery, which is not what this tests.
		testkit.Eventually(t, 30*time.Second, "an idle lane mid-second before "+stop.name, func() bool {
			msgs, _, err := c.InspectLane(ctx, lane, "", 10)
			frac := time.Now().Sub(time.Now().Truncate(time.Second))
			return err == nil && len(msgs) == 0 && frac > 200*time.Millisecond && frac < 500*time.Millisecond
		})
		stop.do()
		time.Sleep(3 * time.Second) // occurrences fall due while nothing runs; the client notices
		silo = StartSilo(t, spec)
		ready := time.Now()

		var lastErr error
		testkit.Eventually(t, recoveryBound+30*time.Second, "the client's calls answered after "+stop.name, func() bool {
			callCtx, cancelCall := context.WithTimeout(ctx, 2*time.Second)
			defer cancelCall()
			_, lastErr = c.PartitionStatus(callCtx, partition)
			return lastErr == nil
		})
		recovered := time.Since(ready)
		t.Logf("after %s: calls answered %v after the restarted silo was ready", stop.name, recovered.Round(time.Millisecond))
		if recovered > recoveryBound {
			t.Errorf("after %s the client needed %v to be answered again, more than %v", stop.name, recovered, recoveryBound)
		}
		testkit.Eventually(t, recoveryBound+30*time.Second, "the worker handling occurrences due after the "+stop.name+" restart", func() bool {
			return handled.newest().After(ready)
		})
		resumed := time.Since(ready)
		t.Logf("after %s: the worker handled an occurrence due after the restart %v after ready", stop.name, resumed.Round(time.Millisecond))
		if resumed > recoveryBound {
			t.Errorf("after %s the worker needed %v to handle occurrences again, more than %v", stop.name, resumed, recoveryBound)
		}
	}

	// Stop the schedule, let the worker drain the lane, then compare with what was emitted.
	var record *orreryv1.ScheduleRecord
	testkit.Eventually(t, 30*time.Second, "the schedule cancelled", func() bool {
		r, err := c.InspectSchedule(ctx, lane, scheduleID)
		if err != nil {
			return false
		}
		_, err = c.CancelSchedule(ctx, &orreryv1.CancelSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: r.GetRevision()})
		if errors.Is(err, orrery.ErrRevisionConflict) {
			return false // an occurrence fired in between
		}
		if err != nil {
			t.Fatalf("cancel: %v", err)
		}
		record, err = c.InspectSchedule(ctx, lane, scheduleID)
		return err == nil
	})
	testkit.Eventually(t, 60*time.Second, "the lane drained", func() bool {
		msgs, _, err := c.InspectLane(ctx, lane, "", 10)
		return err == nil && len(msgs) == 0
	})
	stopWorker()
	if err := <-runErr; err != nil {
		t.Fatalf("worker Run: %v", err)
	}
	emitted := record.GetNextOrdinal()
	handled.mu.Lock()
	defer handled.mu.Unlock()
	for id, n := range handled.byID {
		if n != 1 {
			t.Errorf("occurrence %s handled %d times", id, n)
		}
	}
	for o := range emitted {
		if handled.ordinal[o] != 1 {
			t.Errorf("ordinal %d handled %d times", o, handled.ordinal[o])
		}
	}
	if uint64(len(handled.ordinal)) != emitted {
		t.Errorf("handled %d ordinals, the schedule emitted %d", len(handled.ordinal), emitted)
	}
	t.Logf("%d occurrences emitted, each handled once", emitted)
	// Across the restarts the client logs its own changes of state at INFO and the cluster
	// layer's connection errors at DEBUG: nothing at WARN or above.
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("the client logged across two silo restarts: %s", line)
		}
	}
}

// TestWorkerReportsAnUnreachableCluster: when the only silo goes and stays away, Run returns an
// Unavailable error once a partition's receives have failed for UnreachableTimeout, and Status
// names the failing partitions meanwhile, instead of Run returning nil or retrying silently.
func TestWorkerReportsAnUnreachableCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real silo processes")
	}
	silo := StartSilo(t, &SiloSpec{DataDir: t.TempDir(), Partitions: 4})
	c := dial(t, silo)
	w := c.NewWorker(client.WorkerConfig{Namespace: "unreachable", Queue: "q", Wait: time.Second,
		UnreachableTimeout: 15 * time.Second, Handler: func(context.Context, *client.Message) error { return nil }})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(ctx) }()
	testkit.Eventually(t, 10*time.Second, "the worker running", func() bool { return w.Status().Running })
	silo.Kill()
	killed := time.Now()

	testkit.Eventually(t, 30*time.Second, "Status reporting failing partitions", func() bool { return len(w.Status().Failing) > 0 })
	t.Logf("status %v after the kill: %+v", time.Since(killed).Round(time.Millisecond), w.Status().Failing[0])
	select {
	case err := <-runErr:
		t.Logf("Run returned %v after the kill: %v", time.Since(killed).Round(time.Millisecond), err)
		if !errors.Is(err, orrery.ErrUnavailable) {
			t.Fatalf("Run returned %v, want an Unavailable error", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not report the unreachable cluster within 60 s")
	}
	if w.Status().Running {
		t.Error("Status still says running after Run returned")
	}
}
