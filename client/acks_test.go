package client_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/client/clienttest"
)

// TestWorkerBatchesAcks: handlers finishing together on one partition share ack commands
// (one in flight per partition, the rest forming the next), and every message is acked.
func TestWorkerBatchesAcks(t *testing.T) {
	tr := clienttest.New(1)
	t.Cleanup(func() { _ = tr.Close() })
	c := client.New(tr, client.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 64
	for i := range n {
		if _, err := c.Enqueue(ctx, &orreryv1.Enqueue{Lane: &orreryv1.Lane{Namespace: "ns", Queue: "acks", Key: "k"}, Id: fmt.Sprint("m", i), PayloadJson: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	handled := 0
	all, release := make(chan struct{}), make(chan struct{})
	// Once every message is being handled, one handler finishes first, and the others only
	// once its ack command is on its way. That command is held until every other ack waits in
	// the worker's acker, so they queue behind one in flight however fast the twin answers:
	// without batching each would still go alone.
	var first, held atomic.Bool
	var heldErr error
	tr.SetFaultHook(func(_ int, req *orreryv1.CommandRequest) (clienttest.Fault, error) {
		if muts := req.GetBatch().GetMutations(); len(muts) > 0 && muts[0].GetAck() != nil && held.CompareAndSwap(false, true) {
			close(release)
			heldErr = pollUntil(ctx, func() bool { return goroutinesIn("client.(*acker).ack(") >= n })
		}
		return clienttest.FaultNone, nil
	})
	runCtx, stop := context.WithCancel(ctx)
	w := c.NewWorker(client.WorkerConfig{Namespace: "ns", Queue: "acks", Concurrency: n, Wait: time.Second, Handler: func(ctx context.Context, _ *client.Message) error {
		mu.Lock()
		handled++
		if handled == n {
			close(all)
		}
		mu.Unlock()
		<-all
		if first.CompareAndSwap(false, true) {
			return nil
		}
		select { // the rest finish together, once the first ack command is sent
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}})
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if left, _, _ := c.InspectLane(ctx, &orreryv1.Lane{Namespace: "ns", Queue: "acks", Key: "k"}, "", 100); len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("messages were not all acked")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-done
	if heldErr != nil {
		t.Fatalf("the first ack command waited for the other acks to queue: %v", heldErr)
	}
	ackCommands, acks := 0, 0
	var sizes []int
	for _, call := range tr.Calls() {
		if call.Request == nil {
			continue
		}
		if muts := call.Request.GetBatch().GetMutations(); len(muts) > 0 && muts[0].GetAck() != nil {
			ackCommands++
			acks += len(muts)
			sizes = append(sizes, len(muts))
		}
	}
	if acks != n || ackCommands != 2 || sizes[0] != 1 {
		t.Fatalf("%d acks in %d commands (sizes %v); want %d acks in 2 commands (the held one, then all the rest)", acks, ackCommands, sizes, n)
	}
	t.Logf("%d acks in %d commands", acks, ackCommands)
}

// goroutinesIn counts the goroutines whose stack has a frame whose name contains frame.
func goroutinesIn(frame string) int {
	count := 0
	for _, g := range goroutineStacks() {
		if strings.Contains(g, frame) {
			count++
		}
	}
	return count
}

// pollUntil checks cond every few milliseconds until it holds or ctx ends.
func pollUntil(ctx context.Context, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}
