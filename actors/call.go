package actors

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	protocluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
)

// What cluster.Request (protoactor-go v0.0.0-20240822202345-3c0e61ca19c9,
// cluster/default_context.go) does, and why Call wraps it the way it does:
//
//   - It builds a fresh GrainCallConfig per call (NewGrainCallOptions), so options passed to it
//     do not leak. RequestFuture instead mutates a package-global config shared by every
//     cluster in the process; Call never uses it.
//   - Its timeout is a context.WithTimeout(Background) checked only between attempts, and each
//     attempt first resolves the PID. With disthash that resolution is a RequestFuture to the
//     owner's placement actor with a hard-coded 5 s timeout, so one attempt can take 5 s plus
//     the request timeout whatever WithTimeout says. Call therefore runs each attempt in a
//     goroutine and stops waiting for it at the attempt deadline (the abandoned attempt ends by
//     itself within those bounds; its reply, if any, is dropped, so commands must be
//     idempotent, which docs/design.md §3 requires anyway).
//   - With WithRetryCount(1) every transport failure surfaces as a plain error, not as the
//     original one: a nil PID, actor/remote ErrTimeout or ErrDeadLetter bump the counter and
//     the loop then returns either "have reached max retries: 1" (an unwrapped fmt error) or,
//     when its own context has expired by then (the usual case after a future timeout, since
//     both use the same duration), "request failed: %w" wrapping context.DeadlineExceeded. That
//     inner DeadlineExceeded is protoactor's per-attempt timer, not the caller's context.
//     Future errors other than timeout and dead letter are returned as they are (none exist in
//     this version). Call treats every error from Request as a retriable attempt failure.
//   - A nil reply with a nil error is retried inside Request until its timeout, then reported
//     as above. A non-nil reply ends the loop with a nil error even if it is a
//     *cluster.GrainErrorResponse: grain errors are replies, never errors. Call turns a
//     GrainErrorResponse into an error: Reason UNAVAILABLE is retried, any other reason is
//     returned (wrapped in orrery Internal, reachable with errors.As).
//   - Request logs at ERROR ("cluster.RequestFuture failed") for every timeout or dead letter,
//     and its Debug log calls reflect.TypeOf(message).String(), which panics for a nil
//     interface; Call rejects a nil message up front and recovers a panicking attempt.

// CallOptions tune Call. The zero value is usable.
type CallOptions struct {
	// AttemptTimeout bounds one attempt, PID lookup included (default 2 s). It is also passed to
	// cluster.WithTimeout. An attempt never outlives the call's deadline.
	AttemptTimeout time.Duration
	// MaxAttempts gives up with ErrUnavailable after this many attempts (0: retry until the
	// deadline).
	MaxAttempts int
	// Backoff is the wait schedule between attempts (zero: DefaultBackoff).
	Backoff Backoff
	// Jitter returns samples in [0, 1) for Backoff.Delay (nil: math/rand/v2). Tests inject a
	// fixed or recorded source.
	Jitter func() float64
	// DefaultTimeout bounds the whole call when ctx has no deadline (default 10 s), so a call
	// never retries forever.
	DefaultTimeout time.Duration
	// RetryReply classifies a successful reply: a non-nil error means the grain answered
	// "unavailable, try again" in its own message type (for example a reply carrying an
	// Unavailable orrery error); Call then retries and reports that error if it gives up.
	RetryReply func(reply proto.Message) error
	// OnAttempt, when set, is called after each failed attempt with its number (from 1) and
	// error; for logs and tests.
	OnAttempt func(attempt int, err error)
	// Pool runs the attempts (nil: a new goroutine each).
	Pool *Pool
}

// Defaults used when a CallOptions field is zero.
const (
	DefaultAttemptTimeout = 2 * time.Second
	DefaultCallTimeout    = 10 * time.Second
)

// errAttemptTimeout reports an attempt that did not finish within its own deadline.
var errAttemptTimeout = errors.New("attempt timed out")

// errNilReply reports an attempt that returned neither a reply nor an error.
var errNilReply = errors.New("nil reply")

func (o CallOptions) withDefaults() CallOptions {
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = DefaultCallTimeout
	}
	if o.Jitter == nil {
		o.Jitter = rand.Float64
	}
	o.Backoff = o.Backoff.withDefaults()
	return o
}

// Call sends msg to the grain identity of kind through c and returns its reply.
//
// The deadline is ctx's (or DefaultTimeout when ctx has none). Each attempt is one
// cluster.Request with WithRetryCount(1) and WithTimeout(attempt timeout), waited for at most
// the attempt timeout. Timeouts, dead letters, unresolvable PIDs, nil replies, UNAVAILABLE
// grain errors and replies rejected by RetryReply are retried after a Backoff delay.
//
// Errors: when MaxAttempts is exhausted Call returns an error matching orrery.ErrUnavailable
// (errors.Is) that wraps the last attempt's error; when the deadline passes first it returns
// one matching orrery.ErrDeadlineExceeded (and context.DeadlineExceeded when ctx's own
// deadline expired); when ctx is cancelled it returns an error wrapping context.Canceled. A
// non-retriable grain error is returned at once as orrery Internal wrapping the
// *cluster.GrainErrorResponse.
func Call(ctx context.Context, c *protocluster.Cluster, identity, kind string, msg proto.Message, opts CallOptions) (proto.Message, error) {
	if msg == nil {
		return nil, orrery.Errorf(orrery.CodeInternal, "call %s/%s: nil message", kind, identity)
	}
	opts = opts.withDefaults()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.DefaultTimeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()

	var lastErr error
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			return nil, expired(ctx, kind, identity, attempt-1, lastErr)
		}
		attemptTimeout := min(opts.AttemptTimeout, time.Until(deadline))
		if attemptTimeout <= 0 {
			return nil, expired(ctx, kind, identity, attempt-1, lastErr)
		}
		raw, err := requestOnce(ctx, opts.Pool, c, identity, kind, msg, attemptTimeout)
		if err == nil {
			reply, retryErr, fatal := classifyReply(kind, identity, raw, opts.RetryReply)
			if fatal != nil {
				return nil, fatal
			}
			if retryErr == nil {
				return reply, nil
			}
			err = retryErr
		}
		if ctx.Err() != nil {
			// The attempt ended because the call's deadline passed.
			return nil, expired(ctx, kind, identity, attempt, err)
		}
		lastErr = err
		if opts.OnAttempt != nil {
			opts.OnAttempt(attempt, err)
		}
		if opts.MaxAttempts > 0 && attempt >= opts.MaxAttempts {
			return nil, orrery.Wrap(orrery.CodeUnavailable, lastErr,
				"call %s/%s: gave up after %d attempts", kind, identity, attempt)
		}
		wait := time.NewTimer(opts.Backoff.Delay(attempt-1, opts.Jitter()))
		select {
		case <-ctx.Done():
			wait.Stop()
			return nil, expired(ctx, kind, identity, attempt, lastErr)
		case <-wait.C:
		}
	}
}

// attemptResult carries one cluster.Request outcome out of its goroutine.
type attemptResult struct {
	reply any
	err   error
}

// requestOnce runs one single-attempt cluster.Request and waits for it at most timeout (or
// until ctx ends). The goroutine's channel is buffered, so an abandoned attempt does not leak
// a blocked goroutine.
func requestOnce(ctx context.Context, pool *Pool, c *protocluster.Cluster, identity, kind string, msg proto.Message, timeout time.Duration) (any, error) {
	done := make(chan attemptResult, 1)
	run := func(fn func()) { go fn() }
	if pool != nil {
		run = pool.Go
	}
	run(func() {
		defer func() {
			if r := recover(); r != nil {
				done <- attemptResult{err: fmt.Errorf("cluster.Request panicked: %v", r)}
			}
		}()
		reply, err := c.Request(identity, kind, msg,
			protocluster.WithRetryCount(1),
			protocluster.WithTimeout(timeout),
			protocluster.WithRetryAction(func(i int) int { return i + 1 }),
		)
		done <- attemptResult{reply: reply, err: err}
	})
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.reply, r.err
	case <-timer.C:
		return nil, errAttemptTimeout
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// classifyReply sorts a non-error Request outcome into a reply to return, an error to retry,
// or an error to return at once.
func classifyReply(kind, identity string, raw any, retryReply func(proto.Message) error) (reply proto.Message, retryErr, fatal error) {
	switch r := raw.(type) {
	case nil:
		return nil, errNilReply, nil
	case *protocluster.GrainErrorResponse:
		if r.GetReason() == protocluster.ErrorReason_UNAVAILABLE {
			return nil, r, nil
		}
		return nil, nil, orrery.Wrap(orrery.CodeInternal, r, "call %s/%s: grain error", kind, identity)
	case proto.Message:
		if retryReply != nil {
			if err := retryReply(r); err != nil {
				return nil, err, nil
			}
		}
		return r, nil, nil
	default:
		return nil, nil, orrery.Errorf(orrery.CodeInternal, "call %s/%s: reply of type %T is not a proto message", kind, identity, raw)
	}
}

// expired builds the error for a call whose context ended after attempts attempts.
func expired(ctx context.Context, kind, identity string, attempts int, lastErr error) error {
	cause := ctx.Err()
	if lastErr != nil && !errors.Is(lastErr, cause) {
		cause = errors.Join(cause, lastErr)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return orrery.Wrap(orrery.CodeDeadlineExceeded, cause,
			"call %s/%s: deadline passed after %d attempts", kind, identity, attempts)
	}
	return fmt.Errorf("call %s/%s: cancelled after %d attempts: %w", kind, identity, attempts, cause)
}
