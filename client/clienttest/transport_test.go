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
	"github.com/orreryhq/orrery/grains/route"
)

func TestTwinConforms(t *testing.T) {
	t.Parallel()
	clienttest.Conformance(t, func(*testing.T) client.Transport { return clienttest.New(8) })
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

func TestTwinRejectsMisroutedCommands(t *testing.T) {
	t.Parallel()
	tr := clienttest.New(4)
	wrong := (route.Partition(testLane, 4) + 1) % 4
	reply, err := tr.Command(context.Background(), wrong, enqueueRequest("c", "m"))
	if err != nil || !errors.Is(orrery.FromProto(reply.GetError()), orrery.ErrValidation) {
		t.Fatalf("misrouted command: %v %v, want a Validation reply", reply, err)
	}
	inspect, err := tr.Inspect(context.Background(), wrong, &orreryv1.InspectRequest{Principal: client.DefaultPrincipal, Target: &orreryv1.InspectRequest_Lane{Lane: &orreryv1.InspectLane{Lane: testLane, MaxMessages: 1}}})
	if err != nil || !errors.Is(orrery.FromProto(inspect.GetError()), orrery.ErrValidation) {
		t.Fatalf("misrouted inspect: %v %v, want a Validation reply", inspect, err)
	}
	if _, err := tr.Command(context.Background(), 4, enqueueRequest("c", "m")); !errors.Is(err, orrery.ErrValidation) {
		t.Fatalf("partition 4 of 4: %v, want Validation", err)
	}
}

func TestWaitingReceiveWakesWhenALeaseEnds(t *testing.T) {
	t.Parallel()
	tr := clienttest.New(1)
	do(t, tr, 0, enqueueRequest("e", "m"))
	first := do(t, tr, 0, receiveRequest("r1", 0, 1_000_000))
	if n := len(first.GetResults()[0].GetReceive().GetMessages()); n != 1 {
		t.Fatalf("first receive got %d messages", n)
	}
	start := time.Now()
	reply, err := tr.Command(context.Background(), 0, receiveRequest("r2", 5*time.Second, 0))
	if elapsed := time.Since(start); err != nil || !reply.GetVisible() || elapsed < 800*time.Millisecond || elapsed > 3*time.Second {
		t.Fatalf("waiting receive answered %v %v after %s, want visible when the 1s lease ends", reply, err, elapsed)
	}
	msgs := do(t, tr, 0, receiveRequest("r2", 0, 0)).GetResults()[0].GetReceive().GetMessages()
	if len(msgs) != 1 || msgs[0].GetDeliveryCount() != 2 {
		t.Fatalf("receive after the wait got %v, want the redelivery", msgs)
	}
}

func TestWaitingReceiveAnswersReplaysAndValidationAtOnce(t *testing.T) {
	t.Parallel()
	tr := clienttest.New(1)
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
