package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/client/clienttest"
	"github.com/orreryhq/orrery/grains/input"
)

func TestReceiptErrorsMatchSentinelsAndAreNotRetried(t *testing.T) {
	t.Parallel()
	lim := input.DefaultLimits()
	lim.MaxLaneMessages = 1
	b := setup(t, 4, clienttest.WithLimits(lim))
	ctx := ctxFor(t)
	l := lane(testQueue, "k")
	id := client.NewID()
	if _, err := b.c.ConfigureSchedule(ctx, everySchedule(l, id, time.Hour, time.Now().Add(time.Hour)), 0); err != nil {
		t.Fatalf("configure: %v", err)
	}
	b.enqueue(l, "first")
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"validation", func() error {
			_, err := b.c.ConfigureSchedule(ctx, everySchedule(l, client.NewID(), time.Millisecond, time.Now()), 0)
			return err
		}, orrery.ErrValidation},
		{"revision conflict", func() error {
			_, err := b.c.ConfigureSchedule(ctx, everySchedule(l, id, time.Hour, time.Now()), 7)
			return err
		}, orrery.ErrRevisionConflict},
		{"not found", func() error {
			_, err := b.c.CancelSchedule(ctx, &orreryv1.CancelSchedule{Lane: l, ScheduleId: client.NewID(), ExpectedRevision: 1})
			return err
		}, orrery.ErrNotFound},
		{"quota exceeded", func() error {
			_, err := b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: "second"})
			return err
		}, orrery.ErrQuotaExceeded},
		{"idempotency conflict", func() error {
			_, err := b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: "other"}, client.WithCommandID(b.commandCalls()[0].CommandID()))
			return err
		}, orrery.ErrIdempotencyConflict},
	}
	for _, tc := range cases {
		before := len(b.commandCalls())
		err := tc.call()
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: got %v, want %v", tc.name, err, tc.want)
		}
		var oe *orrery.Error
		if !errors.As(err, &oe) || oe.Message == "" {
			t.Fatalf("%s: %v is not an *orrery.Error with a message", tc.name, err)
		}
		if n := len(b.commandCalls()) - before; n != 1 {
			t.Fatalf("%s: %d calls, want 1 (business errors are not retried)", tc.name, n)
		}
	}
}

func TestLostReplyIsRetriedWithTheSameCommandID(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	ctx := ctxFor(t)
	l := lane(testQueue, "k")
	b.tr.LoseNextReplies(2)
	b.tr.FailNext(1)
	res, err := b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: "once", PayloadJson: `{}`})
	if err != nil || !res.GetCreated() {
		t.Fatalf("enqueue: %v %v, want created (the first apply's receipt)", res, err)
	}
	calls := b.commandCalls()
	if len(calls) != 4 {
		t.Fatalf("%d calls, want 4 (fail, lose, lose, deliver)", len(calls))
	}
	for _, c := range calls[1:] {
		if c.CommandID() != calls[0].CommandID() {
			t.Fatalf("retry used command id %s, first attempt %s", c.CommandID(), calls[0].CommandID())
		}
		if !bytes.Equal(c.Receipt, calls[1].Receipt) {
			t.Fatal("a retry's receipt bytes differ from the lost reply's")
		}
	}
	if calls[1].Fault != clienttest.FaultLoseReply || len(calls[1].Receipt) == 0 {
		t.Fatalf("second call %v, want an applied call with a lost reply", calls[1])
	}
	if msgs := b.laneMessages(l); len(msgs) != 1 {
		t.Fatalf("lane holds %d messages, want 1", len(msgs))
	}

	// Batch returns the receipt bytes of the original application.
	b.tr.LoseNextReplies(1)
	p := b.partitionOf(l)
	_, raw, err := b.c.Batch(ctx, p, []*orreryv1.Mutation{enqueueMutation(l, "twice")})
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	calls = b.commandCalls()
	lost := calls[len(calls)-2]
	if lost.Fault != clienttest.FaultLoseReply || !bytes.Equal(raw, lost.Receipt) {
		t.Fatal("batch receipt bytes differ from those of the lost reply")
	}
}

func TestCallerCommandIDReplaysByteIdenticalReceipt(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	ctx := ctxFor(t)
	l := lane(testQueue, "k")
	p := b.partitionOf(l)
	mutations := []*orreryv1.Mutation{enqueueMutation(l, "a"), enqueueMutation(l, "b")}
	first, raw1, err := b.c.Batch(ctx, p, mutations, client.WithCommandID("my-command"))
	if err != nil || first.GetCommandId() != "my-command" {
		t.Fatalf("batch: %v %v", first, err)
	}
	time.Sleep(2 * time.Millisecond) // a later logged time would show in a re-applied receipt
	_, raw2, err := b.c.Batch(ctx, p, mutations, client.WithCommandID("my-command"))
	if err != nil || !bytes.Equal(raw1, raw2) {
		t.Fatalf("replay: %v, bytes equal %v", err, bytes.Equal(raw1, raw2))
	}
	res, err := b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: "c", PayloadJson: `{}`}, client.WithCommandID("single"))
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	again, err := b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: "c", PayloadJson: `{}`}, client.WithCommandID("single"))
	if err != nil || !again.GetCreated() || again.GetId() != res.GetId() {
		t.Fatalf("replayed enqueue: %v %v, want the original result (created)", again, err)
	}
	if n := len(b.laneMessages(l)); n != 3 {
		t.Fatalf("lane holds %d messages, want 3", n)
	}
}

func TestTransportErrorsAreClassified(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	ctx := ctxFor(t)
	l := lane(testQueue, "k")
	faults := []error{errors.New("connection reset"), context.DeadlineExceeded, orrery.Errorf(orrery.CodeDeadlineExceeded, "attempt timed out")}
	b.tr.SetFaultHook(func(int, *orreryv1.CommandRequest) (clienttest.Fault, error) {
		if len(faults) == 0 {
			return clienttest.FaultNone, nil
		}
		err := faults[0]
		faults = faults[1:]
		return clienttest.FaultFailBeforeApply, err
	})
	if _, err := b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: "x"}); err != nil {
		t.Fatalf("enqueue after retriable transport failures: %v", err)
	}
	if n := len(b.commandCalls()); n != 4 {
		t.Fatalf("%d calls, want 4", n)
	}
	b.tr.SetFaultHook(func(int, *orreryv1.CommandRequest) (clienttest.Fault, error) {
		return clienttest.FaultFailBeforeApply, orrery.Errorf(orrery.CodeInternal, "broken")
	})
	before := len(b.commandCalls())
	if _, err := b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: "y"}); !errors.Is(err, orrery.ErrInternal) {
		t.Fatalf("enqueue after an Internal transport error: %v, want Internal", err)
	}
	if n := len(b.commandCalls()) - before; n != 1 {
		t.Fatalf("Internal was tried %d times, want 1", n)
	}
}

func TestContextEndStopsRetries(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	l := lane(testQueue, "k")
	b.tr.FailNext(1 << 30)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: "x"})
	if !errors.Is(err, orrery.ErrDeadlineExceeded) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("enqueue: %v, want DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Fatalf("retries went on for %s after a 150ms deadline", elapsed)
	}
	if n := len(b.commandCalls()); n < 3 {
		t.Fatalf("%d calls before the deadline, want several retries", n)
	}

	cancelled, cancelNow := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancelNow)
	_, err = b.c.Enqueue(cancelled, &orreryv1.Enqueue{Lane: l, Id: "x"})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, orrery.ErrUnavailable) {
		t.Fatalf("cancelled enqueue: %v, want Unavailable wrapping context.Canceled", err)
	}
	before := len(b.commandCalls())
	if _, err := b.c.Enqueue(cancelled, &orreryv1.Enqueue{Lane: l, Id: "x"}); err == nil || len(b.commandCalls()) != before {
		t.Fatalf("call with an ended context: %v, %d calls sent", err, len(b.commandCalls())-before)
	}
}

func TestMaxAttemptsGivesUp(t *testing.T) {
	t.Parallel()
	tr := clienttest.New(2)
	t.Cleanup(func() { _ = tr.Close() })
	c := client.New(tr, client.Options{Retry: client.RetryPolicy{Initial: time.Millisecond, MaxAttempts: 3}})
	tr.FailNext(10)
	_, err := c.Enqueue(ctxFor(t), &orreryv1.Enqueue{Lane: lane(testQueue, "k"), Id: "x"})
	if !errors.Is(err, orrery.ErrUnavailable) {
		t.Fatalf("enqueue: %v, want Unavailable", err)
	}
	if n := tr.CommandCalls(); n != 3 {
		t.Fatalf("%d calls, want 3", n)
	}
	if c.Principal() != client.DefaultPrincipal || tr.Calls()[0].Request.GetPrincipal() != client.DefaultPrincipal {
		t.Fatalf("principal %q, want the default", c.Principal())
	}
}

func TestRetryPolicyDelay(t *testing.T) {
	t.Parallel()
	var p client.RetryPolicy // defaults: 50ms doubling to 2s
	for _, tc := range []struct {
		retry  int
		jitter float64
		want   time.Duration
	}{
		{0, 0, 25 * time.Millisecond},
		{0, 0.999999, 50 * time.Millisecond},
		{1, 0, 50 * time.Millisecond},
		{3, 0.5, 300 * time.Millisecond},
		{10, 0, time.Second},
		{60, 1, 2 * time.Second},
		{2, -3, 100 * time.Millisecond},
	} {
		got := p.Delay(tc.retry, tc.jitter)
		if diff := got - tc.want; diff < -time.Millisecond || diff > time.Millisecond {
			t.Errorf("Delay(%d, %v) = %s, want %s", tc.retry, tc.jitter, got, tc.want)
		}
	}
}

func TestLongPollReceive(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	ctx := ctxFor(t)
	l := lane(testQueue, "k")
	p := b.partitionOf(l)
	receive := &orreryv1.Receive{Namespace: testNamespace, Queue: testQueue, Max: 4}

	start := time.Now()
	msgs, err := b.c.Receive(ctx, p, receive, 150*time.Millisecond)
	if err != nil || len(msgs) != 0 || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("idle receive: %v %v after %s, want nothing after the wait", msgs, err, time.Since(start))
	}
	// An enqueue to another queue of the same partition does not answer the wait; one to the
	// receive's queue does.
	enqueueLater := func(after time.Duration, l *orreryv1.Lane, id string) {
		time.AfterFunc(after, func() {
			if _, err := b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: id}); err != nil {
				t.Errorf("enqueue %s: %v", id, err)
			}
		})
	}
	enqueueLater(50*time.Millisecond, lane("other", "k"), "o")
	enqueueLater(150*time.Millisecond, l, "m")
	start = time.Now()
	msgs, err = b.c.Receive(ctx, p, receive, 10*time.Second)
	elapsed := time.Since(start)
	if err != nil || len(msgs) != 1 || msgs[0].GetId() != "m" {
		t.Fatalf("waiting receive: %v %v", msgs, err)
	}
	if elapsed < 140*time.Millisecond || elapsed > 5*time.Second {
		t.Fatalf("waiting receive answered after %s, want just after the enqueue at 150ms", elapsed)
	}
	if _, err := b.c.Receive(ctx, p, receive, -time.Second); !errors.Is(err, orrery.ErrValidation) {
		t.Fatalf("negative wait: %v, want Validation", err)
	}
}

// TestALongPollLeasesWithItsOneRequest: a long poll that finds nothing sends one waiting
// request, answered without a receipt; one that finds a message sends one waiting request,
// which leases it.
func TestALongPollLeasesWithItsOneRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	ctx := ctxFor(t)
	receive := &orreryv1.Receive{Namespace: testNamespace, Queue: testQueue, Max: 4}
	if msgs, err := b.c.Receive(ctx, 0, receive, 50*time.Millisecond); err != nil || len(msgs) != 0 {
		t.Fatalf("idle receive: %v %v", msgs, err)
	}
	if calls := b.commandCalls(); len(calls) != 1 || calls[0].Request.GetWaitMicros() == 0 || len(calls[0].Receipt) != 0 {
		t.Fatalf("idle long poll made calls %+v, want one waiting request without a receipt", calls)
	}
	b.enqueue(lane(testQueue, "k"), "m")
	b.tr.ResetCalls()
	msgs, err := b.c.Receive(ctx, 0, receive, 5*time.Second)
	if err != nil || len(msgs) != 1 || msgs[0].GetDeliveryCount() != 1 {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	if calls := b.commandCalls(); len(calls) != 1 || calls[0].Request.GetWaitMicros() == 0 || len(calls[0].Receipt) == 0 {
		t.Fatalf("calls %+v, want one waiting request, answered with its receipt", calls)
	}
}

// TestALongPollWhoseCallerLeavesIsAbandoned: when the caller's ctx ends while its long poll is
// parked, Receive abandons it (the same command id, abandon set) and returns the ctx error; a
// message enqueued afterwards is leased by nobody, and the next receive gets its first
// delivery.
func TestALongPollWhoseCallerLeavesIsAbandoned(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	receive := &orreryv1.Receive{Namespace: testNamespace, Queue: testQueue, Max: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if msgs, err := b.c.Receive(ctx, 0, receive, 10*time.Second); !errors.Is(err, context.DeadlineExceeded) || len(msgs) != 0 {
		t.Fatalf("receive: %v %v, want the deadline", msgs, err)
	}
	calls := b.commandCalls()
	if len(calls) != 2 || calls[0].Request.GetWaitMicros() == 0 || !calls[1].Request.GetAbandon() || calls[1].CommandID() != calls[0].CommandID() {
		t.Fatalf("calls %+v, want the waiting request, then its abandon", calls)
	}
	l := lane(testQueue, "k")
	b.enqueue(l, "m")
	if left := b.laneMessages(l); len(left) != 1 || left[0].GetLease() != nil || left[0].GetDeliveryCount() != 0 {
		t.Fatalf("lane after the abandon and an enqueue: %v, want m never delivered", left)
	}
	msgs, err := b.c.Receive(ctxFor(t), 0, receive, 0)
	if err != nil || len(msgs) != 1 || msgs[0].GetDeliveryCount() != 1 {
		t.Fatalf("receive: %v %v, want m's first delivery", msgs, err)
	}
}

// TestReceiveWhoseContextEndsWhileItLeasesReleases: when the caller's ctx ends while a request
// that leases is in flight — an immediate receive, or a long poll that found a message — and
// its reply is lost with it, Receive gets the receipt anyway (the immediate receive by sending
// it again with the same command id, the long poll by its abandon, which the partition
// answers with the receipt), releases what it leased, and returns the ctx error. No message
// stays leased.
func TestReceiveWhoseContextEndsWhileItLeasesReleases(t *testing.T) {
	t.Parallel()
	for _, wait := range []time.Duration{0, 5 * time.Second} {
		t.Run(fmt.Sprint("wait ", wait), func(t *testing.T) {
			t.Parallel()
			b := setup(t, 1)
			l := lane(testQueue, "k")
			b.enqueue(l, "m")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var lost atomic.Bool
			b.tr.SetFaultHook(func(_ int, req *orreryv1.CommandRequest) (clienttest.Fault, error) {
				ms := req.GetBatch().GetMutations()
				if len(ms) == 1 && ms[0].GetReceive() != nil && !req.GetAbandon() && lost.CompareAndSwap(false, true) {
					cancel() // the caller goes away while the partition leases
					return clienttest.FaultLoseReply, nil
				}
				return clienttest.FaultNone, nil
			})
			msgs, err := b.c.Receive(ctx, 0, &orreryv1.Receive{Namespace: testNamespace, Queue: testQueue, Max: 1}, wait)
			if !errors.Is(err, context.Canceled) || len(msgs) != 0 {
				t.Fatalf("receive: %v %v, want the cancellation", msgs, err)
			}
			left := b.laneMessages(l)
			if len(left) != 1 || left[0].GetLease() != nil || left[0].GetDeliveryCount() != 1 {
				t.Fatalf("lane after the cancelled receive: %v, want m released (visible, delivered once)", left)
			}
		})
	}
}

// TestAsActsAsAnotherPrincipal: As returns a client whose commands carry the other principal,
// and leaves the original's alone.
func TestAsActsAsAnotherPrincipal(t *testing.T) {
	t.Parallel()
	tr := clienttest.New(2)
	t.Cleanup(func() { _ = tr.Close() })
	c := client.New(tr, client.Options{Principal: "first"})
	other := c.As("second")
	if c.Principal() != "first" || other.Principal() != "second" {
		t.Fatalf("principals %q and %q", c.Principal(), other.Principal())
	}
	_, _ = other.Enqueue(ctxFor(t), &orreryv1.Enqueue{Lane: lane(testQueue, "k"), Id: "x"})
	_, _ = c.Enqueue(ctxFor(t), &orreryv1.Enqueue{Lane: lane(testQueue, "k"), Id: "y"})
	calls := tr.Calls()
	if len(calls) != 2 || calls[0].Request.GetPrincipal() != "second" || calls[1].Request.GetPrincipal() != "first" {
		t.Fatalf("calls %+v, want one as second, then one as first", calls)
	}
}
