package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/queue"
)

// MessageRetry is a retry policy: how a message whose handler failed is retried (apply version 19): the n-th
// failed attempt makes it visible again after min(MaxBackoff, InitialBackoff × 2^(n−1)), less
// a jitter of up to JitterPercent of it that the partition derives from the message and n (the
// same on every replica, different for each message), and once n reaches MaxAttempts the
// message is dead-lettered or dropped (OnExhausted) at once. The partition computes it all from
// its logged time. A handler's policy (WorkerConfig.Retry, HandlerOptions.Retry) wins over the
// message's (EnqueueOptions.Retry, a schedule's or a saga timeout's template), which wins over
// its queue's (Client.SetQueueRetryPolicy). With none, a failed message is released after the
// worker's ReleaseDelay or Backoff and dead-lettered after MaxDeliveries.
type MessageRetry struct {
	// MaxAttempts bounds the deliveries (zero: the message's MaxDeliveries; at most the
	// partition's Limits.MaxMaxDeliveries, 1000 by default). A lease that ends unanswered counts
	// as an attempt.
	MaxAttempts int
	// InitialBackoff is the backoff after the first failure (0..MaxBackoff; microsecond
	// precision).
	InitialBackoff time.Duration
	// MaxBackoff caps the doubling backoff (at most the partition's Limits.MaxDelayMicros, 365
	// days by default).
	MaxBackoff time.Duration
	// JitterPercent (0..100) is the most of each backoff the jitter takes off.
	JitterPercent int
	// OnExhausted is what becomes of a message that used up its attempts (default RetryDeadLetter).
	OnExhausted RetryExhausted
}

// RetryExhausted is what becomes of a message whose attempts are used up.
type RetryExhausted int

const (
	// RetryDeadLetter moves it to its queue's dead-letter queue ("<queue>$dlq"), keeping its
	// last error.
	RetryDeadLetter RetryExhausted = iota
	// RetryDrop removes it; its id stays taken while its tombstone is kept (24 h by default).
	// A schedule's occurrence is ledgered dead-lettered all the same (the reason says dropped).
	RetryDrop
)

// String names the outcome as the CLI spells it.
func (e RetryExhausted) String() string {
	switch e {
	case RetryDeadLetter:
		return "dead-letter"
	case RetryDrop:
		return "drop"
	default:
		return fmt.Sprintf("RetryExhausted(%d)", int(e))
	}
}

// Proto is p on the wire (nil for nil).
func (p *MessageRetry) Proto() *orreryv1.RetryPolicy {
	if p == nil {
		return nil
	}
	return &orreryv1.RetryPolicy{
		MaxAttempts:          wireCount(p.MaxAttempts),
		InitialBackoffMicros: p.InitialBackoff.Microseconds(),
		MaxBackoffMicros:     p.MaxBackoff.Microseconds(),
		JitterPercent:        wireCount(p.JitterPercent),
		// RetryDeadLetter is DEAD_LETTER (1), RetryDrop DROP (2); any other value is none the
		// partition knows, and is refused.
		OnExhausted: orreryv1.RetryExhausted(int32(p.OnExhausted) + 1),
	}
}

// check refuses what no partition takes, whatever its limits, naming the field under field: a
// worker checks its handlers' policy before it runs (a release it refuses would be sent as a
// plain one, see releaseFailedOrPlain).
func (p *MessageRetry) check(field string) error {
	switch {
	case p == nil:
		return nil
	case p.MaxAttempts < 0:
		return orrery.Invalid(field+".max_attempts", "must not be negative, got %d", p.MaxAttempts)
	case p.InitialBackoff < 0:
		return orrery.Invalid(field+".initial_backoff", "must not be negative, got %s", p.InitialBackoff)
	case p.MaxBackoff < p.InitialBackoff:
		return orrery.Invalid(field+".initial_backoff", "must be at most max_backoff (%s), got %s", p.MaxBackoff, p.InitialBackoff)
	case p.JitterPercent < 0 || p.JitterPercent > 100:
		return orrery.Invalid(field+".jitter_percent", "must be between 0 and 100, got %d", p.JitterPercent)
	case p.OnExhausted != RetryDeadLetter && p.OnExhausted != RetryDrop:
		return orrery.Invalid(field+".on_exhausted", "must be RetryDeadLetter or RetryDrop, got %d", int(p.OnExhausted))
	}
	return nil
}

// wireCount is n as a uint32 field; a negative n, or one too large, becomes the largest, which
// the partition refuses naming the field.
func wireCount(n int) uint32 {
	if n < 0 || n > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(n)
}

// MessageRetryOf is a wire policy in Go types (nil for nil).
func MessageRetryOf(w *orreryv1.RetryPolicy) *MessageRetry {
	if w == nil {
		return nil
	}
	p := &MessageRetry{
		MaxAttempts:    int(w.GetMaxAttempts()),
		InitialBackoff: time.Duration(w.GetInitialBackoffMicros()) * time.Microsecond,
		MaxBackoff:     time.Duration(w.GetMaxBackoffMicros()) * time.Microsecond,
		JitterPercent:  int(w.GetJitterPercent()),
	}
	if w.GetOnExhausted() == orreryv1.RetryExhausted_RETRY_EXHAUSTED_DROP {
		p.OnExhausted = RetryDrop
	}
	return p
}

// SetQueueRetryPolicy sets the retry policy of queue (namespace, queue) on every partition (a
// queue spans them all), or removes it when p is nil. Each partition records it with the
// client's principal and its logged time. It returns once every partition has applied it; when
// some could not be reached or refused it, the error names them (PartitionsError) and the
// others keep the new policy: calling it again is safe. An invalid policy is a Validation error
// naming its field ("policy.max_backoff_micros"). It needs QueueConsume and QueuePublish on
// the queue, and apply version 19.
func (c *Client) SetQueueRetryPolicy(ctx context.Context, namespace, queue string, p *MessageRetry, opts ...CallOption) error {
	m := &orreryv1.SetQueueRetryPolicy{Namespace: namespace, Queue: queue, Policy: p.Proto()}
	operation := fmt.Sprintf("set the retry policy of queue %s/%s", namespace, queue)
	if p == nil {
		operation = fmt.Sprintf("remove the retry policy of queue %s/%s", namespace, queue)
	}
	return c.fanOut(ctx, operation, &orreryv1.Mutation{Kind: &orreryv1.Mutation_SetQueueRetryPolicy{SetQueueRetryPolicy: m}}, opts)
}

// Failure is a failed attempt a ReleaseFailed reports.
type Failure struct {
	// Err is the handler's failure: its text, cut to 1 KiB at a UTF-8 boundary, becomes the
	// message's last error (Message.LastError). nil leaves none.
	Err error
	// Delay is how long the message stays invisible when no retry policy is in force (or,
	// without Backoff, in any case).
	Delay time.Duration
	// Backoff lets the partition take the delay from the retry policy in force.
	Backoff bool
	// Retry is the handler's own policy, which wins over the message's and the queue's.
	Retry *MessageRetry
}

// ReleaseFailed returns a received message whose handler failed (apply version 19): the
// message keeps the error and the partition's logged time (Message.LastError, LastFailedAt),
// and under a retry policy (f.Retry, else the message's, else its queue's) it is dead-lettered
// or dropped at once when its attempts are used up, and otherwise, with f.Backoff, visible
// again after the policy's backoff. With no policy in force it is Release with f.Delay.
func (c *Client) ReleaseFailed(ctx context.Context, lane *orreryv1.Lane, id, leaseToken string, f Failure, opts ...CallOption) (*orreryv1.LeaseResult, error) {
	m := &orreryv1.Release{Lane: lane, Id: id, LeaseToken: leaseToken, DelayMicros: f.Delay.Microseconds(),
		Error: failureText(f.Err), Backoff: f.Backoff, Retry: f.Retry.Proto()}
	return c.leaseCall(ctx, lane, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Release{Release: m}}, opts)
}

// failureText is err's text as a message's last error: valid UTF-8 of at most
// queue.MaxLastErrorBytes ("" for nil).
func failureText(err error) string {
	if err == nil {
		return ""
	}
	return queue.TruncateError(strings.ToValidUTF8(err.Error(), "\uFFFD"))
}

// RetryAfter wraps a handler's error to say when its message should be tried again: the Worker
// releases it after delay, whatever the retry policy's backoff would be (the policy's
// MaxAttempts still applies). errors.Is and errors.As see err through it.
func RetryAfter(delay time.Duration, err error) error {
	return &retryAfterError{delay: max(delay, 0), err: err}
}

// retryAfterError is RetryAfter's error.
type retryAfterError struct {
	delay time.Duration
	err   error
}

func (e *retryAfterError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("retry after %s", e.delay)
	}
	return e.err.Error()
}

func (e *retryAfterError) Unwrap() error { return e.err }

// retryAfterOf returns the delay a handler's error asks for (RetryAfter) and whether it asks.
func retryAfterOf(err error) (time.Duration, bool) {
	var ra *retryAfterError
	if errors.As(err, &ra) {
		return ra.delay, true
	}
	return 0, false
}

// releaseFailedOrPlain reports a failed attempt; a partition that does not take failures yet
// (apply version below 19: the release is refused, Validation) gets the plain release instead,
// so a worker of this release keeps working with older clusters.
func (c *Client) releaseFailedOrPlain(ctx context.Context, lane *orreryv1.Lane, id, leaseToken string, f Failure) error {
	_, err := c.ReleaseFailed(ctx, lane, id, leaseToken, f)
	if orrery.CodeOf(err) == orrery.CodeValidation {
		c.log.Debug("orrery worker: the partition refused the failed release, releasing plainly", "id", id, "err", err)
		_, err = c.Release(ctx, lane, id, leaseToken, f.Delay)
	}
	return err
}
