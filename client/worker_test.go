package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/client/clienttest"
	"github.com/orreryhq/orrery/internal/testkit"
)

// runWorker starts w and returns a stop function that cancels it and returns Run's error.
func runWorker(t *testing.T, w *client.Worker) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("worker did not stop within 10s")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func TestWorkerProcessesEveryMessageOnceWithinConcurrency(t *testing.T) {
	t.Parallel()
	const partitions, total, concurrency = 4, 120, 3
	b := setup(t, partitions)
	var (
		mu        sync.Mutex
		handled   = map[string]int{}
		byPart    = map[int]int{}
		inFlight  atomic.Int64
		maxFlight atomic.Int64
	)
	w := b.c.NewWorker(client.WorkerConfig{
		Namespace: testNamespace, Queue: testQueue, Concurrency: concurrency, Wait: time.Second,
		Handler: func(ctx context.Context, m *client.Message) error {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for cur := maxFlight.Load(); n > cur && !maxFlight.CompareAndSwap(cur, n); cur = maxFlight.Load() {
			}
			time.Sleep(2 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			handled[m.ID()]++
			byPart[m.Partition()]++
			return nil
		},
	})
	stop := runWorker(t, w)
	var lanes []*orreryv1.Lane
	for i := range total {
		l := lane(testQueue, fmt.Sprintf("key-%d", i))
		lanes = append(lanes, l)
		b.enqueue(l, fmt.Sprintf("m-%d", i))
	}
	testkit.Eventually(t, 20*time.Second, "every message handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == total
	})
	// Run returns once every handled message is settled, and nothing is handled after it.
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range handled {
		if n != 1 {
			t.Fatalf("message %s handled %d times", id, n)
		}
	}
	if len(byPart) != partitions {
		t.Fatalf("messages came from partitions %v, want all %d", byPart, partitions)
	}
	if m := maxFlight.Load(); m > concurrency || m < 2 {
		t.Fatalf("at most %d handlers ran at once, want 2..%d", m, concurrency)
	}
	for _, l := range lanes {
		if msgs := b.laneMessages(l); len(msgs) != 0 {
			t.Fatalf("lane %s still holds %v (not acked)", l.GetKey(), msgs)
		}
	}
}

func TestWorkerReleasesFailedMessagesForRedelivery(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	var (
		mu         sync.Mutex
		deliveries []uint32
	)
	w := b.c.NewWorker(client.WorkerConfig{
		Namespace: testNamespace, Queue: testQueue, Concurrency: 2, Wait: time.Second,
		Handler: func(ctx context.Context, m *client.Message) error {
			mu.Lock()
			deliveries = append(deliveries, m.DeliveryCount())
			mu.Unlock()
			switch m.DeliveryCount() {
			case 1:
				return errors.New("try again")
			case 2:
				panic("and again")
			}
			return nil
		},
	})
	runWorker(t, w)
	l := lane(testQueue, "flaky")
	b.enqueue(l, "flaky")
	testkit.Eventually(t, 10*time.Second, "three deliveries and an ack", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(deliveries) == 3 && len(b.laneMessages(l)) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(deliveries) != "[1 2 3]" {
		t.Fatalf("delivery counts %v, want [1 2 3]", deliveries)
	}
}

func TestWorkerExtendsLeaseOfSlowHandler(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	var calls atomic.Int64
	done := make(chan uint32, 4)
	w := b.c.NewWorker(client.WorkerConfig{
		Namespace: testNamespace, Queue: testQueue, Concurrency: 2, Wait: time.Second,
		LeaseDuration: time.Second, // the shortest lease a partition grants
		Handler: func(ctx context.Context, m *client.Message) error {
			calls.Add(1)
			select {
			case <-time.After(2500 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
			done <- m.DeliveryCount()
			return nil
		},
	})
	runWorker(t, w)
	l := lane(testQueue, "slow")
	b.enqueue(l, "slow")
	select {
	case n := <-done:
		if n != 1 {
			t.Fatalf("slow handler saw delivery %d, want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("slow handler did not finish")
	}
	testkit.Eventually(t, 5*time.Second, "the ack", func() bool { return len(b.laneMessages(l)) == 0 })
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler called %d times, want 1 (the lease lapsed)", n)
	}
	extensions := 0
	for _, c := range b.commandCalls() {
		if ms := c.Request.GetBatch().GetMutations(); len(ms) == 1 && ms[0].GetExtendLease() != nil {
			extensions++
		}
	}
	if extensions < 3 {
		t.Fatalf("%d lease extensions during a 2.5s handler with a 1s lease, want at least 3", extensions)
	}
}

func TestWorkerIdleSendsOneWaitingReceivePerPartitionPerWait(t *testing.T) {
	t.Parallel()
	const partitions, wait, run = 4, 200 * time.Millisecond, time.Second
	b := setup(t, partitions)
	w := b.c.NewWorker(client.WorkerConfig{
		Namespace: testNamespace, Queue: testQueue, Wait: wait,
		Handler: func(context.Context, *client.Message) error { return nil },
	})
	stop := runWorker(t, w)
	time.Sleep(run)
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	perPartition, abandoned := map[int]int{}, map[int]int{}
	for _, c := range b.commandCalls() {
		switch {
		case c.IsReceive() && c.Request.GetAbandon(): // a receive parked as the worker stopped
			abandoned[c.Partition]++
		case c.IsReceive() && c.Request.GetWaitMicros() == wait.Microseconds():
			perPartition[c.Partition]++
		default:
			t.Fatalf("idle worker sent %v, want only waiting receives and their abandons", c.Request)
		}
	}
	for p, n := range abandoned {
		if n > 1 {
			t.Fatalf("partition %d got %d abandons, want at most the one of its last waiting receive", p, n)
		}
	}
	limit := int(run/wait) + 1
	for p := range partitions {
		if n := perPartition[p]; n < 1 || n > limit {
			t.Fatalf("partition %d got %d receives in %s with a %s wait, want 1..%d", p, n, run, wait, limit)
		}
	}
}

func TestWorkerSharesSlotsFairlyAcrossPartitions(t *testing.T) {
	t.Parallel()
	const partitions = 4
	b := setup(t, partitions)
	keys := keysOnEveryPartition(t, partitions)
	busy, quiet := lane(testQueue, keys[0]), lane(testQueue, keys[1])
	for i := range 60 {
		b.enqueue(busy, fmt.Sprintf("busy-%d", i))
	}
	var (
		mu    sync.Mutex
		order []string
	)
	w := b.c.NewWorker(client.WorkerConfig{
		Namespace: testNamespace, Queue: testQueue, Concurrency: 2, Wait: time.Second,
		Handler: func(ctx context.Context, m *client.Message) error {
			time.Sleep(3 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			order = append(order, m.ID())
			return nil
		},
	})
	runWorker(t, w)
	testkit.Eventually(t, 10*time.Second, "the busy lane started", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) >= 5
	})
	for i := range 5 {
		b.enqueue(quiet, fmt.Sprintf("quiet-%d", i))
	}
	testkit.Eventually(t, 20*time.Second, "every message handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 65
	})
	mu.Lock()
	defer mu.Unlock()
	last := 0
	for i, id := range order {
		if strings.HasPrefix(id, "quiet-") {
			last = i
		}
	}
	if last >= 45 {
		t.Fatalf("the quiet partition's last message was handled %dth of 65: it waited behind the busy one (%v)", last+1, order)
	}
}

func TestWorkerStopsCleanlyWithoutLeaks(t *testing.T) {
	b := setup(t, 4)
	before := clientGoroutines()
	started := make(chan string, 8)
	w := b.c.NewWorker(client.WorkerConfig{
		Namespace: testNamespace, Queue: testQueue, Concurrency: 2, Wait: 5 * time.Second,
		Handler: func(ctx context.Context, m *client.Message) error {
			started <- m.ID()
			<-ctx.Done() // block until the worker stops
			return ctx.Err()
		},
	})
	stop := runWorker(t, w)
	keys := keysOnEveryPartition(t, 4)
	for i, k := range keys {
		b.enqueue(lane(testQueue, k), fmt.Sprintf("m-%d", i))
	}
	<-started
	<-started
	testkit.Eventually(t, 5*time.Second, "every message leased: two handled, two waiting for a slot", func() bool {
		for _, k := range keys {
			if msgs := b.laneMessages(lane(testQueue, k)); len(msgs) != 1 || msgs[0].GetLease() == nil {
				return false
			}
		}
		return true
	})
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Fatalf("stopping took %s", elapsed)
	}
	testkit.Eventually(t, 5*time.Second, "no goroutine of the client left", func() bool {
		return len(clientGoroutines()) <= len(before)
	})
	// Everything the worker held was released: all four messages are visible again.
	for i, k := range keys {
		msgs := b.laneMessages(lane(testQueue, k))
		if len(msgs) != 1 || msgs[0].GetLease() != nil {
			t.Fatalf("message m-%d after stop: %v, want it released", i, msgs)
		}
	}
}

func TestWorkerRejectsBadConfiguration(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	ok := func(context.Context, *client.Message) error { return nil }
	for _, cfg := range []client.WorkerConfig{
		{Namespace: testNamespace, Queue: testQueue},
		{Namespace: testNamespace, Queue: "bad queue", Handler: ok},
		{Queue: testQueue, Handler: ok},
		{Namespace: testNamespace, Queue: testQueue, Handler: ok, Concurrency: -1},
		{Namespace: testNamespace, Queue: testQueue, Handler: ok, MaxUnsettled: -1},
		{Namespace: testNamespace, Queue: testQueue, Handler: ok, LeaseDuration: time.Hour}, // refused by the partition
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := b.c.NewWorker(cfg).Run(ctx)
		cancel()
		if !errors.Is(err, orrery.ErrValidation) {
			t.Fatalf("run with %+v: %v, want Validation", cfg, err)
		}
	}
}

func TestWorkerMessageAccessors(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	ctx := ctxFor(t)
	l := lane(testQueue, "acc")
	id := client.NewID()
	if _, err := b.c.ConfigureSchedule(ctx, everySchedule(l, id, time.Hour, b.clock.Now().Add(time.Minute)), 0); err != nil {
		t.Fatalf("configure: %v", err)
	}
	b.clock.Advance(time.Minute + time.Second)
	b.emitDue(1)
	if _, err := b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: "plain", PayloadJson: `{"a":1}`, HeadersJson: `{"h":"v"}`, OrderingKey: "ok", TimeToLiveMicros: 3_600_000_000}); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	type seen struct {
		origin               client.Origin
		payload, headers, ok string
		delivery             uint32
		partition            int
		scheduleID           string
		expires, enqueued    time.Time
		leaseToken           string
	}
	got := make(chan seen, 2)
	w := b.c.NewWorker(client.WorkerConfig{
		Namespace: testNamespace, Queue: testQueue, Wait: time.Second,
		Handler: func(ctx context.Context, m *client.Message) error {
			got <- seen{m.Origin(), string(m.Payload()), string(m.Headers()), m.OrderingKey(), m.DeliveryCount(), m.Partition(),
				m.Occurrence().GetScheduleId(), m.ExpiresAt(), m.EnqueuedAt(), m.LeaseToken()}
			return nil
		},
	})
	runWorker(t, w)
	for range 2 {
		var s seen
		select {
		case s = <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("messages not handled")
		}
		if s.delivery != 1 || s.partition != b.partitionOf(l) || s.leaseToken == "" || b.clock.Now().Sub(s.enqueued) > time.Minute || s.enqueued.After(b.clock.Now()) {
			t.Fatalf("message %+v", s)
		}
		switch s.origin {
		case client.OriginOccurrence:
			if s.scheduleID != id || s.payload != `{"tick":true}` || !s.expires.IsZero() {
				t.Fatalf("occurrence %+v", s)
			}
		case client.OriginEnqueue:
			if s.payload != `{"a":1}` || s.headers != `{"h":"v"}` || s.ok != "ok" || s.expires.Sub(s.enqueued) != time.Hour {
				t.Fatalf("enqueued message %+v", s)
			}
		default:
			t.Fatalf("origin %s", s.origin)
		}
	}
}

// TestWorkerWithLargeConcurrencyReceivesWithinThePartitionLimit: a Concurrency above the
// partition's receive limit (256) does not make the default receive size exceed it (which the
// partition refuses for good, stopping the worker).
func TestWorkerWithLargeConcurrencyReceivesWithinThePartitionLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	var handled atomic.Int64
	w := b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: testQueue, Concurrency: 1000, Wait: time.Second,
		Handler: func(context.Context, *client.Message) error { handled.Add(1); return nil }})
	stop := runWorker(t, w)
	for i := range 10 {
		b.enqueue(lane(testQueue, fmt.Sprintf("key-%d", i)), fmt.Sprintf("m-%d", i))
	}
	testkit.Eventually(t, 20*time.Second, "every message handled", func() bool { return handled.Load() == 10 })
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// holdAcks holds every ack command at b's partitions until the returned release is called
// (more calls do nothing).
func holdAcks(b *bundle) (release func()) {
	held := make(chan struct{})
	b.tr.SetFaultHook(func(_ int, req *orreryv1.CommandRequest) (clienttest.Fault, error) {
		if m := req.GetBatch().GetMutations(); len(m) > 0 && m[0].GetAck() != nil {
			<-held
		}
		return clienttest.FaultNone, nil
	})
	var once sync.Once
	return func() { once.Do(func() { close(held) }) }
}

// TestWorkerHandlersDoNotWaitForAcks: a handler's slot is freed when it returns, not when its
// ack is durable, and at most MaxUnsettled messages wait for their acks. With Concurrency 1,
// MaxUnsettled 2 and every ack held at the partition, a second and a third handler run while
// the first acks wait; a fourth waits for a settle slot; once the acks go through, everything
// is acked.
func TestWorkerHandlersDoNotWaitForAcks(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	release := holdAcks(b)
	var handled atomic.Int64
	w := b.c.NewWorker(client.WorkerConfig{
		Namespace: testNamespace, Queue: testQueue, Concurrency: 1, Prefetch: 1, MaxUnsettled: 2, Wait: time.Second, SettleTimeout: time.Minute,
		Handler: func(context.Context, *client.Message) error { handled.Add(1); return nil },
	})
	l := lane(testQueue, "k")
	for i := range 4 {
		b.enqueue(l, fmt.Sprintf("m-%d", i))
	}
	stop := runWorker(t, w)
	t.Cleanup(release) // runs before runWorker's stop
	testkit.Eventually(t, 5*time.Second, "a third handler while the first two acks are held", func() bool { return handled.Load() >= 3 })
	time.Sleep(100 * time.Millisecond)
	if n := handled.Load(); n != 3 {
		t.Fatalf("%d handlers ran with two acks held, Concurrency 1 and MaxUnsettled 2, want 3", n)
	}
	release()
	testkit.Eventually(t, 10*time.Second, "every message handled and acked", func() bool {
		return handled.Load() == 4 && len(b.laneMessages(l)) == 0
	})
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestAWorkersHandlersOutrunItsAcksByDefault: by default many more messages than its
// handlers and prefetch may wait for their acks (DefaultWorkerMaxUnsettled), as a job queue's
// completer buffers completions: with Concurrency 1 and every ack held at the partition, all
// 40 messages are handled; once the acks go through, all are acked.
func TestAWorkersHandlersOutrunItsAcksByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	release := holdAcks(b)
	var handled atomic.Int64
	w := b.c.NewWorker(client.WorkerConfig{
		Namespace: testNamespace, Queue: testQueue, Concurrency: 1, Wait: time.Second, SettleTimeout: time.Minute,
		Handler: func(context.Context, *client.Message) error { handled.Add(1); return nil },
	})
	l := lane(testQueue, "k")
	const n = 40
	for i := range n {
		b.enqueue(l, fmt.Sprintf("m-%d", i))
	}
	stop := runWorker(t, w)
	t.Cleanup(release) // runs before runWorker's stop
	testkit.Eventually(t, 10*time.Second, "every message handled while the acks are held", func() bool { return handled.Load() == n })
	release()
	testkit.Eventually(t, 10*time.Second, "every message acked", func() bool { return len(b.laneMessages(l)) == 0 })
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestWorkerFetchesOnlyWhenMoreAreVisible: a partition whose messages arrive one at a time
// costs one long poll (one waiting request, which leases) per message; the
// worker fetches (a receive of its own without waiting) only when the partition reported more
// visible messages than the long poll's share of Concurrency + Prefetch took.
func TestWorkerFetchesOnlyWhenMoreAreVisible(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	var handled atomic.Int64
	w := b.c.NewWorker(client.WorkerConfig{
		Namespace: testNamespace, Queue: testQueue, Concurrency: 4, Wait: 5 * time.Second,
		Handler: func(context.Context, *client.Message) error { handled.Add(1); return nil },
	})
	stop := runWorker(t, w)
	l := lane(testQueue, "k")
	for i := range 3 {
		b.enqueue(l, fmt.Sprintf("one-%d", i))
		testkit.Eventually(t, 10*time.Second, "the message handled", func() bool { return handled.Load() == int64(i+1) })
	}
	fetches := func() int {
		n := 0
		polled := map[string]bool{} // command ids sent waiting: their leasing requests are no fetches
		for _, c := range b.tr.Calls() {
			switch id := c.Request.GetBatch().GetCommandId(); {
			case !c.IsReceive():
			case c.Request.GetWaitMicros() > 0:
				polled[id] = true
			case !polled[id]:
				n++
			}
		}
		return n
	}
	if n := fetches(); n != 0 {
		t.Fatalf("%d fetches for messages that came one at a time, want 0", n)
	}
	// A burst (one atomic batch) larger than the waiting receive's share (Concurrency +
	// Prefetch, 8, on the one partition): it takes 8 and is told of the rest, which a fetch takes.
	var burst []*orreryv1.Mutation
	for i := range 10 {
		burst = append(burst, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: l, Id: fmt.Sprintf("burst-%d", i), PayloadJson: `{}`}}})
	}
	if _, _, err := b.c.Batch(context.Background(), 0, burst); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the burst handled", func() bool { return handled.Load() == 13 })
	if n := fetches(); n != 1 { // a waiting receive of one message left 9 for two fetches or more
		t.Fatalf("%d fetches for a burst of ten, want 1 (the waiting receive leases its share, 8)", n)
	}
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestAStoppingWorkerReleasesWhatAnInFlightFetchLeased: a fetch (a receive without waiting)
// in flight when Run stops is not abandoned. Here the partition leases its messages and the
// reply is lost as the run stops; the worker sends the fetch again (its receipt is replayed)
// and releases every message it got, so none stays leased.
func TestAStoppingWorkerReleasesWhatAnInFlightFetchLeased(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	l := lane(testQueue, "k")
	var burst []*orreryv1.Mutation
	for i := range 10 { // more than the waiting receive takes (8): a fetch follows it
		burst = append(burst, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: l, Id: fmt.Sprintf("m-%d", i), PayloadJson: `{}`}}})
	}
	if _, _, err := b.c.Batch(context.Background(), 0, burst); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu       sync.Mutex
		polled   = map[string]bool{} // command ids sent waiting: their leasing requests are no fetches
		fetching = make(chan struct{})
		fetches  atomic.Int64
	)
	b.tr.SetFaultHook(func(_ int, req *orreryv1.CommandRequest) (clienttest.Fault, error) {
		ms := req.GetBatch().GetMutations()
		if len(ms) != 1 || ms[0].GetReceive() == nil {
			return clienttest.FaultNone, nil
		}
		mu.Lock()
		id := req.GetBatch().GetCommandId()
		if req.GetWaitMicros() > 0 {
			polled[id] = true
		}
		fetch := !polled[id]
		mu.Unlock()
		if !fetch || fetches.Add(1) > 1 {
			return clienttest.FaultNone, nil
		}
		close(fetching)
		<-ctx.Done() // the run stops while the first fetch is in flight, and its reply is lost
		return clienttest.FaultLoseReply, nil
	})
	var handled atomic.Int64
	w := b.c.NewWorker(client.WorkerConfig{
		Namespace: testNamespace, Queue: testQueue, Concurrency: 4, Wait: 5 * time.Second,
		Handler: func(context.Context, *client.Message) error { handled.Add(1); return nil },
	})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-fetching:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker sent no fetch")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not stop")
	}
	left := b.laneMessages(l)
	if int64(len(left)) != 10-handled.Load() || len(left) == 0 {
		t.Fatalf("%d messages left after %d handled, want the fetched ones", len(left), handled.Load())
	}
	for _, m := range left {
		if m.GetLease() != nil || m.GetDeliveryCount() != 1 {
			t.Fatalf("message %s after the stop: delivery %d, lease %v; want released", m.GetId(), m.GetDeliveryCount(), m.GetLease())
		}
	}
}

// TestAFetchAsksBeyondItsFreeSlotsForItsPrefetch: a busy partition's fetch asks for its free
// slots plus its Prefetch share, the prefetched messages wait for slots (never more than
// Concurrency handlers at once) and every message is handled once; with Prefetch -1 a fetch
// asks for no more than its free slots.
func TestAFetchAsksBeyondItsFreeSlotsForItsPrefetch(t *testing.T) {
	t.Parallel()
	for _, prefetch := range []int{4, -1} {
		t.Run(fmt.Sprint("prefetch ", prefetch), func(t *testing.T) {
			t.Parallel()
			b := setup(t, 1)
			l := lane(testQueue, "burst")
			const messages, concurrency = 20, 2
			for i := range messages {
				b.enqueue(l, fmt.Sprint("m", i))
			}
			var (
				mu            sync.Mutex
				running, peak int
				handled       = map[string]int{}
			)
			w := b.c.NewWorker(client.WorkerConfig{
				Namespace: testNamespace, Queue: testQueue, Concurrency: concurrency, Prefetch: prefetch, Wait: time.Second,
				Handler: func(ctx context.Context, m *client.Message) error {
					mu.Lock()
					running++
					peak = max(peak, running)
					handled[m.ID()]++
					mu.Unlock()
					time.Sleep(5 * time.Millisecond) // long enough for the slots to be taken
					mu.Lock()
					running--
					mu.Unlock()
					return nil
				},
			})
			stop := runWorker(t, w)
			testkit.Eventually(t, 20*time.Second, "every message handled", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(handled) == messages
			})
			if err := stop(); err != nil {
				t.Fatalf("run: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			for id, n := range handled {
				if n != 1 {
					t.Fatalf("%s handled %d times", id, n)
				}
			}
			if peak > concurrency {
				t.Fatalf("%d handlers ran at once, Concurrency is %d", peak, concurrency)
			}
			largest := uint32(0)
			for _, c := range b.commandCalls() {
				if c.IsReceive() && c.Request.GetWaitMicros() == 0 {
					largest = max(largest, c.Request.GetBatch().GetMutations()[0].GetReceive().GetMax())
				}
			}
			switch {
			case prefetch > 0 && largest <= concurrency:
				t.Fatalf("the largest fetch asked for %d messages, want beyond the %d slots", largest, concurrency)
			case prefetch > 0 && largest > concurrency+uint32(prefetch):
				t.Fatalf("the largest fetch asked for %d messages, more than %d slots and a prefetch of %d", largest, concurrency, prefetch)
			case prefetch < 0 && largest > concurrency:
				t.Fatalf("without prefetch the largest fetch asked for %d messages, beyond the %d slots", largest, concurrency)
			}
		})
	}
}
