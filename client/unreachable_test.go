package client_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/client/clienttest"
	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/internal/testkit"
)

// isReceive reports whether req is a receive command.
func isReceive(req *orreryv1.CommandRequest) bool {
	ms := req.GetBatch().GetMutations()
	return len(ms) == 1 && ms[0].GetReceive() != nil
}

// TestWorkerReportsAPartitionWhoseReceivesKeepFailing: while a partition's receive attempts
// fail, Status names it; once they have failed for UnreachableTimeout, Run returns an
// Unavailable error naming the partition instead of retrying forever or returning nil.
func TestWorkerReportsAPartitionWhoseReceivesKeepFailing(t *testing.T) {
	b := setup(t, 2)
	b.tr.SetFaultHook(func(p int, req *orreryv1.CommandRequest) (clienttest.Fault, error) {
		if p == 1 && isReceive(req) {
			return clienttest.FaultFailBeforeApply, nil
		}
		return clienttest.FaultNone, nil
	})
	w := b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: testQueue, Wait: 50 * time.Millisecond,
		UnreachableTimeout: time.Second, Handler: func(context.Context, *client.Message) error { return nil }})
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(ctxFor(t)) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		status := w.Status()
		if len(status.Failing) > 0 {
			if f := status.Failing[0]; f.Partition != 1 || !errors.Is(f.Err, orrery.ErrUnavailable) || f.Since.IsZero() {
				t.Fatalf("Status reports %+v, want partition 1 failing with Unavailable", status.Failing)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Status never reported the failing partition")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-runErr:
		if !errors.Is(err, orrery.ErrUnavailable) || !strings.Contains(err.Error(), "partition 1") {
			t.Fatalf("Run returned %v, want Unavailable naming partition 1", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not give up on the unreachable partition")
	}
}

// TestASlowReceiveIsNotUnreachable: UnreachableTimeout counts failed attempts, not slow ones: a
// partition whose receives answer slowly, each slower than the bound, keeps being consumed.
func TestASlowReceiveIsNotUnreachable(t *testing.T) {
	b := setup(t, 1)
	var slow atomic.Bool
	slow.Store(true)
	b.tr.SetFaultHook(func(_ int, req *orreryv1.CommandRequest) (clienttest.Fault, error) {
		if slow.Load() && isReceive(req) {
			time.Sleep(300 * time.Millisecond)
		}
		return clienttest.FaultNone, nil
	})
	handled := make(chan string, 1)
	w := b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: testQueue, Wait: 50 * time.Millisecond,
		UnreachableTimeout: 100 * time.Millisecond, Handler: func(_ context.Context, m *client.Message) error {
			handled <- m.ID()
			return nil
		}})
	ctx, stop := context.WithCancel(ctxFor(t))
	defer stop()
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(ctx) }()
	if _, err := b.c.Enqueue(ctxFor(t), &orreryv1.Enqueue{Lane: lane(testQueue, "k"), Id: "slow-1", PayloadJson: `{}`}); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-handled:
		if id != "slow-1" {
			t.Fatalf("handled %s", id)
		}
	case err := <-runErr:
		t.Fatalf("Run returned %v while the partition answered slowly", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the message was not handled")
	}
	if failing := w.Status().Failing; len(failing) != 0 {
		t.Fatalf("Status reports %+v for a slow partition", failing)
	}
	slow.Store(false)
	stop()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestUnreachableTimeoutRunsOnTheClientsClock: the worker's UnreachableTimeout, and the
// back-offs between its failing receives, are measured on Options.Clock: on a fake clock an
// hour-long bound passes in no real time once the clock is moved, and not before.
func TestUnreachableTimeoutRunsOnTheClientsClock(t *testing.T) {
	b := setup(t, 1)
	b.tr.SetFaultHook(func(_ int, req *orreryv1.CommandRequest) (clienttest.Fault, error) {
		if isReceive(req) {
			return clienttest.FaultFailBeforeApply, nil
		}
		return clienttest.FaultNone, nil
	})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)
	c := client.New(b.tr, client.Options{Principal: testPrincipal, Clock: fake,
		Retry: client.RetryPolicy{Initial: time.Second, Max: time.Minute, Jitter: func() float64 { return 0.5 }}})
	w := c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: testQueue, Wait: 50 * time.Millisecond,
		UnreachableTimeout: time.Hour, Handler: func(context.Context, *client.Message) error { return nil }})
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(ctxFor(t)) }()
	testkit.Eventually(t, 10*time.Second, "the first receive failing", func() bool { return len(w.Status().Failing) > 0 })
	select {
	case err := <-runErr:
		t.Fatalf("Run returned %v before the clock moved", err)
	case <-time.After(200 * time.Millisecond):
	}
	for {
		select {
		case err := <-runErr:
			if !errors.Is(err, orrery.ErrUnavailable) {
				t.Fatalf("Run returned %v, want Unavailable", err)
			}
			if moved := fake.Now().Sub(start); moved < time.Hour {
				t.Fatalf("Run gave up %v into the clock, before UnreachableTimeout (1h)", moved)
			}
			return
		case <-time.After(time.Millisecond):
			fake.Advance(time.Minute)
			if fake.Now().Sub(start) > 3*time.Hour {
				t.Fatal("Run did not give up within 3 h of the fake clock")
			}
		}
	}
}

// outage is a twin whose receives fail while down is set (it starts set), and a client of it
// on a fake clock from start, logging at INFO into logs and backing off up to a given bound.
type outage struct {
	b     *bundle
	down  atomic.Bool
	start time.Time
	fake  *clock.Fake
	logs  *testkit.Buffer
	c     *client.Client
}

func newOutage(t *testing.T, partitions int, maxBackoff time.Duration) *outage {
	o := &outage{b: setup(t, partitions), start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), logs: &testkit.Buffer{}}
	o.down.Store(true)
	o.b.tr.SetFaultHook(func(_ int, req *orreryv1.CommandRequest) (clienttest.Fault, error) {
		if o.down.Load() && isReceive(req) {
			return clienttest.FaultFailBeforeApply, nil
		}
		return clienttest.FaultNone, nil
	})
	o.fake = clock.NewFake(o.start)
	o.c = client.New(o.b.tr, client.Options{Principal: testPrincipal, Clock: o.fake, Logger: slog.New(slog.NewTextHandler(o.logs, nil)),
		Retry: client.RetryPolicy{Initial: time.Second, Max: maxBackoff, Jitter: func() float64 { return 0.5 }}})
	return o
}

// TestAWorkerWaitsForItsClusterByDefault: with the default configuration a worker whose
// partition stays unreachable for three hours of the client's clock keeps running, reports the
// partition in Status, and logs it once at WARN; once the partition answers again it consumes,
// Status is clear, and it logs that once at INFO.
func TestAWorkerWaitsForItsClusterByDefault(t *testing.T) {
	o := newOutage(t, 1, time.Minute)
	b, down, start, fake, logs, c := o.b, &o.down, o.start, o.fake, o.logs, o.c
	var handled atomic.Int64
	w := c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: testQueue, Wait: 50 * time.Millisecond,
		Handler: func(context.Context, *client.Message) error { handled.Add(1); return nil }})
	runErr := make(chan error, 1)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { runErr <- w.Run(ctx) }()
	testkit.Eventually(t, 10*time.Second, "the first receive failing", func() bool { return len(w.Status().Failing) > 0 })
	for fake.Now().Sub(start) < 3*time.Hour {
		select {
		case err := <-runErr:
			t.Fatalf("Run returned %v %v into the outage, want it to keep waiting", err, fake.Now().Sub(start))
		case <-time.After(time.Millisecond):
			fake.Advance(time.Minute)
		}
	}
	if f := w.Status().Failing; len(f) != 1 || f[0].Partition != 0 || !f[0].Since.Equal(start) {
		t.Fatalf("Status reports %+v three hours into the outage, want partition 0 failing since %v", f, start)
	}
	down.Store(false)
	b.enqueue(lane(testQueue, "k"), "after-the-outage")
	testkit.Eventually(t, 10*time.Second, "the message handled once the partition answers", func() bool {
		fake.Advance(time.Minute) // the back-off between attempts runs on the fake clock
		return handled.Load() == 1 && len(w.Status().Failing) == 0
	})
	stop()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
	for line, want := range map[string]int{
		`level=INFO msg="orrery worker: cluster unreachable, retrying"`:          1,
		`level=WARN msg="orrery worker: partitions unreachable, still retrying"`: 1,
		`level=INFO msg="orrery worker: cluster reachable again"`:                1,
	} {
		if n := strings.Count(logs.String(), line); n != want {
			t.Errorf("logged %s %d times, want %d:\n%s", line, n, want, logs)
		}
	}
	if n := strings.Count(logs.String(), "level=WARN") + strings.Count(logs.String(), "level=ERROR"); n != 1 {
		t.Errorf("%d WARN or ERROR lines through a three-hour outage, want the one:\n%s", n, logs)
	}
}

// TestAShortOutageLogsNoWarning: partitions unreachable for less than unreachableWarnAfter
// (30 s; a silo restart, an election) log one INFO line when the outage begins and one when it
// ends, and nothing at WARN or above.
func TestAShortOutageLogsNoWarning(t *testing.T) {
	o := newOutage(t, 4, time.Second)
	down, start, fake, logs, c := &o.down, o.start, o.fake, o.logs, o.c
	w := c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: testQueue, Wait: 50 * time.Millisecond,
		Handler: func(context.Context, *client.Message) error { return nil }})
	runErr := make(chan error, 1)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { runErr <- w.Run(ctx) }()
	testkit.Eventually(t, 10*time.Second, "every partition failing", func() bool {
		fake.Advance(100 * time.Millisecond)
		return len(w.Status().Failing) == 4
	})
	for fake.Now().Sub(start) < 20*time.Second { // 20 s of the client's clock, a second at a time
		select {
		case err := <-runErr:
			t.Fatalf("Run returned %v into the outage", err)
		case <-time.After(time.Millisecond):
			fake.Advance(time.Second)
		}
	}
	down.Store(false)
	testkit.Eventually(t, 10*time.Second, "every partition answering", func() bool {
		fake.Advance(time.Second)
		return len(w.Status().Failing) == 0
	})
	stop()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := strings.Count(logs.String(), "level=WARN") + strings.Count(logs.String(), "level=ERROR"); n != 0 {
		t.Errorf("%d WARN or ERROR lines through a 20-second outage, want none:\n%s", n, logs)
	}
	if n := strings.Count(logs.String(), "level=INFO"); n != 2 {
		t.Errorf("%d INFO lines through an outage of four partitions, want 2 (it began, it ended):\n%s", n, logs)
	}
}

// TestStatusClearsAsSoonAsAPartitionAnswersAgain: a worker whose long polls wait an hour shows
// its partitions reachable as soon as they answer again, not once a long poll retried during
// the outage has waited its hour for a message that never comes.
func TestStatusClearsAsSoonAsAPartitionAnswersAgain(t *testing.T) {
	o := newOutage(t, 4, time.Second)
	down, fake, c := &o.down, o.fake, o.c
	w := c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: testQueue, Wait: time.Hour,
		Handler: func(context.Context, *client.Message) error { return nil }})
	runErr := make(chan error, 1)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { runErr <- w.Run(ctx) }()
	testkit.Eventually(t, 10*time.Second, "every partition failing", func() bool {
		fake.Advance(100 * time.Millisecond)
		return len(w.Status().Failing) == 4
	})
	down.Store(false)
	testkit.Eventually(t, 10*time.Second, "every partition reachable in Status", func() bool {
		fake.Advance(time.Second)
		return len(w.Status().Failing) == 0
	})
	stop()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
