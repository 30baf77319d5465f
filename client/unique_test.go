package client_test

import (
	"errors"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/input"
)

// TestUniqueEnqueueThroughTheClient: an enqueue whose unique key its lane holds returns the
// holder's id with created false (EnqueueJSON) or DuplicateOf (Enqueue), fails ErrDuplicate only
// when asked to, and is stored once the holder is acked; by payload, the same payload and
// headers are a duplicate; a key held for a period outlives the ack.
func TestUniqueEnqueueThroughTheClient(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	ctx := ctxFor(t)
	q := b.c.Queue(testNamespace, testQueue)
	o := client.EnqueueOptions{Key: "customer-9", Unique: client.Unique("report-2026-12", 0)}
	first, created, err := q.EnqueueJSON(ctx, `{"n":1}`, o)
	if err != nil || !created {
		t.Fatalf("first enqueue: %v %v", created, err)
	}
	if id, created, err := q.EnqueueJSON(ctx, `{"n":2}`, o); err != nil || created || id != first {
		t.Fatalf("second enqueue: %q %v %v, want the holder %q with created false", id, created, err, first)
	}
	withErr := o
	withErr.ErrorOnDuplicate = true
	_, _, err = q.EnqueueJSON(ctx, `{"n":3}`, withErr)
	var dup *client.DuplicateError
	if !errors.Is(err, client.ErrDuplicate) || !errors.As(err, &dup) || dup.DuplicateOf != first {
		t.Fatalf("with ErrorOnDuplicate: %v, want ErrDuplicate naming %s", err, first)
	}
	l := lane(testQueue, "customer-9")
	res, err := b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: "raw", PayloadJson: `1`, Unique: client.Unique("report-2026-12", 0)})
	if err != nil || res.GetCreated() || res.GetDuplicateOf() != first || res.GetId() != "raw" {
		t.Fatalf("raw enqueue: %v %v, want a duplicate of %s", res, err, first)
	}
	msgs, err := b.c.Receive(ctx, b.partitionOf(l), &orreryv1.Receive{Namespace: testNamespace, Queue: testQueue, Max: 1, LeaseDurationMicros: 5 * input.Second, Owner: "me"}, 0)
	if err != nil || len(msgs) != 1 || msgs[0].GetUniqueKey() != "report-2026-12" {
		t.Fatalf("receive: %v %v, want %s with its unique key", msgs, err, first)
	}
	if _, err := b.c.Ack(ctx, l, first, msgs[0].GetLease().GetToken()); err != nil {
		t.Fatal(err)
	}
	if id, created, err := q.EnqueueJSON(ctx, `{"n":4}`, o); err != nil || !created || id == first {
		t.Fatalf("after the ack: %q %v %v, want a new message", id, created, err)
	}

	byPayload := client.EnqueueOptions{Key: "customer-10", HeadersJSON: `{"h":1}`, Unique: client.UniqueByPayload(time.Hour)}
	held, created, err := q.EnqueueJSON(ctx, `{"n":1}`, byPayload)
	if err != nil || !created {
		t.Fatalf("by payload: %v %v", created, err)
	}
	if id, created, err := q.EnqueueJSON(ctx, `{"n":1}`, byPayload); err != nil || created || id != held {
		t.Fatalf("the same payload again: %q %v %v, want %s", id, created, err, held)
	}
	byPayload.HeadersJSON = `{"h":2}`
	if _, created, err := q.EnqueueJSON(ctx, `{"n":1}`, byPayload); err != nil || !created {
		t.Fatalf("other headers: %v %v, want created", created, err)
	}
}
