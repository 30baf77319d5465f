// Command jobs shows typed jobs on Orrery: it enqueues Go values on two queues of a namespace
// (client.Enqueue), and one worker serves both (client.Handle), each queue with its own
// options: emails one at a time, thumbnails four at a time, a failed thumbnail retried after an
// exponential backoff. It prints each job as it is handled and stops once all are done.
//
//	go run ./examples/jobs                            # embedded silo, data in a temp dir
//	go run ./examples/jobs --seeds 127.0.0.1:7382     # against `make run`
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/silo"
)

// Email is the job of the "emails" queue.
type Email struct {
	To, Subject string
}

// Thumbnail is the job of the "thumbnails" queue.
type Thumbnail struct {
	Image string
	Width int
}

func main() {
	seeds := flag.String("seeds", "", "gossip address of a running silo (empty: start an embedded one)")
	flag.Parse()
	if err := run(os.Stdout, *seeds); err != nil {
		fmt.Fprintln(os.Stderr, "jobs:", err)
		os.Exit(1)
	}
}

// run enqueues the jobs on seeds' cluster (empty: an embedded silo) and handles them.
func run(out io.Writer, seeds string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var c *client.Client
	if seeds == "" {
		dir, err := os.MkdirTemp("", "orrery-jobs-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		s, err := silo.Start(ctx, silo.Config{DataDir: dir, Admin: "127.0.0.1:0", Logger: quiet, InsecureDev: true})
		if err != nil {
			return err
		}
		defer s.Stop()
		c = s.Client()
	} else {
		var err error
		if c, err = client.Dial(ctx, client.DialConfig{Seeds: []string{seeds}, Options: client.Options{Logger: quiet}}); err != nil {
			return err
		}
		defer c.Close()
	}
	namespace := "jobs-" + uuid.NewString()[:8] // a run of its own

	for _, to := range []string{"ada@example.com", "grace@example.com"} {
		if _, err := client.Enqueue(ctx, c.Queue(namespace, "emails"), Email{To: to, Subject: "welcome"}, client.EnqueueOptions{}); err != nil {
			return err
		}
	}
	for _, image := range []string{"cat.png", "dog.png", "owl.png"} {
		if _, err := client.Enqueue(ctx, c.Queue(namespace, "thumbnails"), Thumbnail{Image: image, Width: 128}, client.EnqueueOptions{}); err != nil {
			return err
		}
	}

	var (
		mu      sync.Mutex
		pending = 5
		failed  bool
	)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
		if pending--; pending == 0 {
			stop()
		}
	}
	w := c.NewWorker(client.WorkerConfig{Namespace: namespace})
	client.Handle(w, "emails", func(ctx context.Context, j *client.Job[Email]) error {
		done("email %q to %s", j.Args.Subject, j.Args.To)
		return nil // acked
	}, client.HandlerOptions{Concurrency: 1})
	client.Handle(w, "thumbnails", func(ctx context.Context, j *client.Job[Thumbnail]) error {
		mu.Lock()
		fail := j.Args.Image == "owl.png" && !failed
		failed = failed || fail
		mu.Unlock()
		if fail { // released, and delivered again after the backoff
			fmt.Fprintf(out, "thumbnail of %s failed at delivery %d, retried\n", j.Args.Image, j.DeliveryCount())
			return errors.New("the image store is busy")
		}
		done("thumbnail of %s at %d px (delivery %d)", j.Args.Image, j.Args.Width, j.DeliveryCount())
		return nil
	}, client.HandlerOptions{Concurrency: 4, Backoff: client.ExponentialBackoff(200*time.Millisecond, 10*time.Second)})
	if err := w.Run(runCtx); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%d jobs not handled within a minute", pending)
	}
	fmt.Fprintln(out, "all jobs handled")
	return nil
}
