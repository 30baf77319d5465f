package client_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/input"
)

// TestEnqueueUnderATakenIDComparesTheMessage: through the client, an enqueue under an id its
// lane holds for another message — live, or acked (its tombstone) — fails ErrMessageConflict
// (and orrery.ErrIdempotencyConflict), naming the id and the part that differs but not the
// payload; the same message again is created=false, live or acked; a reused command id is
// not ErrMessageConflict.
func TestEnqueueUnderATakenIDComparesTheMessage(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	ctx := ctxFor(t)
	q := b.c.Queue(testNamespace, testQueue)
	o := client.EnqueueOptions{ID: "invoice-7", HeadersJSON: `{"h":"v"}`}
	if _, created, err := q.EnqueueJSON(ctx, `{"card":"4111"}`, o); err != nil || !created {
		t.Fatalf("first enqueue: %v %v", created, err)
	}
	wantConflict := func(err error, part string) {
		t.Helper()
		if !errors.Is(err, client.ErrMessageConflict) || !errors.Is(err, orrery.ErrIdempotencyConflict) ||
			!strings.Contains(err.Error(), `"invoice-7"`) || !strings.Contains(err.Error(), "in its "+part+":") || strings.Contains(err.Error(), "4111") || strings.Contains(err.Error(), "9999") {
			t.Fatalf("got %v, want ErrMessageConflict naming invoice-7 and %s, without the payload", err, part)
		}
	}
	_, _, err := q.EnqueueJSON(ctx, `{"card":"9999"}`, o)
	wantConflict(err, "payload_json")
	_, _, err = q.EnqueueJSON(ctx, `{"card":"4111"}`, client.EnqueueOptions{ID: "invoice-7"})
	wantConflict(err, "headers_json")
	if _, created, err := q.EnqueueJSON(ctx, `{"card":"4111"}`, client.EnqueueOptions{ID: "invoice-7", HeadersJSON: `{"h":"v"}`, Delay: 3 * time.Second}); err != nil || created {
		t.Fatalf("the same message again: %v %v, want created=false", created, err)
	}

	// Acked, its id is still compared.
	l := lane(testQueue, "invoice-7")
	msgs, err := b.c.Receive(ctx, b.partitionOf(l), &orreryv1.Receive{Namespace: testNamespace, Queue: testQueue, Max: 1, LeaseDurationMicros: 5 * input.Second, Owner: "me"}, 0)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	if _, err := b.c.Ack(ctx, l, "invoice-7", msgs[0].GetLease().GetToken()); err != nil {
		t.Fatal(err)
	}
	_, _, err = q.EnqueueJSON(ctx, `{"card":"9999"}`, o)
	wantConflict(err, "payload_json")
	if !strings.Contains(err.Error(), "acked") {
		t.Fatalf("%v: want it to say the message was acked", err)
	}
	if _, created, err := q.EnqueueJSON(ctx, `{"card":"4111"}`, o); err != nil || created {
		t.Fatalf("the same message after its ack: %v %v, want created=false", created, err)
	}

	// A command id reused for another request is another conflict.
	first := &orreryv1.Enqueue{Lane: l, Id: "other", PayloadJson: `1`}
	if _, err := b.c.Enqueue(ctx, first, client.WithCommandID("cmd-1")); err != nil {
		t.Fatal(err)
	}
	_, err = b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: "other-2", PayloadJson: `1`}, client.WithCommandID("cmd-1"))
	if !errors.Is(err, orrery.ErrIdempotencyConflict) || errors.Is(err, client.ErrMessageConflict) {
		t.Fatalf("reused command id: %v, want IdempotencyConflict that is not ErrMessageConflict", err)
	}
}
