package main

import (
	"context"
	"fmt"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// enqueueMessage sends one message to a lane (client.Enqueue) and says whether it was stored,
// was there already (its id), or was skipped as a duplicate of the message holding its unique
// key (--unique-key, --unique-by-payload). The --retry- flags give the message its own retry
// policy.
func (c *command) enqueueMessage(ctx context.Context, args []string) error {
	fs := c.flagSet("messages enqueue")
	var id, payload, headers, orderingKey, uniqueKey string
	var delay, ttl, uniqueFor time.Duration
	var maxDeliveries, priority int
	var byPayload bool
	fs.StringVar(&id, "id", "", "message id, which makes the enqueue idempotent in its lane (default: a fresh UUID)")
	fs.StringVar(&payload, "payload", "", "payload, a JSON value (default: none)")
	fs.StringVar(&headers, "headers", "", "headers, a JSON object (default: none)")
	fs.StringVar(&orderingKey, "ordering-key", "", "deliver the queue's messages with this key one at a time")
	fs.DurationVar(&delay, "delay", 0, "keep the message invisible for this long")
	fs.DurationVar(&ttl, "ttl", 0, "expire the message if not received this long after it is visible (0: never)")
	fs.IntVar(&maxDeliveries, "max-deliveries", 0, "dead-letter after this many deliveries (0: the partition's default)")
	fs.IntVar(&priority, "priority", 0, "the message's priority, 0..9, higher first (README \"Priorities\")")
	fs.StringVar(&uniqueKey, "unique-key", "", "skip the enqueue as a duplicate while the lane holds a message under this unique key")
	fs.BoolVar(&byPayload, "unique-by-payload", false, "as --unique-key, keyed by the payload and headers")
	var retry retryFlags
	retry.define(fs, "retry-")
	fs.DurationVar(&uniqueFor, "unique-for", 0, "hold the unique key this long from the enqueue (0: while the message is live; at most 720h)")
	positional, err := c.parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 3 {
		return usagef("messages enqueue: want NAMESPACE QUEUE KEY, got %d arguments", len(positional))
	}
	m := &orreryv1.Enqueue{
		Lane: &orreryv1.Lane{Namespace: positional[0], Queue: positional[1], Key: positional[2]}, Id: id,
		PayloadJson: payload, HeadersJson: headers, OrderingKey: orderingKey,
		DelayMicros: delay.Microseconds(), TimeToLiveMicros: ttl.Microseconds(), MaxDeliveries: int32(min(maxDeliveries, 1<<31-1)),
		Priority: int32(min(max(priority, -1), 10)),
	}
	if set := flagsGiven(fs); retry.given(set) {
		policy, err := retry.policy(set)
		if err != nil {
			return err
		}
		m.Retry = policy.Proto()
	}
	switch {
	case uniqueKey != "" && byPayload:
		return usagef("messages enqueue: --unique-key and --unique-by-payload exclude each other")
	case uniqueKey != "":
		m.Unique = client.Unique(uniqueKey, uniqueFor)
	case byPayload:
		m.Unique = client.UniqueByPayload(uniqueFor)
	case uniqueFor != 0:
		return usagef("messages enqueue: --unique-for needs --unique-key or --unique-by-payload")
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := cl.Enqueue(ctx, m)
	if err != nil {
		return fmt.Errorf("enqueue to %s/%s/%s: %w", positional[0], positional[1], positional[2], err)
	}
	if c.output == "json" {
		out := map[string]any{"id": res.GetId(), "created": res.GetCreated()}
		if holder := res.GetDuplicateOf(); holder != "" {
			out["duplicate_of"] = holder
		}
		return writeJSON(c.stdout, out)
	}
	switch {
	case res.GetDuplicateOf() != "":
		fmt.Fprintf(c.stdout, "skipped message %s as a duplicate: message %s holds its unique key in the lane\n", res.GetId(), res.GetDuplicateOf())
	case res.GetCreated():
		fmt.Fprintf(c.stdout, "enqueued message %s\n", res.GetId())
	default:
		fmt.Fprintf(c.stdout, "message %s was there already: nothing stored\n", res.GetId())
	}
	return nil
}
