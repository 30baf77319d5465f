package clienttest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/client/clienttest"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/route"
)

func TestTwinConformance(t *testing.T) {
	t.Parallel()
	clienttest.Conformance(t, func(t *testing.T) client.Transport {
		tr := clienttest.New(8)
		t.Cleanup(func() { _ = tr.Close() })
		return tr
	})
}

// TestTwinCountsQueues: the twin answers the queue inspections the client sends (QueueStats of
// a lane and of every partition, ListQueueStats), which a twin of its own making once refused
// ("validation: target: is required").
func TestTwinCountsQueues(t *testing.T) {
	t.Parallel()
	tr := clienttest.New(4)
	t.Cleanup(func() { _ = tr.Close() })
	c := client.New(tr, client.Options{})
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		if _, err := c.Enqueue(ctx, &orreryv1.Enqueue{Lane: testLane, Id: id, PayloadJson: `{}`}); err != nil {
			t.Fatal(err)
		}
	}
	p := route.Partition(testLane, 4)
	lane, err := c.QueueStats(ctx, "ns", "jobs", "k")
	if err != nil || len(lane) != 1 || lane[0].Partition != p || lane[0].Stats.GetVisible() != 2 || lane[0].Stats.GetLaneMessages() != 2 {
		t.Fatalf("lane stats: %v %v, want 2 visible on partition %d", lane, err, p)
	}
	every, err := c.QueueStats(ctx, "ns", "jobs", "")
	if err != nil || len(every) != 4 || every[p].Stats.GetVisible() != 2 {
		t.Fatalf("queue stats: %v %v, want 4 partitions' and 2 visible on %d", every, err, p)
	}
	queues, more, err := c.ListQueueStats(ctx, p, 0)
	if err != nil || more || len(queues) != 1 || queues[0].GetQueue() != "jobs" || queues[0].GetVisible() != 2 {
		t.Fatalf("list queues: %v (more %v) %v, want ns/jobs with 2 visible", queues, more, err)
	}
}

var testLane = &orreryv1.Lane{Namespace: "ns", Queue: "jobs", Key: "k"}

func enqueueRequest(commandID, id string) *orreryv1.CommandRequest {
	return &orreryv1.CommandRequest{Principal: client.DefaultPrincipal, Batch: &orreryv1.Batch{CommandId: commandID, Mutations: []*orreryv1.Mutation{
		{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: testLane, Id: id}}},
	}}}
}

func receiveRequest(commandID string, wait time.Duration, leaseMicros int64) *orreryv1.CommandRequest {
	return &orreryv1.CommandRequest{Principal: client.DefaultPrincipal, WaitMicros: wait.Microseconds(), Batch: &orreryv1.Batch{CommandId: commandID, Mutations: []*orreryv1.Mutation{
		{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: "ns", Queue: "jobs", LeaseDurationMicros: leaseMicros}}},
	}}}
}

// do sends req to partition p and decodes the receipt, failing the test on any error.
func do(t *testing.T, tr *clienttest.Transport, p int, req *orreryv1.CommandRequest) *orreryv1.Receipt {
	t.Helper()
	reply, err := tr.Command(context.Background(), p, req)
	if err != nil || reply.GetError() != nil {
		t.Fatalf("command: %v %v", err, reply.GetError())
	}
	r := &orreryv1.Receipt{}
	if err := proto.Unmarshal(reply.GetReceipt(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLoggedTimeStrictlyIncreasesUnderAFrozenClock(t *testing.T) {
	t.Parallel()
	frozen := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := clienttest.New(2, clienttest.WithClock(func() time.Time { return frozen }))
	t.Cleanup(func() { _ = tr.Close() })
	p := route.Partition(testLane, 2)
	var last int64
	for i, id := range []string{"a", "b", "c"} {
		r := do(t, tr, p, enqueueRequest(id, id))
		if want := frozen.UnixMicro() + int64(i); r.GetLoggedTimeUnixMicros() != want || r.GetLoggedTimeUnixMicros() <= last {
			t.Fatalf("batch %d logged at %d, want %d", i, r.GetLoggedTimeUnixMicros(), want)
		}
		last = r.GetLoggedTimeUnixMicros()
	}
}

// TestTwinRejectsMisroutedCommands: as a partition does, the twin applies a batch sent to the
// wrong partition without writing its misrouted mutation, which fails Validation on its lane
// in the receipt; it answers an inspection of a lane from the partition asked, which holds
// nothing of it; and a partition beyond the count is the call's Validation error.
func TestTwinRejectsMisroutedCommands(t *testing.T) {
	t.Parallel()
	tr := clienttest.New(4)
	t.Cleanup(func() { _ = tr.Close() })
	wrong := (route.Partition(testLane, 4) + 1) % 4
	r := do(t, tr, wrong, enqueueRequest("c", "m"))
	if e := orrery.AsError(orrery.FromProto(r.GetResults()[0].GetError())); len(r.GetResults()) != 1 || !errors.Is(e, orrery.ErrValidation) || e.Field != "mutations[0].enqueue.lane" {
		t.Fatalf("misrouted command: %v, want Validation of mutations[0].enqueue.lane", r)
	}
	inspect, err := tr.Inspect(context.Background(), wrong, &orreryv1.InspectRequest{Principal: client.DefaultPrincipal, Target: &orreryv1.InspectRequest_Lane{Lane: &orreryv1.InspectLane{Lane: testLane, MaxMessages: 1}}})
	if err != nil || inspect.GetError() != nil || inspect.GetFound() || len(inspect.GetMessages()) != 0 {
		t.Fatalf("misrouted inspect: %v %v, want nothing found", inspect, err)
	}
	if _, err := tr.Command(context.Background(), 4, enqueueRequest("c", "m")); !errors.Is(err, orrery.ErrValidation) {
		t.Fatalf("partition 4 of 4: %v, want Validation", err)
	}
}

func TestWaitingReceiveWakesWhenALeaseEnds(t *testing.T) {
	t.Parallel()
	tr := clienttest.New(1)
	t.Cleanup(func() { _ = tr.Close() })
	do(t, tr, 0, enqueueRequest("e", "m"))
	first := do(t, tr, 0, receiveRequest("r1", 0, 1_000_000))
	if n := len(first.GetResults()[0].GetReceive().GetMessages()); n != 1 {
		t.Fatalf("first receive got %d messages", n)
	}
	start := time.Now()
	msgs := do(t, tr, 0, receiveRequest("r2", 5*time.Second, 0)).GetResults()[0].GetReceive().GetMessages()
	if elapsed := time.Since(start); len(msgs) != 1 || msgs[0].GetDeliveryCount() != 2 || elapsed < 800*time.Millisecond || elapsed > 3*time.Second {
		t.Fatalf("waiting receive leased %v after %s, want the redelivery when the 1s lease ends", msgs, elapsed)
	}
}

func TestWaitingReceiveAnswersReplaysAndValidationAtOnce(t *testing.T) {
	t.Parallel()
	tr := clienttest.New(1)
	t.Cleanup(func() { _ = tr.Close() })
	do(t, tr, 0, receiveRequest("idle", 0, 0))
	start := time.Now()
	do(t, tr, 0, receiveRequest("idle", 5*time.Second, 0))
	bad, err := tr.Command(context.Background(), 0, receiveRequest("bad", 5*time.Second, 1)) // lease below 1 s
	if time.Since(start) > time.Second {
		t.Fatalf("replay and invalid receive waited %s", time.Since(start))
	}
	if e := orrery.AsError(orrery.FromProto(bad.GetError())); err != nil || !errors.Is(e, orrery.ErrValidation) || e.Field != "mutations[0].receive.lease_duration_micros" {
		t.Fatalf("invalid receive: %v %v, want Validation of mutations[0].receive.lease_duration_micros", bad, err)
	}
}

func TestFaultsAndClose(t *testing.T) {
	t.Parallel()
	tr := clienttest.New(1)
	t.Cleanup(func() { _ = tr.Close() })
	ctx := context.Background()
	tr.FailNext(1)
	tr.LoseNextReplies(1)
	if _, err := tr.Command(ctx, 0, enqueueRequest("c", "m")); !errors.Is(err, orrery.ErrUnavailable) {
		t.Fatalf("first call: %v, want Unavailable", err)
	}
	if _, err := tr.Command(ctx, 0, enqueueRequest("c", "m")); !errors.Is(err, orrery.ErrUnavailable) {
		t.Fatalf("second call: %v, want Unavailable (lost reply)", err)
	}
	r := do(t, tr, 0, enqueueRequest("c", "m"))
	if !r.GetResults()[0].GetEnqueue().GetCreated() {
		t.Fatal("the lost reply's enqueue was not applied")
	}
	calls := tr.Calls()
	if len(calls) != 3 || calls[0].Fault != clienttest.FaultFailBeforeApply || len(calls[0].Receipt) != 0 || calls[1].Fault != clienttest.FaultLoseReply || len(calls[1].Receipt) == 0 {
		t.Fatalf("calls %+v", calls)
	}

	do(t, tr, 0, receiveRequest("lease-m", 0, 0)) // nothing visible is left
	done := make(chan error, 1)
	go func() {
		_, err := tr.Command(ctx, 0, receiveRequest("w", 10*time.Second, 0))
		done <- err
	}()
	waitForWaiting(t, tr)
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, orrery.ErrUnavailable) {
			t.Fatalf("waiting receive on close: %v, want Unavailable", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("close did not end the waiting receive")
	}
}

func TestInspectFaultsAreRetriedByTheClient(t *testing.T) {
	t.Parallel()
	tr := clienttest.New(2)
	t.Cleanup(func() { _ = tr.Close() })
	c := client.New(tr, client.Options{Retry: client.RetryPolicy{Initial: time.Millisecond}})
	tr.FailNext(2)
	if _, _, err := c.InspectLane(context.Background(), testLane, "", 0); err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if n := len(tr.Calls()); n != 3 {
		t.Fatalf("%d calls, want 3", n)
	}
}

func waitForWaiting(t *testing.T, tr *clienttest.Transport) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, c := range tr.Calls() {
			if !c.Done && c.IsReceive() {
				time.Sleep(20 * time.Millisecond)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no waiting receive")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWithLimitsAreThePartitionsLimits: each partition adopts the configured limits, as a
// partition led by a silo configured with them does (a SetLimits entry, its first), reports
// them to clients, and applies under them.
func TestWithLimitsAreThePartitionsLimits(t *testing.T) {
	t.Parallel()
	lim := input.DefaultLimits()
	lim.MaxMutationsPerBatch = 2
	tr := clienttest.New(1, clienttest.WithLimits(lim))
	t.Cleanup(func() { _ = tr.Close() })
	status, err := client.New(tr, client.Options{}).PartitionStatus(context.Background(), 0)
	if err != nil || status.GetAppliedIndex() != 1 || status.GetCommandLimits().GetMaxMutationsPerBatch() != 2 {
		t.Fatalf("status %v %v, want the SetLimits entry applied and 2 mutations a batch", status, err)
	}
	req := enqueueRequest("three", "a")
	for _, id := range []string{"b", "c"} {
		req.Batch.Mutations = append(req.Batch.Mutations, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: testLane, Id: id}}})
	}
	if r := do(t, tr, 0, req); !errors.Is(orrery.FromProto(r.GetError()), orrery.ErrValidation) {
		t.Fatalf("a batch of 3: %v, want it refused under the partition's limit of 2", r)
	}
}
