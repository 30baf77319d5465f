package main

import (
	"context"
	"fmt"
	"strings"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// messages runs a messages subcommand.
func (c *command) messages(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("messages: a subcommand is required: enqueue or cancel")
	}
	switch args[0] {
	case "enqueue":
		return c.enqueueMessage(ctx, args[1:])
	case "cancel":
		return c.cancelMessage(ctx, args[1:])
	}
	return usagef("messages: unknown subcommand %q", args[0])
}

// enqueueMessage enqueues one message into a lane (client.Queue.EnqueueJSON) and says whether
// it was stored.
func (c *command) enqueueMessage(ctx context.Context, args []string) error {
	fs := c.flagSet("messages enqueue")
	var o client.EnqueueOptions
	var payload string
	fs.StringVar(&o.ID, "id", "", "the message id (default: a fresh UUID); an enqueue of an id already there stores nothing")
	fs.StringVar(&payload, "payload", "", "the payload, a JSON value (default: none)")
	fs.StringVar(&o.HeadersJSON, "headers", "", "the headers, a JSON object (default: none)")
	fs.StringVar(&o.OrderingKey, "ordering-key", "", "deliver the queue's messages with this key one at a time")
	fs.DurationVar(&o.Delay, "delay", 0, "keep the message invisible for this long")
	fs.DurationVar(&o.TimeToLive, "ttl", 0, "expire the message if not received in time (0: never)")
	fs.IntVar(&o.MaxDeliveries, "max-deliveries", 0, "deliveries before the message is dead-lettered (0: the partition's default)")
	fs.IntVar(&o.Priority, "priority", 0, "the message's priority, 0..9, higher first (README \"Priorities\")")
	positional, err := c.parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 3 {
		return usagef("messages enqueue: want NAMESPACE QUEUE KEY, got %d arguments", len(positional))
	}
	o.Key = positional[2]
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	id, created, err := cl.Queue(positional[0], positional[1]).EnqueueJSON(ctx, payload, o)
	if err != nil {
		return fmt.Errorf("enqueue into %s/%s/%s: %w", positional[0], positional[1], positional[2], err)
	}
	if c.output == "json" {
		return writeJSON(c.stdout, map[string]any{"id": id, "created": created})
	}
	if created {
		fmt.Fprintf(c.stdout, "enqueued message %s\n", id)
	} else {
		fmt.Fprintf(c.stdout, "message %s was there already: nothing stored\n", id)
	}
	return nil
}

// cancelMessage cancels one message by id (client.CancelMessage) and says what it did.
func (c *command) cancelMessage(ctx context.Context, args []string) error {
	fs := c.flagSet("messages cancel")
	var reason string
	fs.StringVar(&reason, "reason", "", "why, recorded with the cancel (optional)")
	positional, err := c.parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 4 {
		return usagef("messages cancel: want NAMESPACE QUEUE KEY ID, got %d arguments", len(positional))
	}
	lane := &orreryv1.Lane{Namespace: positional[0], Queue: positional[1], Key: positional[2]}
	id := positional[3]
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := cl.CancelMessage(ctx, lane, id, reason)
	if err != nil {
		return fmt.Errorf("cancel message %s of %s/%s/%s: %w", id, lane.GetNamespace(), lane.GetQueue(), lane.GetKey(), err)
	}
	outcome := strings.ToLower(strings.TrimPrefix(res.GetOutcome().String(), "CANCEL_OUTCOME_"))
	if c.output == "json" {
		return writeJSON(c.stdout, map[string]any{"id": id, "outcome": outcome})
	}
	switch res.GetOutcome() {
	case orreryv1.CancelOutcome_CANCEL_OUTCOME_REMOVED:
		fmt.Fprintf(c.stdout, "cancelled message %s: removed\n", id)
	case orreryv1.CancelOutcome_CANCEL_OUTCOME_LEASE_REVOKED:
		fmt.Fprintf(c.stdout, "cancelled message %s: it was leased; its lease is revoked (its worker's next extension fails) and it is removed when the lease ends\n", id)
	default:
		fmt.Fprintf(c.stdout, "message %s was cancelled or removed already: nothing changed\n", id)
	}
	return nil
}
