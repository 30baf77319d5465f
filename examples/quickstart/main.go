// Command quickstart shows Orrery from a Go program: it starts an embedded silo (or, with
// --seeds, dials a running cluster), configures a schedule every 2 s and a saga with a 5 s
// deadline, and prints the occurrences and the saga's timeout as a worker receives them.
//
//	go run ./examples/quickstart                      # embedded silo, data in a temp dir
//	go run ./examples/quickstart --seeds 127.0.0.1:7382   # against `make run`
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
	runFor := flag.Duration("for", 12*time.Second, "how long to run")
	flag.Parse()
	if err := run(os.Stdout, *seeds, *runFor); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(out io.Writer, seeds string, runFor time.Duration) error {
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
		s, err := silo.Start(ctx, silo.Config{DataDir: dir, Admin: "off", Logger: quiet})
		if err != nil {
			return err
		}
		defer s.Stop()
		fmt.Fprintln(out, "started an embedded silo; data in", dir)
		c = s.Client()
	} else {
		var err error
		c, err = client.Dial(ctx, client.DialConfig{Seeds: []string{seeds}, Options: client.Options{Logger: quiet}})
		if err != nil {
			return err
		}
		defer c.Close()
		fmt.Fprintln(out, "joined the cluster through", seeds)
	}

	key := uuid.NewString() // a lane key of its own: the schedule, the saga and their queues share a partition
	jobs := &orreryv1.Lane{Namespace: "quickstart", Queue: "jobs", Key: key}
	start := time.Now()
	if _, err := c.ConfigureSchedule(ctx, &orreryv1.ScheduleDefinition{
		Lane: jobs, ScheduleId: uuid.NewString(),
		Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{
			IntervalMicros: (2 * time.Second).Microseconds(), FirstDueAtUnixMicros: start.Add(2 * time.Second).UnixMicro()}}},
		Template: &orreryv1.MessageTemplate{PayloadJson: `{"report":"every 2 s"}`},
	}, 0); err != nil {
		return err
	}
	fmt.Fprintln(out, "configured a schedule every 2 s")
	if _, err := c.CompareExchangeSaga(ctx, &orreryv1.CompareExchangeSaga{
		Lane: jobs, SagaId: uuid.NewString(), Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING, StateJson: `{"awaiting":"payment"}`,
		DeadlineUnixMicros: start.Add(5 * time.Second).UnixMicro(),
		Timeout:            &orreryv1.SagaTimeout{Queue: "timeouts", Template: &orreryv1.MessageTemplate{PayloadJson: `{"payment":"timed out"}`}},
	}); err != nil {
		return err
	}
	fmt.Fprintln(out, "created a saga waiting for payment, deadline in 5 s")

	workCtx, stop := context.WithTimeout(ctx, runFor)
	defer stop()
	handler := func(_ context.Context, m *client.Message) error {
		at := time.Since(start).Round(time.Millisecond)
		switch {
		case m.Occurrence() != nil:
			fmt.Fprintf(out, "%8v  occurrence #%d (due %v) %s\n", at, m.Occurrence().GetOrdinal(),
				time.UnixMicro(m.Occurrence().GetNominalDueAtUnixMicros()).Sub(start).Round(time.Millisecond), m.Payload())
		case m.SagaTimeout() != nil:
			fmt.Fprintf(out, "%8v  saga timeout %s\n", at, m.Payload())
		}
		return nil
	}
	done := make(chan error, 2)
	for _, queue := range []string{"jobs", "timeouts"} {
		w := c.NewWorker(client.WorkerConfig{Namespace: "quickstart", Queue: queue, Handler: handler, Wait: 5 * time.Second})
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
