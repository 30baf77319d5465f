package clienttest_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/client/clienttest"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/schedule"
)

// settable is a clock a test moves.
type settable struct {
	mu  sync.Mutex
	now time.Time
}

func (c *settable) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *settable) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func everyMinute(l *orreryv1.Lane, id string) *orreryv1.ScheduleDefinition {
	return &orreryv1.ScheduleDefinition{Lane: l, ScheduleId: id,
		Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{
			IntervalMicros: time.Minute.Microseconds(), FirstDueAtUnixMicros: t0.Add(time.Minute).UnixMicro()}}},
		Template: &orreryv1.MessageTemplate{PayloadJson: `{}`}}
}

func emitDue(t *testing.T, tr *clienttest.Transport, want int) {
	t.Helper()
	if n, err := tr.EmitDue(context.Background()); err != nil || n != want {
		t.Fatalf("EmitDue: %d, %v; want %d", n, err, want)
	}
}

// TestEmitDueIsTheDueCoordinator: EmitDue emits what is due at the twin's clock, each
// occurrence once under its stable id, expires due sagas, serves a backlog beyond one emit's
// maximum, and finds nothing more to do when called again.
func TestEmitDueIsTheDueCoordinator(t *testing.T) {
	t.Parallel()
	clock := &settable{now: t0}
	tr := clienttest.New(4, clienttest.WithClock(clock.Now))
	t.Cleanup(func() { _ = tr.Close() })
	c := client.New(tr, client.Options{})
	ctx := context.Background()
	l := &orreryv1.Lane{Namespace: "ns", Queue: "ticks", Key: "k"}
	id := client.NewID()
	if _, err := c.ConfigureSchedule(ctx, everyMinute(l, id), 0); err != nil {
		t.Fatal(err)
	}
	sagaLane := &orreryv1.Lane{Namespace: "ns", Queue: "sagas", Key: "k"}
	sagaID := client.NewID()
	if _, err := c.CompareExchangeSaga(ctx, &orreryv1.CompareExchangeSaga{Lane: sagaLane, SagaId: sagaID, Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING,
		DeadlineUnixMicros: t0.Add(30 * time.Second).UnixMicro(),
		Timeout:            &orreryv1.SagaTimeout{Queue: "timeouts", Template: &orreryv1.MessageTemplate{PayloadJson: `{}`}}}); err != nil {
		t.Fatal(err)
	}
	emitDue(t, tr, 0)

	clock.Set(t0.Add(90 * time.Second))
	emitDue(t, tr, 2)
	msgs, _, err := c.InspectLane(ctx, l, "", 1000)
	if err != nil || len(msgs) != 1 || msgs[0].GetId() != schedule.OccurrenceID(id, 1, 0) || msgs[0].GetOccurrence().GetScheduleId() != id {
		t.Fatalf("lane holds %v %v, want occurrence 0", msgs, err)
	}
	saga, err := c.InspectSaga(ctx, sagaLane, sagaID)
	if err != nil || saga.GetPhase() != orreryv1.SagaPhase_SAGA_PHASE_TIMED_OUT {
		t.Fatalf("saga %v %v, want it timed out", saga, err)
	}
	timeouts, _, err := c.InspectLane(ctx, &orreryv1.Lane{Namespace: "ns", Queue: "timeouts", Key: "k"}, "", 10)
	if err != nil || len(timeouts) != 1 {
		t.Fatalf("timeout lane holds %v %v, want the timeout message", timeouts, err)
	}
	emitDue(t, tr, 0)

	clock.Set(t0.Add(100*time.Minute + 30*time.Second)) // ordinals 1..99, three emits' worth
	emitDue(t, tr, 99)
	emitDue(t, tr, 0)
	msgs, next, err := c.InspectLane(ctx, l, "", 1000)
	if err != nil || next != "" || len(msgs) != 100 {
		t.Fatalf("lane holds %d messages (next %q, %v), want 100", len(msgs), next, err)
	}
	ids := map[string]bool{}
	for _, m := range msgs {
		ids[m.GetId()] = true
	}
	for i := range uint64(100) {
		if !ids[schedule.OccurrenceID(id, 1, i)] {
			t.Fatalf("occurrence %d is missing from %v", i, ids)
		}
	}
}

// TestEmitDuePassesOverAFailingRef: a schedule whose creator lost its grants stays due, as
// under a coordinator, and EmitDue returns without emitting it, however often it is called.
func TestEmitDuePassesOverAFailingRef(t *testing.T) {
	t.Parallel()
	clock := &settable{now: t0}
	tr := clienttest.New(2, clienttest.WithClock(clock.Now), clienttest.WithGrants(grants.Everything("admin"), grants.Everything("creator")))
	t.Cleanup(func() { _ = tr.Close() })
	ctx := context.Background()
	l := &orreryv1.Lane{Namespace: "ns", Queue: "ticks", Key: "k"}
	id := client.NewID()
	if _, err := client.New(tr, client.Options{Principal: "creator"}).ConfigureSchedule(ctx, everyMinute(l, id), 0); err != nil {
		t.Fatal(err)
	}
	admin := client.New(tr, client.Options{Principal: "admin"})
	if err := admin.DeleteGrant(ctx, "creator"); err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(10 * time.Minute))
	emitDue(t, tr, 0)
	emitDue(t, tr, 0)
	status, err := admin.PartitionStatus(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	other, err := admin.PartitionStatus(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if next := max(status.GetNextDueAtUnixMicros(), other.GetNextDueAtUnixMicros()); next != t0.Add(time.Minute).UnixMicro() {
		t.Fatalf("next due at %d, want the schedule's first instant still due", next)
	}
	if err := admin.PutGrant(ctx, grants.Everything("creator")); err != nil {
		t.Fatal(err)
	}
	emitDue(t, tr, 10)
}

// TestCloseStopsEveryGoroutine: once Close returns, no goroutine of the twin is left, whatever
// was parked or armed (a waiting receive, a lease's end, housekeeping). It does not run in
// parallel, so that no other test's twin runs meanwhile.
func TestCloseStopsEveryGoroutine(t *testing.T) {
	tr := clienttest.New(4)
	ctx := context.Background()
	do(t, tr, 0, receiveRequest("lease-nothing", 0, 0))
	waiting := make(chan error, 1)
	go func() {
		_, err := tr.Command(ctx, 0, receiveRequest("wait", 10*time.Second, 0))
		waiting <- err
	}()
	waitForWaiting(t, tr)
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; err == nil {
		t.Fatal("a waiting receive outlived Close without error")
	}
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, g := range strings.Split(stacks, "\n\n") {
		if strings.Contains(g, "client/clienttest.") && !strings.Contains(g, "clienttest_test.") {
			t.Fatalf("a goroutine of the twin outlived Close:\n%s", g)
		}
	}
}
