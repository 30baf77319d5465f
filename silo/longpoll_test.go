package silo

import (
	"context"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/route"
	"github.com/orreryhq/orrery/internal/testkit"
)

// TestALongPollWhoseCallerWentAwayLeasesNothing: a long-poll receive parked on its partition by
// a caller that went away (a worker whose Run returned, a Receive whose context was cancelled)
// is abandoned as the caller goes: the partition no longer holds it, a message that arrives
// afterwards stays visible, never delivered, and a live receive then gets it as its first
// delivery.
func TestALongPollWhoseCallerWentAwayLeasesNothing(t *testing.T) {
	s := startSilo(t, t.TempDir(), nil)
	c := s.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cases := []struct {
		name, queue string
		// park starts a caller whose long poll parks on the queue and returns what stops it
		// and waits until it has returned.
		park func(t *testing.T, queue string) (stop func())
	}{
		{"stopped worker", "worker", func(t *testing.T, queue string) func() {
			w := c.NewWorker(client.WorkerConfig{Namespace: "longpoll", Queue: queue, Wait: 20 * time.Second,
				Handler: func(context.Context, *client.Message) error {
					t.Error("a stopped worker's handler ran")
					return nil
				}})
			runCtx, stopRun := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- w.Run(runCtx) }()
			return func() {
				stopRun()
				if err := <-done; err != nil {
					t.Errorf("run: %v", err)
				}
			}
		}},
		{"cancelled receive", "receive", func(t *testing.T, queue string) func() {
			recvCtx, stopRecv := context.WithCancel(ctx)
			done := make(chan error, 1)
			lane := &orreryv1.Lane{Namespace: "longpoll", Queue: queue, Key: "k"}
			go func() {
				_, err := c.Receive(recvCtx, route.Partition(lane, c.Partitions()), &orreryv1.Receive{Namespace: "longpoll", Queue: queue, Max: 1}, 20*time.Second)
				done <- err
			}()
			return func() {
				stopRecv()
				if err := <-done; err == nil {
					t.Error("a cancelled receive returned no error")
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			queue := tc.queue
			lane := &orreryv1.Lane{Namespace: "longpoll", Queue: queue, Key: "k"}
			partition := route.Partition(lane, c.Partitions())
			pending := func() uint32 {
				st, err := c.PartitionStatus(ctx, partition)
				if err != nil {
					t.Fatal(err)
				}
				return st.GetPendingCommands()
			}
			stop := tc.park(t, queue)
			testkit.Eventually(t, 10*time.Second, "the long poll parked", func() bool { return pending() == 1 })
			stop()
			if n := pending(); n != 0 {
				t.Fatalf("%d commands pending after the caller went away, want its long poll abandoned", n)
			}
			if _, err := c.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "m1", PayloadJson: `{}`}); err != nil {
				t.Fatal(err)
			}
			msgs, _, err := c.InspectLane(ctx, lane, "", 10)
			if err != nil || len(msgs) != 1 {
				t.Fatalf("lane: %v %v", msgs, err)
			}
			if m := msgs[0]; m.GetDeliveryCount() != 0 || m.GetLease() != nil {
				t.Fatalf("message after the abandoned long poll: delivery %d, lease %v; want never delivered", m.GetDeliveryCount(), m.GetLease())
			}
			got, err := c.Receive(ctx, partition, &orreryv1.Receive{Namespace: "longpoll", Queue: queue, Max: 1}, 0)
			if err != nil || len(got) != 1 || got[0].GetDeliveryCount() != 1 {
				t.Fatalf("live receive: %v %v, want m1 on its first delivery", got, err)
			}
		})
	}
}
