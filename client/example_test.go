package client_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"strings"
	"time"

	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/client/clienttest"
	"github.com/orreryhq/orrery/grains/grants"
)

// exampleClient is a client of an in-memory cluster (clienttest), standing in for client.Dial.
func exampleClient() *client.Client {
	return client.New(clienttest.New(4, clienttest.WithGrants(grants.Everything("app"))), client.Options{Principal: "app"})
}

// An application declares its schedules at every start: the first Upsert creates the
// schedule, the next ones leave it alone while its definition is the same.
func ExampleSchedules_Upsert() {
	c := exampleClient()
	defer c.Close()
	ctx := context.Background()
	schedules := c.Schedules("acme")
	report := client.ScheduleOptions{
		Queue:       "reports",
		Spec:        client.Cron("0 9 * * MON-FRI", "Europe/Paris"),
		PayloadJSON: `{"report":"daily"}`,
	}
	for start := range 3 { // three starts of the application
		h, err := schedules.Upsert(ctx, "daily-report", report)
		if err != nil {
			log.Fatal(err)
		}
		d, err := h.Describe(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("start", start, "generation", d.Generation, "revision", d.Revision)
	}
	// Output:
	// start 0 generation 1 revision 1
	// start 1 generation 1 revision 1
	// start 2 generation 1 revision 1
}

// A schedule is addressed by its queue, key and name: paused, resumed and triggered without
// holding its id or revision.
func ExampleScheduleHandle_Pause() {
	c := exampleClient()
	defer c.Close()
	ctx := context.Background()
	schedules := c.Schedules("acme")
	if _, err := schedules.Upsert(ctx, "daily-report", client.ScheduleOptions{
		Queue: "reports", Spec: client.Cron("0 9 * * *", "UTC"), PayloadJSON: `{}`,
	}); err != nil {
		log.Fatal(err)
	}
	h := schedules.Handle("reports", "", "daily-report")
	if err := h.Pause(ctx); err != nil {
		log.Fatal(err)
	}
	d, _ := h.Describe(ctx)
	fmt.Println(d.State == client.SchedulePaused)
	if err := h.Resume(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := h.Trigger(ctx); err != nil { // one occurrence now, ledgered as manual
		log.Fatal(err)
	}
	d, _ = h.Describe(ctx)
	fmt.Println(d.State == client.ScheduleActive, d.LastOutcomes[0].Manual)
	// Output:
	// true
	// true true
}

// List iterates over every page of a namespace's schedules.
func ExampleSchedules_List() {
	c := exampleClient()
	defer c.Close()
	ctx := context.Background()
	schedules := c.Schedules("acme")
	for _, name := range []string{"hourly", "nightly", "weekly"} {
		if _, err := schedules.Create(ctx, name, client.ScheduleOptions{Queue: "jobs", Spec: client.Cron("@hourly", "")}); err != nil {
			log.Fatal(err)
		}
	}
	count := 0
	for d, err := range schedules.List(ctx, client.ListSchedules{Queue: "jobs", PageSize: 2}) {
		if err != nil {
			log.Fatal(err)
		}
		count++
		_ = d.Name
	}
	fmt.Println(count, "schedules")
	// Output: 3 schedules
}

// A saga waits for its caller or its deadline, whichever comes first: a completion that
// arrives after the timeout fails with RevisionConflict, and the timeout message is in its
// queue.
func ExampleSagas_Start() {
	c := exampleClient()
	defer c.Close()
	ctx := context.Background()
	sagas := c.Sagas("acme")
	order, err := sagas.Start(ctx, "orders", "", "order-42", client.SagaWait{
		StateJSON:          `{"step":"payment"}`,
		Deadline:           time.Now().Add(15 * time.Minute),
		TimeoutQueue:       "order-timeouts",
		TimeoutPayloadJSON: `{"order":42}`,
	})
	if err != nil {
		log.Fatal(err)
	}
	// Later, perhaps in another process: the payment arrived.
	order = sagas.Handle("orders", "", "order-42")
	if _, err := order.Describe(ctx); err != nil { // reads the revision to compare against
		log.Fatal(err)
	}
	if err := order.Complete(ctx, `{"step":"paid"}`); err != nil {
		log.Fatal(err) // errors.Is(err, orrery.ErrRevisionConflict): it timed out first
	}
	d, _ := order.Describe(ctx)
	fmt.Println(d.Phase == client.SagaCompleted, d.StateJSON)
	// Output: true {"step":"paid"}
}

// A typed worker: jobs are enqueued as Go values and handled as Go values, one worker serving
// several queues, each with its own options.
func ExampleHandle() {
	type welcomeEmail struct {
		User string `json:"user"`
	}
	type invoice struct {
		Amount int `json:"amount"`
	}
	c := exampleClient()
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := client.Enqueue(ctx, c.Queue("acme", "emails"), welcomeEmail{User: "ada"}, client.EnqueueOptions{}); err != nil {
		log.Fatal(err)
	}
	if _, err := client.Enqueue(ctx, c.Queue("acme", "invoices"), invoice{Amount: 42}, client.EnqueueOptions{}); err != nil {
		log.Fatal(err)
	}
	handled := make(chan string, 2)
	w := c.NewWorker(client.WorkerConfig{Namespace: "acme"})
	client.Handle(w, "emails", func(_ context.Context, j *client.Job[welcomeEmail]) error {
		handled <- "welcome, " + j.Args.User
		return nil // acked
	}, client.HandlerOptions{Concurrency: 1})
	client.Handle(w, "invoices", func(_ context.Context, j *client.Job[invoice]) error {
		handled <- fmt.Sprint("invoice of ", j.Args.Amount)
		return nil
	}, client.HandlerOptions{Backoff: client.ExponentialBackoff(time.Second, time.Minute)})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	got := []string{<-handled, <-handled}
	slices.Sort(got)
	fmt.Println(strings.Join(got, "; "))
	cancel()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output: invoice of 42; welcome, ada
}
