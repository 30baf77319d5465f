package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/orreryhq/orrery/client"
)

// CLI defaults of a queue's retry policy (queues retry-policy).
const (
	defaultRetryInitialBackoff = time.Second
	defaultRetryMaxBackoff     = time.Hour
)

// retryPolicy sets or removes a queue's retry policy on every partition
// (client.SetQueueRetryPolicy); a failure names the partitions not reached, and running it
// again is safe.
func (c *command) retryPolicy(ctx context.Context, args []string) error {
	fs := c.flagSet("queues retry-policy")
	var maxAttempts, jitter int
	var initial, ceiling time.Duration
	var onExhausted string
	var remove bool
	fs.IntVar(&maxAttempts, "max-attempts", 0, "attempts before the message is dead-lettered or dropped (0: its max deliveries)")
	fs.DurationVar(&initial, "initial-backoff", defaultRetryInitialBackoff, "the backoff after the first failure, doubling after each")
	fs.DurationVar(&ceiling, "max-backoff", defaultRetryMaxBackoff, "the backoff's cap (default 1h, or --initial-backoff when longer)")
	fs.IntVar(&jitter, "jitter", 0, "the most of each backoff (percent, 0..100) the jitter takes off")
	fs.StringVar(&onExhausted, "on-exhausted", "dead-letter", "what becomes of a message whose attempts are used up: dead-letter or drop")
	fs.BoolVar(&remove, "remove", false, "remove the queue's policy (failures are released by the workers' own delay)")
	positional, err := c.parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 2 {
		return usagef("queues retry-policy: want NAMESPACE QUEUE, got %d arguments", len(positional))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if remove && len(set) > 1 {
		return usagef("queues retry-policy: --remove takes no other flag")
	}
	if !remove && len(set) == 0 {
		return usagef("queues retry-policy: give the policy's flags (--max-attempts, --initial-backoff, --max-backoff, --jitter, --on-exhausted) or --remove")
	}
	var policy *client.MessageRetry
	if !remove {
		policy = &client.MessageRetry{MaxAttempts: maxAttempts, InitialBackoff: initial, MaxBackoff: ceiling, JitterPercent: jitter}
		if !set["max-backoff"] {
			policy.MaxBackoff = max(ceiling, initial)
		}
		switch onExhausted {
		case "dead-letter":
		case "drop":
			policy.OnExhausted = client.RetryDrop
		default:
			return usagef("on-exhausted: want dead-letter or drop, got %q", onExhausted)
		}
	}
	namespace, queue := positional[0], positional[1]
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.SetQueueRetryPolicy(ctx, namespace, queue, policy); err != nil {
		return fmt.Errorf("retry policy of queue %s/%s: %w", namespace, queue, err)
	}
	if c.output == "json" {
		var shown any
		if policy != nil {
			shown = map[string]any{"max_attempts": policy.MaxAttempts, "initial_backoff": policy.InitialBackoff.String(),
				"max_backoff": policy.MaxBackoff.String(), "jitter_percent": policy.JitterPercent, "on_exhausted": policy.OnExhausted.String()}
		}
		return writeJSON(c.stdout, map[string]any{"namespace": namespace, "queue": queue, "policy": shown, "partitions": cl.Partitions()})
	}
	if policy == nil {
		fmt.Fprintf(c.stdout, "removed the retry policy of queue %s/%s on all %d partitions\n", namespace, queue, cl.Partitions())
		return nil
	}
	fmt.Fprintf(c.stdout, "set the retry policy of queue %s/%s on all %d partitions: %s\n", namespace, queue, cl.Partitions(), describeRetry(policy))
	return nil
}

// describeRetry renders a policy in one line.
func describeRetry(p *client.MessageRetry) string {
	attempts := "the message's max deliveries"
	if p.MaxAttempts > 0 {
		attempts = fmt.Sprintf("%d attempts", p.MaxAttempts)
	}
	return fmt.Sprintf("backoff %s doubling to %s, jitter %d%%; after %s, %s", p.InitialBackoff, p.MaxBackoff, p.JitterPercent, attempts, p.OnExhausted)
}
