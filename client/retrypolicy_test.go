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
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/internal/testkit"
)

// peekOne returns the message id of l as a peek shows it (nil when the lane has no such live
// message).
func (b *bundle) peekOne(ctx context.Context, l *orreryv1.Lane, id string) *orreryv1.QueueMessage {
	b.t.Helper()
	msgs, _, err := b.c.InspectLane(ctx, l, "", 100)
	if err != nil {
		b.t.Fatal(err)
	}
	for _, m := range msgs {
		if m.GetId() == id {
			return m
		}
	}
	return nil
}

// TestAFailingHandlersMessageComesBackAfterItsBackoff: under its queue's retry policy (set on
// every partition), a Worker's failing handler has its message released with the error: a peek
// shows the attempt count, the last error and when it failed, and the message visible again
// only after the policy's backoff; once the clock passes it the worker gets it again, and the
// failure of the last attempt moves it to the dead-letter queue at once, with its last error.
func TestAFailingHandlersMessageComesBackAfterItsBackoff(t *testing.T) {
	b := setup(t, 2, clienttest.WithMaxWait(100*time.Millisecond))
	ctx := ctxFor(t)
	policy := &client.MessageRetry{MaxAttempts: 2, InitialBackoff: time.Hour, MaxBackoff: time.Hour}
	if err := b.c.SetQueueRetryPolicy(ctx, testNamespace, testQueue, policy); err != nil {
		t.Fatal(err)
	}
	l := lane(testQueue, "k")
	if _, err := b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: "m1", PayloadJson: `{}`}); err != nil {
		t.Fatal(err)
	}
	var attempts atomic.Int32
	w := b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: testQueue, Wait: 100 * time.Millisecond,
		Handler: func(_ context.Context, m *client.Message) error {
			n := attempts.Add(1)
			if n > 1 && (m.LastError() != "boom 1" || m.LastFailedAt().IsZero()) {
				return fmt.Errorf("attempt %d came without the last failure: %q at %v", n, m.LastError(), m.LastFailedAt())
			}
			return fmt.Errorf("boom %d", n)
		}})
	stop := runWorker(t, w)
	defer func() { _ = stop() }()
	var peeked *orreryv1.QueueMessage
	testkit.Eventually(t, 10*time.Second, "the first failure shown by a peek", func() bool {
		peeked = b.peekOne(ctx, l, "m1")
		return peeked.GetLastError() != "" && peeked.GetLease() == nil
	})
	if peeked.GetDeliveryCount() != 1 || peeked.GetLastError() != "boom 1" ||
		peeked.GetVisibleAtUnixMicros() != peeked.GetLastFailedAtUnixMicros()+time.Hour.Microseconds() {
		t.Fatalf("after the first failure a peek shows %v, want 1 attempt, its error and visible an hour after it failed", peeked)
	}
	b.clock.Advance(time.Hour)
	dead := lane(testQueue+"$dlq", "k")
	testkit.Eventually(t, 10*time.Second, "the last attempt's failure dead-lettering the message", func() bool {
		peeked = b.peekOne(ctx, dead, "m1")
		return peeked != nil
	})
	if peeked.GetLastError() != "boom 2" || peeked.GetDeadLetteredFrom() != testQueue || attempts.Load() != 2 {
		t.Fatalf("dead letter %v after %d attempts, want the second attempt's error", peeked, attempts.Load())
	}
	if b.peekOne(ctx, l, "m1") != nil {
		t.Fatal("the message is still in its queue")
	}
}

// TestAHandlerPolicyAndRetryAfter: a worker's own policy wins over the message's, and a
// RetryAfter error sets the delay itself; the handler's error text is kept either way.
func TestAHandlerPolicyAndRetryAfter(t *testing.T) {
	b := setup(t, 1, clienttest.WithMaxWait(100*time.Millisecond))
	ctx := ctxFor(t)
	l := lane(testQueue, "k")
	for _, id := range []string{"policy", "after"} {
		_, _, err := b.c.Queue(testNamespace, testQueue).EnqueueJSON(ctx, `{}`, client.EnqueueOptions{ID: id, Key: "k",
			Retry: &client.MessageRetry{MaxAttempts: 5, InitialBackoff: time.Minute, MaxBackoff: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
	}
	w := b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: testQueue, Wait: 100 * time.Millisecond,
		Retry: &client.MessageRetry{MaxAttempts: 5, InitialBackoff: 2 * time.Hour, MaxBackoff: 2 * time.Hour},
		Handler: func(_ context.Context, m *client.Message) error {
			if m.Retry().InitialBackoff != time.Minute {
				return fmt.Errorf("delivered without its own policy: %+v", m.Retry())
			}
			if m.ID() == "after" {
				return client.RetryAfter(3*time.Hour, errors.New("rate limited"))
			}
			return errors.New("failed")
		}})
	stop := runWorker(t, w)
	defer func() { _ = stop() }()
	for id, want := range map[string]struct {
		err   string
		delay time.Duration
	}{"policy": {"failed", 2 * time.Hour}, "after": {"rate limited", 3 * time.Hour}} {
		var peeked *orreryv1.QueueMessage
		testkit.Eventually(t, 10*time.Second, id+"'s failure shown by a peek", func() bool {
			peeked = b.peekOne(ctx, l, id)
			return peeked.GetLastError() != "" && peeked.GetLease() == nil
		})
		if peeked.GetLastError() != want.err || peeked.GetVisibleAtUnixMicros()-peeked.GetLastFailedAtUnixMicros() != want.delay.Microseconds() {
			t.Fatalf("%s: %v, want %q and visible %s after the failure", id, peeked, want.err, want.delay)
		}
	}
}

// TestAWorkerReleasesAsBeforeBelowApplyVersion19: against partitions that do not take retry
// policies yet, a failed handler's message is still released (with the worker's ReleaseDelay)
// instead of waiting for its lease to end, and SetQueueRetryPolicy is refused naming the part.
func TestAWorkerReleasesAsBeforeBelowApplyVersion19(t *testing.T) {
	b := setup(t, 1, clienttest.WithApplyVersion(batch.ApplyVersionRetryPolicies-1), clienttest.WithMaxWait(100*time.Millisecond))
	ctx := ctxFor(t)
	err := b.c.SetQueueRetryPolicy(ctx, testNamespace, testQueue, &client.MessageRetry{MaxAttempts: 2})
	if orrery.CodeOf(err) != orrery.CodeValidation || !strings.Contains(err.Error(), "field 30 of orrery.v1.Mutation") {
		t.Fatalf("SetQueueRetryPolicy at apply version 18: %v, want Validation", err)
	}
	l := lane(testQueue, "k")
	if _, err := b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: "m1", PayloadJson: `{}`}); err != nil {
		t.Fatal(err)
	}
	w := b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: testQueue, Wait: 100 * time.Millisecond,
		LeaseDuration: 10 * time.Minute, ReleaseDelay: 5 * time.Hour,
		Handler: func(context.Context, *client.Message) error { return errors.New("boom") }})
	stop := runWorker(t, w)
	defer func() { _ = stop() }()
	testkit.Eventually(t, 10*time.Second, "the failed message released", func() bool {
		peeked := b.peekOne(ctx, l, "m1")
		return peeked.GetDeliveryCount() == 1 && peeked.GetLease() == nil
	})
	if peeked := b.peekOne(ctx, l, "m1"); peeked.GetLastError() != "" || peeked.GetVisibleAtUnixMicros()-peeked.GetEnqueuedAtUnixMicros() < (5*time.Hour).Microseconds() {
		t.Fatalf("released as %v, want ReleaseDelay and no last error", peeked)
	}
}

// TestMessageRetryOnTheWire: a policy's Go form and its wire form convert both ways, and values
// the partition refuses stay refusable (negative counts, an unknown outcome).
func TestMessageRetryOnTheWire(t *testing.T) {
	p := &client.MessageRetry{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: time.Minute, JitterPercent: 10, OnExhausted: client.RetryDrop}
	w := p.Proto()
	if w.GetMaxAttempts() != 3 || w.GetInitialBackoffMicros() != 1_000_000 || w.GetMaxBackoffMicros() != 60_000_000 || w.GetJitterPercent() != 10 ||
		w.GetOnExhausted() != orreryv1.RetryExhausted_RETRY_EXHAUSTED_DROP {
		t.Fatalf("wire %v", w)
	}
	if back := client.MessageRetryOf(w); *back != *p {
		t.Fatalf("round trip %+v, want %+v", back, p)
	}
	if (*client.MessageRetry)(nil).Proto() != nil || client.MessageRetryOf(nil) != nil {
		t.Fatal("nil is not nil on the wire")
	}
	if got := (&client.MessageRetry{}).Proto().GetOnExhausted(); got != orreryv1.RetryExhausted_RETRY_EXHAUSTED_DEAD_LETTER {
		t.Fatalf("the default outcome on the wire: %v", got)
	}
	bad := (&client.MessageRetry{MaxAttempts: -1, JitterPercent: -1, OnExhausted: 7}).Proto()
	if bad.GetMaxAttempts() < 1000 || bad.GetJitterPercent() <= 100 || orreryv1.RetryExhausted_name[int32(bad.GetOnExhausted())] != "" {
		t.Fatalf("invalid values became valid ones: %v", bad)
	}
}

// TestSetQueueRetryPolicyNamesThePartitionsNotReached: a SetQueueRetryPolicy that some
// partitions refuse fails with a PartitionsError naming them; the others hold the policy, and
// calling again sets it everywhere (QueueStats shows it on each); nil removes it.
func TestSetQueueRetryPolicyNamesThePartitionsNotReached(t *testing.T) {
	b := setup(t, 3)
	ctx := ctxFor(t)
	b.tr.SetFaultHook(func(p int, req *orreryv1.CommandRequest) (clienttest.Fault, error) {
		if p == 2 && req.GetBatch().GetMutations()[0].GetSetQueueRetryPolicy() != nil {
			return clienttest.FaultFailBeforeApply, orrery.Errorf(orrery.CodeUnauthorized, "refused in this test")
		}
		return clienttest.FaultNone, nil
	})
	policy := &client.MessageRetry{MaxAttempts: 4, InitialBackoff: time.Second, MaxBackoff: time.Minute, JitterPercent: 25}
	err := b.c.SetQueueRetryPolicy(ctx, testNamespace, testQueue, policy)
	var pe *client.PartitionsError
	if !errors.As(err, &pe) || len(pe.Failed) != 1 || pe.Failed[0].Partition != 2 || !strings.Contains(err.Error(), "partitions 2 of 3 not reached") {
		t.Fatalf("SetQueueRetryPolicy with partition 2 refusing: %v", err)
	}
	b.tr.SetFaultHook(nil)
	if err := b.c.SetQueueRetryPolicy(ctx, testNamespace, testQueue, policy); err != nil {
		t.Fatalf("SetQueueRetryPolicy again: %v", err)
	}
	policies := func() (n int) {
		shares, err := b.c.QueueStats(ctx, testNamespace, testQueue, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range shares {
			if got := client.MessageRetryOf(s.Stats.GetRetry().GetPolicy()); got != nil {
				if *got != *policy || s.Stats.GetRetry().GetSetBy() != testPrincipal {
					t.Fatalf("partition %d holds %+v set by %q", s.Partition, got, s.Stats.GetRetry().GetSetBy())
				}
				n++
			}
		}
		return n
	}
	if n := policies(); n != 3 {
		t.Fatalf("%d partitions hold the policy, want 3", n)
	}
	if err := b.c.SetQueueRetryPolicy(ctx, testNamespace, testQueue, nil); err != nil || policies() != 0 {
		t.Fatalf("removing the policy: %v, %d partitions still hold it", err, policies())
	}
	var oe *orrery.Error
	if err := b.c.SetQueueRetryPolicy(ctx, testNamespace, testQueue, &client.MessageRetry{InitialBackoff: time.Hour, MaxBackoff: time.Second}); !errors.As(err, &oe) ||
		oe.Code != orrery.CodeValidation || !strings.HasSuffix(oe.Field, "policy.initial_backoff_micros") {
		t.Fatalf("an initial backoff above the maximum: %v, want Validation naming it", err)
	}
}

// TestAScheduleCarriesItsRetryPolicy: a schedule's options carry a retry policy to its template
// (Describe shows it; the batch tests follow an occurrence that carries one).
func TestAScheduleCarriesItsRetryPolicy(t *testing.T) {
	b := setup(t, 2)
	ctx := ctxFor(t)
	opts := reportOptions("")
	opts.Retry = &client.MessageRetry{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: time.Minute, OnExhausted: client.RetryDrop}
	h, err := b.c.Schedules(testNamespace).Create(ctx, "retrying-report", opts)
	if err != nil {
		t.Fatal(err)
	}
	d, err := h.Describe(ctx)
	if err != nil || d.Options.Retry == nil || *d.Options.Retry != *opts.Retry {
		t.Fatalf("described %+v (%v), want its retry policy %+v", d.Options.Retry, err, opts.Retry)
	}
}

// TestAWorkersInvalidRetryPolicyFailsRun: a worker whose handlers' policy no partition would
// take does not run (Validation naming the field), rather than release every failure plainly.
func TestAWorkersInvalidRetryPolicyFailsRun(t *testing.T) {
	b := setup(t, 1)
	w := b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: testQueue,
		Retry:   &client.MessageRetry{InitialBackoff: time.Hour, MaxBackoff: time.Minute},
		Handler: func(context.Context, *client.Message) error { return nil }})
	var oe *orrery.Error
	if err := w.Run(ctxFor(t)); !errors.As(err, &oe) || oe.Code != orrery.CodeValidation || oe.Field != "retry.initial_backoff" {
		t.Fatalf("Run with an initial backoff above the maximum: %v, want Validation on retry.initial_backoff", err)
	}
}
