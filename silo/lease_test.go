package silo

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/route"
)

// TestLeaseExpiryRedeliveryAndDeadLetter: a message received and not acked reappears after its
// lease with a grown delivery count; an ack with the stale token fails; after MaxDeliveries it
// is in the dead-letter lane.
func TestLeaseExpiryRedeliveryAndDeadLetter(t *testing.T) {
	s := startSilo(t, t.TempDir(), nil)
	c := s.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "lease-test", Queue: "work", Key: "k"}
	partition := route.Partition(lane, c.Partitions())
	if _, err := c.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "job-1", PayloadJson: `{"x":1}`, MaxDeliveries: 2}); err != nil {
		t.Fatal(err)
	}
	recv := func() []*orreryv1.QueueMessage {
		msgs, err := c.Receive(ctx, partition, &orreryv1.Receive{Namespace: "lease-test", Queue: "work", Max: 1, LeaseDurationMicros: input.Second}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return msgs
	}
	first := recv()
	if len(first) != 1 || first[0].GetDeliveryCount() != 1 {
		t.Fatalf("first delivery %v", first)
	}
	// Not acked: after its 1 s lease it is delivered again (the waiting receive wakes at the
	// lease end), with a new token and a grown delivery count.
	second := recv()
	if len(second) != 1 || second[0].GetId() != "job-1" || second[0].GetDeliveryCount() != 2 || second[0].GetLease().GetToken() == first[0].GetLease().GetToken() {
		t.Fatalf("second delivery %v", second)
	}
	if !time.UnixMicro(second[0].GetLease().GetUntilUnixMicros()).After(time.UnixMicro(first[0].GetLease().GetUntilUnixMicros())) {
		t.Fatal("the second lease does not end after the first")
	}
	_, err := c.Ack(ctx, lane, "job-1", first[0].GetLease().GetToken())
	if !errors.Is(err, orrery.ErrTokenInvalidated) {
		t.Fatalf("ack with the stale token: %v", err)
	}
	// Its deliveries are used up: after this lease it moves to the dead-letter queue.
	time.Sleep(1100 * time.Millisecond)
	if again, err := c.Receive(ctx, partition, &orreryv1.Receive{Namespace: "lease-test", Queue: "work", Max: 1}, 0); err != nil || len(again) != 0 {
		t.Fatalf("after max deliveries the source queue delivered %v (%v)", again, err)
	}
	dead := &orreryv1.Lane{Namespace: "lease-test", Queue: "work" + input.DeadLetterSuffix, Key: "k"}
	msgs, _, err := c.InspectLane(ctx, dead, "", 10)
	if err != nil || len(msgs) != 1 || msgs[0].GetId() != "job-1" || msgs[0].GetDeadLetteredFrom() != "work" {
		t.Fatalf("dead-letter lane: %v (%v)", msgs, err)
	}
	if src, _, _ := c.InspectLane(ctx, lane, "", 10); len(src) != 0 {
		t.Fatalf("the source lane still holds %v", src)
	}
	// The dead-letter queue is consumable; acking there removes it.
	dl, err := c.Receive(ctx, partition, &orreryv1.Receive{Namespace: "lease-test", Queue: "work" + input.DeadLetterSuffix, Max: 1}, 0)
	if err != nil || len(dl) != 1 {
		t.Fatalf("receive from the dead-letter queue: %v %v", dl, err)
	}
	if _, err := c.Ack(ctx, dead, "job-1", dl[0].GetLease().GetToken()); err != nil {
		t.Fatal(err)
	}
}
