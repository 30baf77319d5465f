package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/internal/testkit"
)

// welcome is a typed job's arguments.
type welcome struct {
	User  string `json:"user"`
	Tries int    `json:"tries"`
}

func TestTypedJobsRoundTripThroughAWorker(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	ctx := ctxFor(t)
	emails := b.c.Queue(testNamespace, "emails")
	var ids []string
	for _, user := range []string{"ada", "grace", "edsger"} {
		id, err := client.Enqueue(ctx, emails, welcome{User: user, Tries: len(user)}, client.EnqueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	id, created, err := emails.EnqueueJSON(ctx, `{"user":"ada","tries":3}`, client.EnqueueOptions{ID: ids[0]})
	if err != nil || created || id != ids[0] {
		t.Fatalf("an enqueue of an existing id: %s, created %v, %v; want %s, not created", id, created, err, ids[0])
	}
	if msgs := b.laneMessages(&orreryv1.Lane{Namespace: testNamespace, Queue: "emails", Key: ids[1]}); len(msgs) != 1 {
		t.Fatalf("the lane keyed by the message id holds %v", msgs)
	}
	if _, err := client.Enqueue(ctx, emails, func() {}, client.EnqueueOptions{}); !errors.Is(err, orrery.ErrValidation) {
		t.Fatalf("an enqueue of a value that does not marshal: %v, want Validation", err)
	}

	var mu sync.Mutex
	got := map[string]welcome{}
	stop := runWorker(t, b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: "emails", Wait: time.Second,
		Handler: client.JSONHandler(func(_ context.Context, j *client.Job[welcome]) error {
			mu.Lock()
			defer mu.Unlock()
			got[j.ID()] = j.Args
			return nil
		})}))
	testkit.Eventually(t, 20*time.Second, "every job handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 3
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got[ids[1]] != (welcome{User: "grace", Tries: 5}) {
		t.Fatalf("decoded %+v", got)
	}
}
