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

// retryFlags are the flags of a retry policy (client.MessageRetry): unprefixed for queues
// retry-policy, prefixed "retry-" where a message (messages enqueue) or a schedule's
// occurrences (schedules create and update) carry a policy of their own.
type retryFlags struct {
	prefix              string
	maxAttempts, jitter int
	initial, ceiling    time.Duration
	onExhausted         string
}

// define adds the flags to fs, each name prefixed by prefix.
func (r *retryFlags) define(fs *flag.FlagSet, prefix string) {
	r.prefix = prefix
	fs.IntVar(&r.maxAttempts, prefix+"max-attempts", 0, "attempts before the message is dead-lettered or dropped (0: its max deliveries)")
	fs.DurationVar(&r.initial, prefix+"initial-backoff", defaultRetryInitialBackoff, "the backoff after the first failure, doubling after each")
	fs.DurationVar(&r.ceiling, prefix+"max-backoff", defaultRetryMaxBackoff, "the backoff's cap (default 1h, or the initial backoff when longer)")
	fs.IntVar(&r.jitter, prefix+"jitter", 0, "the most of each backoff (percent, 0..100) the jitter takes off")
	fs.StringVar(&r.onExhausted, prefix+"on-exhausted", "dead-letter", "what becomes of a message whose attempts are used up: dead-letter or drop")
}

// given reports whether any flag of the policy is in set (the flags given).
func (r *retryFlags) given(set map[string]bool) bool {
	for _, name := range []string{"max-attempts", "initial-backoff", "max-backoff", "jitter", "on-exhausted"} {
		if set[r.prefix+name] {
			return true
		}
	}
	return false
}

// policy is the policy the flags give (set: the flags given; a flag not given keeps its
// default), or a usage error naming the flag.
func (r *retryFlags) policy(set map[string]bool) (*client.MessageRetry, error) {
	policy := &client.MessageRetry{MaxAttempts: r.maxAttempts, InitialBackoff: r.initial, MaxBackoff: r.ceiling, JitterPercent: r.jitter}
	if !set[r.prefix+"max-backoff"] {
		policy.MaxBackoff = max(r.ceiling, r.initial)
	}
	switch r.onExhausted {
	case "dead-letter":
	case "drop":
		policy.OnExhausted = client.RetryDrop
	default:
		return nil, usagef("%son-exhausted: want dead-letter or drop, got %q", r.prefix, r.onExhausted)
	}
	return policy, nil
}

// flagsGiven returns the names of the flags of fs that were set.
func flagsGiven(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// retryPolicy sets or removes a queue's retry policy on every partition
// (client.SetQueueRetryPolicy); a failure names the partitions not reached, and running it
// again is safe.
func (c *command) retryPolicy(ctx context.Context, args []string) error {
	fs := c.flagSet("queues retry-policy")
	var flags retryFlags
	flags.define(fs, "")
	var remove bool
	fs.BoolVar(&remove, "remove", false, "remove the queue's policy (failures are released by the workers' own delay)")
	positional, err := c.parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 2 {
		return usagef("queues retry-policy: want NAMESPACE QUEUE, got %d arguments", len(positional))
	}
	set := flagsGiven(fs)
	if remove && len(set) > 1 {
		return usagef("queues retry-policy: --remove takes no other flag")
	}
	if !remove && len(set) == 0 {
		return usagef("queues retry-policy: give the policy's flags (--max-attempts, --initial-backoff, --max-backoff, --jitter, --on-exhausted) or --remove")
	}
	var policy *client.MessageRetry
	if !remove {
		if policy, err = flags.policy(set); err != nil {
			return err
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
