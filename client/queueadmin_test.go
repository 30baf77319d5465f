package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/client/clienttest"
	"github.com/orreryhq/orrery/internal/testkit"
)

// enqueueSpread enqueues n messages of the test queue over n keys, so that they land on
// several partitions.
func (b *bundle) enqueueSpread(ctx context.Context, n int) {
	b.t.Helper()
	for i := range n {
		if _, err := b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane(testQueue, fmt.Sprintf("k%d", i)), Id: fmt.Sprintf("m%d", i), PayloadJson: `{}`}); err != nil {
			b.t.Fatal(err)
		}
	}
}

// TestPauseQueueStopsEveryPartition: PauseQueue pauses the queue on every partition: no
// partition's receive leases while it lasts, enqueues still land, QueueStats shows the pause on
// each; once ResumeQueue returns, a Worker handles every message.
func TestPauseQueueStopsEveryPartition(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	b.enqueueSpread(ctx, 4)
	if err := b.c.PauseQueue(ctx, testNamespace, testQueue, "maintenance"); err != nil {
		t.Fatal(err)
	}
	b.enqueueSpread(ctx, 12)
	for p := range 4 {
		if got, err := b.c.Receive(ctx, p, &orreryv1.Receive{Namespace: testNamespace, Queue: testQueue, Max: 10}, 0); err != nil || len(got) != 0 {
			t.Fatalf("partition %d leased %d messages of the paused queue (%v)", p, len(got), err)
		}
	}
	shares, err := b.c.QueueStats(ctx, testNamespace, testQueue, "")
	if err != nil {
		t.Fatal(err)
	}
	visible := uint64(0)
	for _, s := range shares {
		if pause := s.Stats.GetPause(); pause.GetPausedBy() != testPrincipal || pause.GetReason() != "maintenance" {
			t.Fatalf("partition %d's stats show pause %v", s.Partition, pause)
		}
		visible += s.Stats.GetVisible()
	}
	if visible != 12 {
		t.Fatalf("%d visible, want the 12 enqueued", visible)
	}
	if err := b.c.ResumeQueue(ctx, testNamespace, testQueue); err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int32
	w := b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: testQueue, Wait: 100 * time.Millisecond,
		Handler: func(context.Context, *client.Message) error { handled.Add(1); return nil }})
	stop := runWorker(t, w)
	defer func() { _ = stop() }()
	testkit.Eventually(t, 10*time.Second, "every message handled after the resume", func() bool { return handled.Load() == 12 })
}

// TestPauseQueueNamesThePartitionsNotReached: a PauseQueue that some partitions refuse fails
// with a PartitionsError naming them (and their code); the others keep the pause, and calling
// it again once they are back pauses them too, each partition keeping its first record.
func TestPauseQueueNamesThePartitionsNotReached(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	b.tr.SetFaultHook(func(p int, req *orreryv1.CommandRequest) (clienttest.Fault, error) {
		if (p == 1 || p == 3) && req.GetBatch().GetMutations()[0].GetPauseQueue() != nil {
			return clienttest.FaultFailBeforeApply, orrery.Errorf(orrery.CodeUnauthorized, "refused in this test")
		}
		return clienttest.FaultNone, nil
	})
	err := b.c.PauseQueue(ctx, testNamespace, testQueue, "first")
	var pe *client.PartitionsError
	if !errors.As(err, &pe) || len(pe.Failed) != 2 || pe.Failed[0].Partition != 1 || pe.Failed[1].Partition != 3 ||
		!strings.Contains(err.Error(), "partitions 1, 3 of 4 not reached") || !errors.Is(err, orrery.ErrUnauthorized) {
		t.Fatalf("PauseQueue with partitions 1 and 3 refusing: %v", err)
	}
	b.tr.SetFaultHook(nil)
	if err := b.c.PauseQueue(ctx, testNamespace, testQueue, "second"); err != nil {
		t.Fatalf("PauseQueue again: %v", err)
	}
	shares, err := b.c.QueueStats(ctx, testNamespace, testQueue, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range shares {
		want := "first"
		if s.Partition == 1 || s.Partition == 3 {
			want = "second"
		}
		if got := s.Stats.GetPause().GetReason(); got != want {
			t.Fatalf("partition %d's pause says %q, want %q", s.Partition, got, want)
		}
	}
	var oe *orrery.Error
	if err := b.c.PauseQueue(ctx, testNamespace, "bad queue", ""); !errors.As(err, &oe) || oe.Code != orrery.CodeValidation || !strings.HasSuffix(oe.Field, "queue") {
		t.Fatalf("a bad queue name: %v, want Validation on queue", err)
	}
}

// TestCancelMessageCancelsItsWorkersContext: cancelling a message whose handler runs revokes
// its lease; the worker's next extension fails and cancels the handler's context with the
// extension's TokenInvalidated error as its cause, and the message is not acked or delivered
// again. Cancelling a visible message removes it; a second cancel is ALREADY_DONE; an unknown
// id is NotFound.
func TestCancelMessageCancelsItsWorkersContext(t *testing.T) {
	b := setup(t, 2)
	ctx := ctxFor(t)
	l := lane(testQueue, "k")
	if _, err := b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: "long", PayloadJson: `{}`}); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	cause := make(chan error, 1)
	var deliveries atomic.Int32
	w := b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: testQueue, Wait: 100 * time.Millisecond, LeaseDuration: 2 * time.Second,
		Handler: func(hctx context.Context, m *client.Message) error {
			if deliveries.Add(1) == 1 {
				close(started)
			}
			<-hctx.Done()
			cause <- context.Cause(hctx)
			return hctx.Err()
		}})
	stop := runWorker(t, w)
	defer func() { _ = stop() }()
	<-started
	res, err := b.c.CancelMessage(ctx, l, "long", "customer asked")
	if err != nil || res.GetOutcome() != orreryv1.CancelOutcome_CANCEL_OUTCOME_LEASE_REVOKED {
		t.Fatalf("cancel of the running message: %v %v", res, err)
	}
	select {
	case got := <-cause:
		if !errors.Is(got, orrery.ErrTokenInvalidated) || !strings.Contains(got.Error(), "cancelled by "+testPrincipal) {
			t.Fatalf("the handler's context ended with cause %v, want the TokenInvalidated of the cancel", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's context was not cancelled")
	}
	if again, err := b.c.CancelMessage(ctx, l, "long", ""); err != nil || again.GetOutcome() != orreryv1.CancelOutcome_CANCEL_OUTCOME_ALREADY_DONE {
		t.Fatalf("a second cancel: %v %v", again, err)
	}
	_ = stop()
	if _, err := b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: "waiting", PayloadJson: `{}`, DelayMicros: time.Hour.Microseconds()}); err != nil {
		t.Fatal(err)
	}
	if res, err := b.c.CancelMessage(ctx, l, "waiting", ""); err != nil || res.GetOutcome() != orreryv1.CancelOutcome_CANCEL_OUTCOME_REMOVED {
		t.Fatalf("cancel of a delayed message: %v %v", res, err)
	}
	if msgs, _, err := b.c.InspectLane(ctx, l, "", 10); err != nil || len(msgs) != 1 || msgs[0].GetId() != "long" || msgs[0].GetCancelled() == nil {
		t.Fatalf("the lane holds %v (%v), want only the cancelled, still leased message", msgs, err)
	}
	var oe *orrery.Error
	if _, err := b.c.CancelMessage(ctx, l, "nope", ""); !errors.As(err, &oe) || oe.Code != orrery.CodeNotFound || !strings.HasSuffix(oe.Field, "id") {
		t.Fatalf("cancel of an unknown id: %v, want NotFound on id", err)
	}
	if n := deliveries.Load(); n != 1 {
		t.Fatalf("the cancelled message was delivered %d times", n)
	}
}
