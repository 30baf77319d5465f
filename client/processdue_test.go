package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/route"
)

// TestProcessDueEmitsWhatIsDueOnceAndStopsAtItsBound: ProcessDue emits, oldest due first, at
// most MaxSchedules of a partition's due schedules (More says some are left), or one lane's;
// the due coordinator then emits only what it left, and a second pass finds nothing; a
// cancelled context stops it between schedules.
func TestProcessDueEmitsWhatIsDueOnceAndStopsAtItsBound(t *testing.T) {
	b := setup(t, 2)
	ctx := ctxFor(t)
	first := time.Now().Add(time.Minute).Truncate(time.Second)
	for _, name := range []string{"a", "b", "c"} {
		if _, err := b.c.Schedules(testNamespace).Create(ctx, name, client.ScheduleOptions{Queue: testQueue, Key: "k",
			Spec: client.Every(time.Minute, first)}); err != nil {
			t.Fatal(err)
		}
	}
	other := &orreryv1.Lane{Namespace: testNamespace, Queue: testQueue, Key: "other"}
	if _, err := b.c.Schedules(testNamespace).Create(ctx, "d", client.ScheduleOptions{Queue: testQueue, Key: other.GetKey(),
		Spec: client.Every(time.Minute, first)}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(150 * time.Second) // two occurrences due each
	partition := route.Partition(&orreryv1.Lane{Namespace: testNamespace, Queue: testQueue, Key: "k"}, b.c.Partitions())

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if got, err := b.c.ProcessDue(cancelled, client.ProcessDueRequest{Namespace: testNamespace, Partition: partition}); !errors.Is(err, context.Canceled) || got.Schedules != 0 {
		t.Fatalf("a cancelled pass: %+v, %v; want nothing done and the context's error", got, err)
	}
	got, err := b.c.ProcessDue(ctx, client.ProcessDueRequest{Namespace: testNamespace, Partition: partition, MaxSchedules: 2})
	if err != nil || got.Schedules != 2 || got.Enqueued != 4 || !got.More || len(got.Failed) != 0 {
		t.Fatalf("a pass of at most 2: %+v, %v; want 2 schedules, 4 occurrences, more left", got, err)
	}
	got, err = b.c.ProcessDue(ctx, client.ProcessDueRequest{Namespace: testNamespace, Lane: other})
	if err != nil || got.Schedules != 1 || got.Enqueued != 2 || got.More {
		t.Fatalf("a pass of the other lane: %+v, %v; want its 1 schedule's 2 occurrences", got, err)
	}
	b.emitDue(2) // the coordinator: only the third schedule of the first lane is left
	got, err = b.c.ProcessDue(ctx, client.ProcessDueRequest{Namespace: testNamespace, Partition: partition})
	if err != nil || got.Schedules != 0 || got.Enqueued != 0 || got.More {
		t.Fatalf("a pass after everything was emitted: %+v, %v; want nothing", got, err)
	}
	if _, err := b.c.ProcessDue(ctx, client.ProcessDueRequest{Namespace: testNamespace, MaxSchedules: client.MaxProcessDue + 1}); err == nil {
		t.Fatal("a pass of more than MaxProcessDue schedules was accepted")
	}
}
