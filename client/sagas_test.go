package client_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/client"
)

func TestASagaByNameWaitsAndCompletes(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	sagas := b.c.Sagas(testNamespace)
	deadline := b.clock.Now().Add(time.Hour).Truncate(time.Microsecond)
	wait := client.SagaWait{StateJSON: `{"step":1}`, Deadline: deadline, TimeoutQueue: "timeouts", TimeoutPayloadJSON: `{"late":true}`}
	h, err := sagas.Start(ctx, "orders", "", "order-42", wait)
	if err != nil {
		t.Fatal(err)
	}
	if h.ID() != client.SagaID(testNamespace, "order-42") || h.Revision() != 1 {
		t.Fatalf("started saga %s at revision %d", h.ID(), h.Revision())
	}
	if _, err := sagas.Start(ctx, "orders", "", "order-42", wait); !errors.Is(err, orrery.ErrRevisionConflict) {
		t.Fatalf("a second Start of one name: %v, want RevisionConflict", err)
	}
	if err := h.Wait(ctx, client.SagaWait{StateJSON: `{"step":2}`, Deadline: deadline.Add(time.Hour), TimeoutQueue: "timeouts"}); err != nil {
		t.Fatal(err)
	}
	other := sagas.Handle("orders", "", "order-42") // another process, by name
	d, err := other.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.Phase != client.SagaWaiting || d.StateJSON != `{"step":2}` || !d.Deadline.Equal(deadline.Add(time.Hour)) ||
		d.Revision != 2 || other.Revision() != 2 || d.Name != "order-42" || d.Key != "order-42" || d.TimeoutQueue != "timeouts" {
		t.Fatalf("described %+v (handle at revision %d)", d, other.Revision())
	}
	if err := other.Complete(ctx, `{"step":3}`); err != nil {
		t.Fatal(err)
	}
	if err := h.Cancel(ctx, ""); !errors.Is(err, orrery.ErrRevisionConflict) {
		t.Fatalf("a change from a stale revision: %v, want RevisionConflict", err)
	}
	if d, err = h.Describe(ctx); err != nil || d.Phase != client.SagaCompleted || h.Revision() != 3 {
		t.Fatalf("after Complete: %+v, %v (handle at revision %d)", d, err, h.Revision())
	}
}

func TestASagaTimesOutWhenItsDeadlinePasses(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	deadline := b.clock.Now().Add(time.Minute)
	h, err := b.c.Sagas(testNamespace).Start(ctx, "orders", "", "order-7",
		client.SagaWait{Deadline: deadline, TimeoutQueue: "timeouts", TimeoutPayloadJSON: `{"late":true}`})
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Until(deadline) + time.Second)
	b.emitDue(1)
	if err := h.Complete(ctx, ""); !errors.Is(err, orrery.ErrRevisionConflict) {
		t.Fatalf("Complete after the timeout: %v, want RevisionConflict", err)
	}
	d, err := h.Describe(ctx)
	if err != nil || d.Phase != client.SagaTimedOut || d.TimeoutMessageID == "" {
		t.Fatalf("after the deadline: %+v, %v", d, err)
	}
	msgs := b.laneMessages(lane("timeouts", "order-7"))
	if len(msgs) != 1 || msgs[0].GetId() != d.TimeoutMessageID || msgs[0].GetPayloadJson() != `{"late":true}` {
		t.Fatalf("timeout lane holds %v", msgs)
	}
}

func TestSagasListIteratesByPhase(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	sagas := b.c.Sagas(testNamespace)
	for _, name := range []string{"a", "b", "c"} {
		if _, err := sagas.Start(ctx, "orders", "", name, client.SagaWait{StateJSON: `{}`}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sagas.Handle("orders", "", "b").Cancel(ctx, ""); !errors.Is(err, orrery.ErrRevisionConflict) {
		t.Fatalf("Cancel from a handle that read no revision: %v, want RevisionConflict", err)
	}
	h := sagas.Handle("orders", "", "b")
	if _, err := h.Describe(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Cancel(ctx, ""); err != nil {
		t.Fatal(err)
	}
	count := func(f client.ListSagas) (n int) {
		for d, err := range sagas.List(ctx, f) {
			if err != nil {
				t.Fatal(err)
			}
			if d.ID == "" || d.Queue != "orders" {
				t.Fatalf("listed %+v", d)
			}
			n++
		}
		return n
	}
	if all, waiting, cancelled := count(client.ListSagas{PageSize: 2}), count(client.ListSagas{Phase: client.SagaWaiting}),
		count(client.ListSagas{Phase: client.SagaCancelled}); all != 3 || waiting != 2 || cancelled != 1 {
		t.Fatalf("listed %d, %d waiting, %d cancelled; want 3, 2, 1", all, waiting, cancelled)
	}
}

// TestSagasCarryLabelsThatListSelects: a saga started with labels keeps them through a Wait
// without any and a Complete, and List selects by them.
func TestSagasCarryLabelsThatListSelects(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	sagas := b.c.Sagas(testNamespace)
	for i := range 9 {
		team := []string{"billing", "search", "ops"}[i%3]
		h, err := sagas.Start(ctx, testQueue, "", fmt.Sprintf("order-%d", i), client.SagaWait{StateJSON: `{}`, Labels: map[string]string{"team": team}})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Wait(ctx, client.SagaWait{StateJSON: `{"step":2}`}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := h.Complete(ctx, `{}`); err != nil {
				t.Fatal(err)
			}
		}
	}
	var billing []string
	for d, err := range sagas.List(ctx, client.ListSagas{Labels: map[string]string{"team": "billing"}, PageSize: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		if d.Labels["team"] != "billing" {
			t.Fatalf("listed %s with labels %v", d.ID, d.Labels)
		}
		billing = append(billing, d.ID)
	}
	if len(billing) != 3 {
		t.Fatalf("team=billing listed %v, want the 3 billing sagas (the completed one too)", billing)
	}
}
