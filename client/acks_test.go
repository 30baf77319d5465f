package client_test

import (
	"context"
	"fmt"
	"sync"
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
	release := make(chan struct{})
	runCtx, stop := context.WithCancel(ctx)
	w := c.NewWorker(client.WorkerConfig{Namespace: "ns", Queue: "acks", Concurrency: n, Wait: time.Second, Handler: func(context.Context, *client.Message) error {
		mu.Lock()
		handled++
		if handled == n {
			close(release)
		}
		mu.Unlock()
		<-release // every handler finishes at once
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
	ackCommands, acks := 0, 0
	for _, call := range tr.Calls() {
		if call.Request == nil {
			continue
		}
		if muts := call.Request.GetBatch().GetMutations(); len(muts) > 0 && muts[0].GetAck() != nil {
			ackCommands++
			acks += len(muts)
		}
	}
	if acks != n || ackCommands >= n/2 {
		t.Fatalf("%d acks in %d commands; want %d acks sharing far fewer commands", acks, ackCommands, n)
	}
	t.Logf("%d acks in %d commands", acks, ackCommands)
}
