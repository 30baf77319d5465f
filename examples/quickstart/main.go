// Command quickstart shows Orrery from a Go program: it starts an embedded silo (or, with
// --seeds, dials a running cluster), configures a schedule every 2 s and a saga with a 5 s
// deadline, and prints the occurrences and the saga's timeout as a worker receives them. Each
// run uses a namespace of its own (quickstart-<random>), prints its ids and the admin URLs to
// look at them, and cancels its schedule on exit, so no run receives another's messages.
//
//	go run ./examples/quickstart                      # embedded silo, data in a temp dir
//	go run ./examples/quickstart --seeds 127.0.0.1:7382   # against `make run` (admin 127.0.0.1:7380)
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/silo"
)

func main() {
	seeds := flag.String("seeds", "", "gossip address of a running silo (empty: start an embedded one)")
	admin := flag.String("admin", silo.DefaultAdmin, "admin address of the silo --seeds names, for the URLs printed")
	runFor := flag.Duration("for", 12*time.Second, "how long to run")
	flag.Parse()
	if err := run(os.Stdout, *seeds, *admin, *runFor); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// run runs the example against seeds (empty: an embedded silo, whose admin address replaces
// admin) for runFor.
func run(out io.Writer, seeds, admin string, runFor time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), runFor+30*time.Second)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	var c *client.Client
	if seeds == "" {
		dir, err := os.MkdirTemp("", "orrery-quickstart-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		s, err := silo.Start(ctx, silo.Config{DataDir: dir, Admin: "127.0.0.1:0", Logger: quiet, InsecureDev: true})
		if err != nil {
			return err
		}
		defer s.Stop()
		fmt.Fprintln(out, "started an embedded silo; data in", dir)
		c, admin = s.Client(), s.AdminAddress()
	} else {
		var err error
		c, err = client.Dial(ctx, client.DialConfig{Seeds: []string{seeds}, Options: client.Options{Logger: quiet}})
		if err != nil {
			return err
		}
		defer c.Close()
		fmt.Fprintln(out, "joined the cluster through", seeds)
	}

	namespace := "quickstart-" + uuid.NewString()[:8] // its own: no other run's messages
	key := uuid.NewString()                           // the schedule, the saga and their queues share a partition
	jobs := &orreryv1.Lane{Namespace: namespace, Queue: "jobs", Key: key}
	start := time.Now()
	def := client.NamedSchedule(jobs, "report", client.Every(2*time.Second, start.Add(2*time.Second)), `{"report":"every 2 s"}`)
	scheduleID, sagaID := def.GetScheduleId(), uuid.NewString()
	if _, err := c.ConfigureSchedule(ctx, def, 0); err != nil {
		return err
	}
	defer func() {
		// Stop the schedule, or it would fire into the namespace forever; the record stays
		// for inspection.
		cancelCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.CancelSchedule(cancelCtx, &orreryv1.CancelSchedule{Lane: jobs, ScheduleId: scheduleID, AnyRevision: true})
		if err != nil {
			fmt.Fprintln(out, "cancel the schedule:", err)
			return
		}
		fmt.Fprintln(out, "cancelled schedule", scheduleID)
	}()
	fmt.Fprintf(out, "namespace %s, lane key %s\n", namespace, key)
	fmt.Fprintln(out, "configured schedule", scheduleID, "named \"report\", every 2 s")
	saga := client.WaitingSaga(jobs, sagaID, 0, `{"awaiting":"payment"}`, start.Add(5*time.Second), client.Timeout("timeouts", `{"payment":"timed out"}`))
	if _, err := c.CompareExchangeSaga(ctx, saga); err != nil {
		return err
	}
	fmt.Fprintln(out, "created saga", sagaID, "waiting for payment, deadline in 5 s")
	lanePath := namespace + "/jobs/" + key
	fmt.Fprintln(out, "look at them on the admin endpoint:")
	for _, path := range []string{"/v1/schedules/" + lanePath + "/" + scheduleID, "/v1/ledger/" + lanePath + "/" + scheduleID,
		"/v1/sagas/" + lanePath + "/" + sagaID, "/v1/lanes/" + lanePath} {
		fmt.Fprintf(out, "  http://%s%s\n", admin, path)
	}

	workCtx, stop := context.WithTimeout(ctx, runFor)
	defer stop()
	handler := func(_ context.Context, m *client.Message) error {
		at := time.Since(start).Round(time.Millisecond)
		switch {
		case m.Occurrence() != nil:
			fmt.Fprintf(out, "%8v  occurrence #%d of schedule %s (due %v) %s\n", at, m.Occurrence().GetOrdinal(), m.Occurrence().GetScheduleId(),
				time.UnixMicro(m.Occurrence().GetNominalDueAtUnixMicros()).Sub(start).Round(time.Millisecond), m.Payload())
		case m.SagaTimeout() != nil:
			fmt.Fprintf(out, "%8v  saga timeout of saga %s %s\n", at, m.SagaTimeout().GetSagaId(), m.Payload())
		}
		return nil
	}
	done := make(chan error, 2)
	for _, queue := range []string{"jobs", "timeouts"} {
		w := c.NewWorker(client.WorkerConfig{Namespace: namespace, Queue: queue, Handler: handler, Wait: 5 * time.Second})
		go func() { done <- w.Run(workCtx) }()
	}
	for range 2 {
		if err := <-done; err != nil && workCtx.Err() == nil {
			return err
		}
	}
	fmt.Fprintln(out, "done")
	return nil
}
