package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
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

// clusterFull reports whether the cluster tests run at full length (ORRERY_CLUSTER_FULL=1,
// what make cluster-test sets); otherwise they run their short versions.
func clusterFull() bool { return os.Getenv("ORRERY_CLUSTER_FULL") == "1" }

// clientLogEnv names a file that the clients of dialSeeds log to at debug level (each
// retry, each lookup that found no leader), to see why a call was slow or failed.
const clientLogEnv = "ORRERY_CHAOS_CLIENT_LOG"

// dialSeeds dials the cluster through seeds; the client is closed when the test ends.
func dialSeeds(t *testing.T, seeds ...string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logger := quiet
	if path := os.Getenv(clientLogEnv); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatalf("%s: %v", clientLogEnv, err)
		}
		t.Cleanup(func() { _ = f.Close() })
		logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	c, err := client.Dial(ctx, client.DialConfig{Seeds: seeds, Options: client.Options{Logger: logger}})
	if err != nil {
		t.Fatalf("dial %v: %v", seeds, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// firstEnqueueAfter is the earliest enqueue time after `after` of an occurrence delivered from
// partition, and whether there is one.
func (l *deliveryLog) firstEnqueueAfter(partition int, after time.Time) (time.Time, bool) {
	var first time.Time
	for _, d := range l.snapshot() {
		if d.origin == client.OriginOccurrence && d.partition == partition && d.enqueuedAt.After(after) &&
			(first.IsZero() || d.enqueuedAt.Before(first)) {
			first = d.enqueuedAt
		}
	}
	return first, !first.IsZero()
}

// ticks is a test's load: Every-1s schedules on chosen partitions, each in its own lane of one
// queue, messages enqueued by the test into lanes of the same queue, and a worker consuming
// the queue across all partitions into a deliveryLog.
type ticks struct {
	c         *client.Client
	namespace string
	queue     string
	schedules []tickSchedule
	enqueued  map[string]string // message id → lane key, for messages enqueue enqueued
	kept      map[string]string // message id → lane key, for messages enqueueKept enqueued
	enqMu     sync.Mutex
	log       *deliveryLog
	stop      context.CancelFunc
	runErr    chan error
}

// startTicks configures perPartition Every-1s schedules on each of partitions, whose keys are
// chosen to land there, and starts a worker consuming their queue.
func startTicks(t *testing.T, ctx context.Context, c *client.Client, partitions []int, perPartition int) *ticks {
	t.Helper()
	k := &ticks{c: c, namespace: "cluster-" + uuid.NewString()[:8], queue: "ticks", enqueued: map[string]string{}, kept: map[string]string{}, log: &deliveryLog{}}
	want := map[int]int{}
	for _, p := range partitions {
		want[p] = perPartition
	}
	first := time.Now().Add(2 * time.Second).Truncate(time.Second)
	for remaining := len(partitions) * perPartition; remaining > 0; {
		lane := &orreryv1.Lane{Namespace: k.namespace, Queue: k.queue, Key: "s-" + uuid.NewString()}
		p := route.Partition(lane, c.Partitions())
		if want[p] == 0 {
			continue
		}
		want[p]--
		remaining--
		s := tickSchedule{lane: lane, id: uuid.NewString(), partition: p, first: first}
		if _, err := c.ConfigureSchedule(ctx, &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: s.id,
			Template: &orreryv1.MessageTemplate{PayloadJson: `{"tick":true}`},
			Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{
				IntervalMicros: time.Second.Microseconds(), FirstDueAtUnixMicros: first.UnixMicro()}}},
		}, 0); err != nil {
			t.Fatalf("configure a schedule on partition %d: %v", p, err)
		}
		k.schedules = append(k.schedules, s)
	}
	w := c.NewWorker(client.WorkerConfig{Namespace: k.namespace, Queue: k.queue, Handler: k.log.handle,
		Concurrency: 32, LeaseDuration: 5 * time.Second, Wait: 2 * time.Second, UnreachableTimeout: -1})
	workerCtx, stop := context.WithCancel(ctx)
	k.stop = stop
	k.runErr = make(chan error, 1)
	go func() { k.runErr <- w.Run(workerCtx) }()
	t.Cleanup(stop)
	return k
}

// allPartitions lists 0..n-1.
func allPartitions(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// keptQueue is the queue of a ticks fixture's namespace that no worker consumes.
const keptQueue = "kept"

// enqueue enqueues one message with a fresh id into a lane of the ticks queue on partition,
// retrying (with the client's retries under a 30 s bound per call); it returns the call's
// error.
func (k *ticks) enqueue(ctx context.Context, partition int) error {
	id, key, err := k.enqueueTo(ctx, k.queue, partition)
	if err == nil {
		k.enqMu.Lock()
		k.enqueued[id] = key
		k.enqMu.Unlock()
	}
	return err
}

// enqueueKept enqueues one message with a fresh id into a lane of keptQueue on partition, as
// enqueue does; checkKept reads them back.
func (k *ticks) enqueueKept(ctx context.Context, partition int) error {
	id, key, err := k.enqueueTo(ctx, keptQueue, partition)
	if err == nil {
		k.enqMu.Lock()
		k.kept[id] = key
		k.enqMu.Unlock()
	}
	return err
}

func (k *ticks) enqueueTo(ctx context.Context, queue string, partition int) (id, key string, err error) {
	key = fmt.Sprintf("m-%d", partition)
	for i := 0; route.PartitionOf(k.namespace, key, k.c.Partitions()) != partition; i++ {
		key = fmt.Sprintf("m-%d-%d", partition, i)
	}
	id = uuid.NewString()
	callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = k.c.Enqueue(callCtx, &orreryv1.Enqueue{Lane: &orreryv1.Lane{Namespace: k.namespace, Queue: queue, Key: key}, Id: id, PayloadJson: `{"cmd":true}`},
		client.WithCommandID("enqueue-"+id))
	return id, key, err
}

// checkKept reads every lane of keptQueue and checks that it holds exactly the messages
// enqueueKept enqueued there, each once.
func (k *ticks) checkKept(t *testing.T, ctx context.Context) {
	t.Helper()
	want := map[string]map[string]bool{} // lane key → ids
	for id, key := range k.kept {
		if want[key] == nil {
			want[key] = map[string]bool{}
		}
		want[key][id] = true
	}
	for key, ids := range want {
		got := occurrences(t, ctx, k.c, &orreryv1.Lane{Namespace: k.namespace, Queue: keptQueue, Key: key})
		seen := map[string]bool{}
		for _, m := range got {
			if seen[m.GetId()] {
				t.Errorf("lane %s/%s holds message %s twice", keptQueue, key, m.GetId())
			}
			seen[m.GetId()] = true
			if !ids[m.GetId()] {
				t.Errorf("lane %s/%s holds message %s nobody enqueued", keptQueue, key, m.GetId())
			}
		}
		for id := range ids {
			if !seen[id] {
				t.Errorf("lane %s/%s lost message %s", keptQueue, key, id)
			}
		}
	}
	t.Logf("%d kept messages in %d lanes all readable", len(k.kept), len(want))
}

// finish cancels every schedule, waits until the worker has drained every lane, stops it and
// checks the history: every schedule emitted ordinals 0..next-1 at its nominal instants up to
// within a few seconds of the cancel, each delivered; no occurrence or enqueued message was
// enqueued twice (deliveries of one id with different enqueue times or the same delivery
// count); every message the test enqueued was delivered. Redeliveries of one enqueue (a lost
// ack or receive reply) are counted and logged, not failures.
func (k *ticks) finish(t *testing.T, ctx context.Context) {
	t.Helper()
	next := map[string]uint64{} // lane key → the schedule's next ordinal at its cancel
	cancelledAt := map[string]time.Time{}
	for _, s := range k.schedules {
		testkit.Eventually(t, 90*time.Second, "schedule "+s.id+" cancelled", func() bool {
			callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			r, err := k.c.InspectSchedule(callCtx, s.lane, s.id)
			if err != nil {
				return false
			}
			_, err = k.c.CancelSchedule(callCtx, &orreryv1.CancelSchedule{Lane: s.lane, ScheduleId: s.id, ExpectedRevision: r.GetRevision()})
			if errors.Is(err, orrery.ErrRevisionConflict) || (err != nil && (orrery.Retriable(orrery.CodeOf(err)) || errors.Is(err, context.DeadlineExceeded))) {
				return false // an occurrence fired in between, or the partition is between leaders
			}
			if err != nil {
				t.Fatalf("cancel schedule %s: %v", s.id, err)
			}
			after, err := k.c.InspectSchedule(callCtx, s.lane, s.id)
			if err != nil {
				return false
			}
			next[s.lane.GetKey()], cancelledAt[s.lane.GetKey()] = after.GetNextOrdinal(), time.Now()
			return true
		})
	}
	lanes := map[string]*orreryv1.Lane{}
	for _, s := range k.schedules {
		lanes[s.lane.GetKey()] = s.lane
	}
	for _, key := range k.enqueued {
		lanes[key] = &orreryv1.Lane{Namespace: k.namespace, Queue: k.queue, Key: key}
	}
	for key, lane := range lanes {
		testkit.Eventually(t, 90*time.Second, "lane "+key+" drained", func() bool {
			callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			msgs, _, err := k.c.InspectLane(callCtx, lane, "", 10)
			return err == nil && len(msgs) == 0
		})
	}
	k.stop()
	if err := <-k.runErr; err != nil {
		t.Errorf("worker Run: %v", err)
	}
	k.check(t, next, cancelledAt)
}

// check fails the test for each problem historyProblems finds in the deliveries so far.
func (k *ticks) check(t *testing.T, next map[string]uint64, cancelledAt map[string]time.Time) {
	t.Helper()
	problems, summary := historyProblems(k.schedules, k.log.snapshot(), k.enqueued, next, cancelledAt)
	for _, p := range problems {
		t.Error(p)
	}
	t.Log(summary)
}
