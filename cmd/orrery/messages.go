package main

import (
	"context"
	"fmt"
	"strings"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// messages runs a messages subcommand.
func (c *command) messages(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("messages: a subcommand is required: enqueue or cancel")
	}
	switch args[0] {
	case "enqueue":
		return c.enqueueMessage(ctx, args[1:]) // enqueue.go
	case "cancel":
		return c.cancelMessage(ctx, args[1:])
	}
	return usagef("messages: unknown subcommand %q", args[0])
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
