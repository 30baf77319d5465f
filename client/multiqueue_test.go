package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/internal/testkit"
)

// TestOneWorkerServesSeveralQueues: a worker handles the queue of its config and every queue
// added with Handle and client.Handle, each message by its queue's handler, a typed handler
// with its payload decoded.
func TestOneWorkerServesSeveralQueues(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	type invoice struct{ Amount int }
	var mu sync.Mutex
	got := map[string][]string{}
	note := func(queue, what string) {
		mu.Lock()
		defer mu.Unlock()
		got[queue] = append(got[queue], what)
	}
	w := b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: "emails", Wait: time.Second,
		Handler: func(_ context.Context, m *client.Message) error { note("emails", m.ID()); return nil }})
	w.Handle("reports", func(_ context.Context, m *client.Message) error { note("reports", m.ID()); return nil }, client.HandlerOptions{})
	client.Handle(w, "invoices", func(_ context.Context, j *client.Job[invoice]) error {
		note("invoices", fmt.Sprintf("%s=%d", j.ID(), j.Args.Amount))
		return nil
	})
	for _, q := range []string{"emails", "reports"} {
		for i := range 3 {
			b.enqueue(lane(q, fmt.Sprint(i)), fmt.Sprintf("%s-%d", q, i))
		}
	}
	for i := range 3 {
		if _, err := client.Enqueue(ctxFor(t), b.c.Queue(testNamespace, "invoices"), invoice{Amount: 10 * i}, client.EnqueueOptions{ID: fmt.Sprintf("inv-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	stop := runWorker(t, w)
	testkit.Eventually(t, 10*time.Second, "every message of the three queues handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got["emails"]) == 3 && len(got["reports"]) == 3 && len(got["invoices"]) == 3
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for q, want := range map[string][]string{
		"emails":   {"emails-0", "emails-1", "emails-2"},
		"reports":  {"reports-0", "reports-1", "reports-2"},
		"invoices": {"inv-0=0", "inv-1=10", "inv-2=20"},
	} {
		slices.Sort(got[q])
		if !slices.Equal(got[q], want) {
			t.Errorf("queue %s handled %v, want %v", q, got[q], want)
		}
	}
}

// TestAQueuesConcurrencyIsItsOwn: HandlerOptions.Concurrency bounds one queue's handlers
// without bounding the worker's other queues: with "slow" at 1 and the worker at 4, never more
// than one slow handler runs, while four of the other queue run at once.
func TestAQueuesConcurrencyIsItsOwn(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	var slowNow, slowMax, fastNow, fastMax, handled atomic.Int64
	track := func(now, most *atomic.Int64) func() {
		n := now.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		return func() { now.Add(-1) }
	}
	release := make(chan struct{})
	w := b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Concurrency: 4, Wait: time.Second})
	w.Handle("slow", func(ctx context.Context, _ *client.Message) error {
		defer handled.Add(1)
		defer track(&slowNow, &slowMax)()
		time.Sleep(20 * time.Millisecond)
		return nil
	}, client.HandlerOptions{Concurrency: 1})
	w.Handle("fast", func(ctx context.Context, _ *client.Message) error {
		defer handled.Add(1)
		defer track(&fastNow, &fastMax)()
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}, client.HandlerOptions{})
	for i := range 6 {
		b.enqueue(lane("slow", fmt.Sprint(i)), fmt.Sprintf("slow-%d", i))
		b.enqueue(lane("fast", fmt.Sprint(i)), fmt.Sprintf("fast-%d", i))
	}
	stop := runWorker(t, w)
	testkit.Eventually(t, 10*time.Second, "four fast handlers at once", func() bool { return fastMax.Load() == 4 })
	close(release)
	testkit.Eventually(t, 10*time.Second, "every message handled", func() bool {
		return handled.Load() == 12
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if m := slowMax.Load(); m != 1 {
		t.Fatalf("%d slow handlers ran at once, want at most its Concurrency 1", m)
	}
	if m := fastMax.Load(); m != 4 {
		t.Fatalf("%d fast handlers ran at once, want the worker's Concurrency 4", m)
	}
}

// TestAWorkerRefusesAQueueTwiceOrNone: Run fails with a Validation error on queue when a
// queue is added twice, and when the worker has no queue at all.
func TestAWorkerRefusesAQueueTwiceOrNone(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	nop := func(context.Context, *client.Message) error { return nil }
	twice := b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: "emails", Handler: nop})
	twice.Handle("emails", nop, client.HandlerOptions{})
	none := b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace})
	for name, w := range map[string]*client.Worker{"twice": twice, "none": none} {
		err := w.Run(ctxFor(t))
		var oe *orrery.Error
		if !errors.As(err, &oe) || oe.Code != orrery.CodeValidation || oe.Field != "queue" {
			t.Errorf("%s: Run returned %v, want a Validation error on queue", name, err)
		}
	}
}

// TestAFailedMessageComesBackAfterItsBackoff: a queue's Backoff decides each release's delay
// from the delivery count: the handler fails twice, the backoff hears deliveries 1 and 2, and
// the message stays invisible for the delay it returned.
func TestAFailedMessageComesBackAfterItsBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	var mu sync.Mutex
	var asked []int
	var attempts atomic.Int64
	w := b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Wait: time.Second})
	w.Handle(testQueue, func(context.Context, *client.Message) error {
		if attempts.Add(1) <= 2 {
			return errors.New("not yet")
		}
		return nil
	}, client.HandlerOptions{Backoff: func(delivery int) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, delivery)
		if delivery == 2 {
			return time.Hour
		}
		return 0
	}})
	l := lane(testQueue, "k")
	b.enqueue(l, "flaky")
	stop := runWorker(t, w)
	testkit.Eventually(t, 10*time.Second, "the second failure released", func() bool {
		msgs := b.laneMessages(l)
		return len(msgs) == 1 && msgs[0].GetLease() == nil && msgs[0].GetDeliveryCount() == 2
	})
	msg := b.laneMessages(l)[0]
	if until := time.UnixMicro(msg.GetVisibleAtUnixMicros()); time.Until(until) < 50*time.Minute {
		t.Fatalf("after the second failure the message is visible at %v, want an hour away", until)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(asked, []int{1, 2}) {
		t.Fatalf("the backoff was asked for deliveries %v, want [1 2]", asked)
	}
}

// TestExponentialBackoffDoublesUpToItsLimit: each delay is its doubling of first, capped at
// limit, less at most a fifth.
func TestExponentialBackoffDoublesUpToItsLimit(t *testing.T) {
	backoff := client.ExponentialBackoff(time.Second, 30*time.Second)
	for delivery, nominal := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 5: 16 * time.Second, 6: 30 * time.Second, 100: 30 * time.Second} {
		for range 50 {
			if d := backoff(delivery); d > nominal || d < nominal-nominal/5 {
				t.Fatalf("delivery %d: %v, want within [%v, %v]", delivery, d, nominal-nominal/5, nominal)
			}
		}
	}
}
