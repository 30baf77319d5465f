package main

import (
	"context"
	"fmt"
	"log"
	"os/signal"
	"syscall"

	"github.com/orreryhq/orrery/client"
)

type invoice struct{ Customer string }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := client.Dial(ctx, client.DialConfig{Seeds: []string{"127.0.0.1:7382"}})
	if err != nil {
		log.Fatal(err) // names each seed and what it answered
	}
	defer c.Close()
	// Declared at every start: created the first time, left alone while it is unchanged.
	schedule, err := c.Schedules("billing").Upsert(ctx, "invoice customer-42", client.ScheduleOptions{
		Queue: "invoices", Key: "customer-42", Spec: client.Cron("*/5 * * * * *", "UTC"), // every 5 s
		Payload: invoice{Customer: "customer-42"}}) // JSON, decoded back by the worker
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("schedule", schedule.ID())
	w := c.NewWorker(client.WorkerConfig{Namespace: "billing"}) // serves the queues it handles
	client.Handle(w, "invoices", func(ctx context.Context, j *client.Job[invoice]) error {
		fmt.Println(j.ID(), "invoice for", j.Args.Customer)
		return nil // nil acks; an error releases the message for redelivery
	})
	if err := w.Run(ctx); err != nil { // until Ctrl-C
		log.Fatal(err)
	}
}
