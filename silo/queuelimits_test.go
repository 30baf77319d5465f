package silo

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/internal/testkit"
)

// TestAdminQueueLimitsCapLeasesAcrossTheCluster: PUT …/limits {"max_leased": 2} caps a queue
// whose messages all live on a partition the static split gives no share (2 over 8 partitions);
// the silo's rebalancer moves units there, and sixteen concurrent receivers long-polling every
// partition handle every message while never holding more than 2 leases at once (counted from
// a receive's return to just before its ack). The queue's GET shows the policy and its shares
// summing to 2; DELETE removes the cap.
func TestAdminQueueLimitsCapLeasesAcrossTheCluster(t *testing.T) {
	t.Parallel()
	s := startSilo(t, t.TempDir(), nil)
	waitReady(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := s.Client()
	const namespace, queue, messages = "limits-test", "jobs", 30
	key := ""
	for i := 0; key == ""; i++ { // a key of a partition the static split gives no share
		lane := &orreryv1.Lane{Namespace: namespace, Queue: queue, Key: fmt.Sprintf("k%d", i)}
		if k, _ := client.StaticShare(2, 0, c.Partitions(), c.PartitionOf(lane)); k == 0 {
			key = lane.GetKey()
		}
	}
	lane := &orreryv1.Lane{Namespace: namespace, Queue: queue, Key: key}
	for i := range messages {
		if _, err := c.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: fmt.Sprintf("m%d", i), PayloadJson: `{}`}); err != nil {
			t.Fatal(err)
		}
	}
	base := "http://" + s.AdminAddress() + "/v1/queues/" + namespace + "/" + queue
	if code, body := send(t, http.MethodPut, base+"/limits", `{"max_leased": 2}`, nil); code != http.StatusOK {
		t.Fatalf("PUT limits: %d %v", code, body)
	}
	code, body := getJSON(t, base)
	limits, _ := body["limits"].(map[string]any)
	if policy, _ := limits["policy"].(map[string]any); code != http.StatusOK || policy["max_leased"] != float64(2) || limits["share_leased_sum"] != float64(2) {
		t.Fatalf("GET the capped queue: %d %v", code, body)
	}
	var held, most, handled atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for p := w % c.Partitions(); handled.Load() < messages && ctx.Err() == nil; p = (p + 1) % c.Partitions() {
				msgs, err := c.Receive(ctx, p, &orreryv1.Receive{Namespace: namespace, Queue: queue, Max: 4}, 100*time.Millisecond)
				if err != nil {
					t.Error(err)
					return
				}
				now := held.Add(int64(len(msgs)))
				for old := most.Load(); now > old && !most.CompareAndSwap(old, now); old = most.Load() {
				}
				for _, m := range msgs {
					held.Add(-1)
					if _, err := c.Ack(ctx, m.GetLane(), m.GetId(), m.GetLease().GetToken()); err != nil {
						t.Error(err)
						return
					}
					handled.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if handled.Load() != messages || most.Load() > 2 {
		t.Fatalf("handled %d of %d messages, at most %d leases held at once (want at most 2)", handled.Load(), messages, most.Load())
	}
	testkit.Eventually(t, 10*time.Second, "the shares still sum to 2", func() bool {
		_, body := getJSON(t, base)
		limits, _ := body["limits"].(map[string]any)
		return limits["share_leased_sum"] == float64(2)
	})
	if code, body := send(t, http.MethodDelete, base+"/limits", "", nil); code != http.StatusOK {
		t.Fatalf("DELETE limits: %d %v", code, body)
	}
	if _, body := getJSON(t, base); body["limits"].(map[string]any)["policy"] != nil {
		t.Fatalf("GET after DELETE: %v", body)
	}
	if code, body := send(t, http.MethodPut, base+"/limits", `{"max_leased": 0}`, nil); code != http.StatusBadRequest {
		t.Fatalf("PUT limits without a limit: %d %v, want 400", code, body)
	}
}
