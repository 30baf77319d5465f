package clienttest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/route"
)

// Conformance checks what the client relies on of a Transport, against any implementation:
// the twin in this package's tests, the silo's cluster transport in its own. It writes only in
// a fresh random namespace, so the transport need not be empty. newTransport is called once.
func Conformance(t *testing.T, newTransport func(t *testing.T) client.Transport) {
	t.Helper()
	tr := newTransport(t)
	partitions := tr.Partitions()
	if partitions <= 0 {
		t.Fatalf("Partitions() = %d, want a positive count", partitions)
	}
	namespace := "conformance-" + client.NewID()[:8]
	lane := &orreryv1.Lane{Namespace: namespace, Queue: "jobs", Key: "k"}
	p := route.Partition(lane, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	command := func(req *orreryv1.CommandRequest) (*orreryv1.Receipt, []byte, error) {
		t.Helper()
		reply, err := tr.Command(ctx, p, req)
		if err != nil {
			return nil, nil, err
		}
		if reply.GetError() != nil {
			return nil, nil, orrery.FromProto(reply.GetError())
		}
		receipt := &orreryv1.Receipt{}
		if err := proto.Unmarshal(reply.GetReceipt(), receipt); err != nil {
			t.Fatalf("receipt does not decode: %v", err)
		}
		if receipt.GetCommandId() != req.GetBatch().GetCommandId() {
			t.Fatalf("receipt answers command %q, sent %q", receipt.GetCommandId(), req.GetBatch().GetCommandId())
		}
		return receipt, reply.GetReceipt(), nil
	}
	enqueue := func(id string) *orreryv1.CommandRequest {
		return &orreryv1.CommandRequest{Principal: client.DefaultPrincipal, Batch: &orreryv1.Batch{
			CommandId: client.NewID(),
			Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: lane, Id: id, PayloadJson: `{}`}}}},
		}}
	}
	receive := func(wait time.Duration) *orreryv1.CommandRequest {
		return &orreryv1.CommandRequest{Principal: client.DefaultPrincipal, WaitMicros: wait.Microseconds(), Batch: &orreryv1.Batch{
			CommandId: client.NewID(),
			Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: namespace, Queue: "jobs", Max: 10}}}},
		}}
	}

	t.Run("replay returns byte-identical receipts", func(t *testing.T) {
		req := enqueue("replayed")
		first, raw, err := command(req)
		if err != nil || first.GetResults()[0].GetEnqueue().GetCreated() != true {
			t.Fatalf("enqueue: %v %v", first, err)
		}
		_, again, err := command(req)
		if err != nil || !bytes.Equal(raw, again) {
			t.Fatalf("replay: %v, byte-identical %v", err, bytes.Equal(raw, again))
		}
		other := enqueue("other")
		other.Batch.CommandId = req.GetBatch().GetCommandId()
		if _, _, err := command(other); orrery.CodeOf(err) != orrery.CodeIdempotencyConflict {
			t.Fatalf("same id, other request: %v, want IdempotencyConflict", err)
		}
	})

	appliedIndex := func() uint64 {
		t.Helper()
		reply, err := tr.Inspect(ctx, p, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Partition{Partition: &orreryv1.InspectPartition{}}})
		if err != nil || reply.GetError() != nil {
			t.Fatalf("partition status: %v %v", reply, err)
		}
		return reply.GetPartition().GetAppliedIndex()
	}

	t.Run("long poll answers visible on enqueue, without leasing", func(t *testing.T) {
		if _, _, err := command(receive(0)); err != nil { // lease what the replay test left
			t.Fatalf("receive: %v", err)
		}
		timer := time.AfterFunc(100*time.Millisecond, func() {
			if _, err := tr.Command(ctx, p, enqueue("woken")); err != nil {
				t.Errorf("enqueue: %v", err)
			}
		})
		defer timer.Stop()
		start := time.Now()
		waiting := receive(10 * time.Second)
		reply, err := tr.Command(ctx, p, waiting)
		elapsed := time.Since(start)
		if err != nil || reply.GetError() != nil {
			t.Fatalf("waiting receive: %v %v", reply, err)
		}
		if !reply.GetVisible() || len(reply.GetReceipt()) != 0 || elapsed < 50*time.Millisecond || elapsed > 5*time.Second {
			t.Fatalf("waiting receive answered %v after %s, want visible without a receipt just after 100ms", reply, elapsed)
		}
		applied := appliedIndex()
		again, err := tr.Command(ctx, p, waiting) // a message is visible: answered at once
		if err != nil || !again.GetVisible() || len(again.GetReceipt()) != 0 || appliedIndex() != applied {
			t.Fatalf("waiting receive with a message visible: %v %v, applied index %d → %d; want visible, nothing written", again, err, applied, appliedIndex())
		}
		waiting.WaitMicros = 0 // the same command without waiting leases
		receipt, _, err := command(waiting)
		if err != nil {
			t.Fatalf("leasing receive: %v", err)
		}
		msgs := receipt.GetResults()[0].GetReceive().GetMessages()
		if len(msgs) != 1 || msgs[0].GetId() != "woken" || msgs[0].GetDeliveryCount() != 1 {
			t.Fatalf("leasing receive got %v, want the enqueued message", msgs)
		}
		waiting.WaitMicros = (10 * time.Second).Microseconds()
		start = time.Now()
		replayed, _, err := command(waiting) // its command id has a receipt: replayed at once
		if err != nil || !proto.Equal(replayed, receipt) || time.Since(start) > 5*time.Second {
			t.Fatalf("waiting receive of an answered command: %v %v after %s, want its receipt", replayed, err, time.Since(start))
		}
	})

	t.Run("long poll times out without writing", func(t *testing.T) {
		applied := appliedIndex()
		start := time.Now()
		reply, err := tr.Command(ctx, p, receive(200*time.Millisecond))
		if err != nil || reply.GetError() != nil || reply.GetVisible() || len(reply.GetReceipt()) != 0 || time.Since(start) < 150*time.Millisecond {
			t.Fatalf("idle receive: %v %v after %s, want not visible after the wait", reply, err, time.Since(start))
		}
		if got := appliedIndex(); got != applied {
			t.Fatalf("an idle receive moved the applied index from %d to %d", applied, got)
		}
	})

	t.Run("cancel ends a waiting receive", func(t *testing.T) {
		short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancelShort()
		start := time.Now()
		if _, err := tr.Command(short, p, receive(10*time.Second)); err == nil {
			t.Fatal("receive outlived its context without error")
		}
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Fatalf("cancelled receive returned after %s", elapsed)
		}
	})

	t.Run("inspect", func(t *testing.T) {
		reply, err := tr.Inspect(ctx, p, &orreryv1.InspectRequest{Principal: client.DefaultPrincipal, Target: &orreryv1.InspectRequest_Lane{Lane: &orreryv1.InspectLane{Lane: lane, MaxMessages: 10}}})
		if err != nil || reply.GetError() != nil || len(reply.GetMessages()) != 2 {
			t.Fatalf("inspect lane: %v %v, want the two enqueued messages", reply, err)
		}
		reply, err = tr.Inspect(ctx, p, &orreryv1.InspectRequest{Principal: client.DefaultPrincipal, Target: &orreryv1.InspectRequest_Schedule{Schedule: &orreryv1.InspectSchedule{Lane: lane, ScheduleId: client.NewID()}}})
		if err != nil || reply.GetError() != nil || reply.GetFound() {
			t.Fatalf("inspect absent schedule: %v %v, want found=false", reply, err)
		}
		reply, err = tr.Inspect(ctx, p, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Partition{Partition: &orreryv1.InspectPartition{}}})
		if err != nil || reply.GetPartition().GetPartition() != int32(p) || reply.GetPartition().GetLoggedTimeUnixMicros() == 0 {
			t.Fatalf("partition status: %v %v", reply, err)
		}
	})
}
