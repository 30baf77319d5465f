package client_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/route"
)

// TestEnqueueOptionsPriorityOrdersReceives: messages enqueued with EnqueueOptions.Priority in one
// lane are received highest priority first, then in enqueue order, and each carries its
// priority (Message.Priority on the raw message); a priority outside 0..9 is refused naming
// the field. A schedule's Priority is its template's, and Describe returns it.
func TestEnqueueOptionsPriorityOrdersReceives(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	ctx := ctxFor(t)
	q := b.c.Queue(testNamespace, "prioritized")
	for _, m := range []struct {
		id       string
		priority int
	}{{"a", 0}, {"b", 3}, {"c", 9}, {"d", 3}} {
		if _, _, err := q.EnqueueJSON(ctx, `{}`, client.EnqueueOptions{ID: m.id, Key: "one-lane", Priority: m.priority}); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []int{-1, 10, 1 << 40} {
		_, _, err := q.EnqueueJSON(ctx, `{}`, client.EnqueueOptions{Key: "one-lane", Priority: bad})
		if e := orrery.AsError(err); !errors.Is(err, orrery.ErrValidation) || e.Field != "mutations[0].enqueue.priority" {
			t.Fatalf("priority %d: %v, want Validation on the priority", bad, err)
		}
	}
	lane := &orreryv1.Lane{Namespace: testNamespace, Queue: "prioritized", Key: "one-lane"}
	msgs, err := b.c.Receive(ctx, route.Partition(lane, 2), &orreryv1.Receive{Namespace: testNamespace, Queue: "prioritized", Max: 10}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.GetId())
	}
	if !slices.Equal(got, []string{"c", "b", "d", "a"}) || msgs[0].GetPriority() != 9 {
		t.Fatalf("received %v, want [c b d a], c of priority 9", got)
	}

	opts := client.ScheduleOptions{Queue: "reports", Spec: client.Every(time.Hour, time.Now().Add(time.Hour)), Priority: 7}
	h, err := b.c.Schedules(testNamespace).Create(ctx, "prioritized-report", opts)
	if err != nil {
		t.Fatal(err)
	}
	d, err := h.Describe(ctx)
	if err != nil || d.Options.Priority != 7 {
		t.Fatalf("described %+v (%v), want priority 7", d.Options, err)
	}
}
