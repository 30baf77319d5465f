package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/route"
	"github.com/orreryhq/orrery/tracing"
)

// command sends one batch to partition with the retry policy and decodes its receipt. Every
// attempt sends the same request, so every retry carries the same command id. A batch beyond
// the client's Limits fails with Validation before the first attempt. A waiting request
// (wait > 0, a batch of one Receive) is answered with its receipt once it leased, or without
// one (receipt nil) when its wait ended first.
func (c *Client) command(ctx context.Context, partition int, mutations []*orreryv1.Mutation, o callOptions, wait time.Duration) (receipt *orreryv1.Receipt, raw []byte, err error) {
	req := c.request(mutations, o)
	req.WaitMicros = wait.Microseconds()
	return c.submit(ctx, partition, req, o)
}

// request is the CommandRequest of mutations under o, on behalf of the client's principal.
func (c *Client) request(mutations []*orreryv1.Mutation, o callOptions) *orreryv1.CommandRequest {
	return &orreryv1.CommandRequest{
		Principal: c.principal,
		Batch:     &orreryv1.Batch{CommandId: o.commandID, Mutations: mutations, AllOrNothing: o.allOrNothing},
	}
}

// submit sends req to partition with the retry policy, as command does. A reply with neither
// receipt nor error (a waiting request whose wait ended, an abandon that found nothing
// leased) yields a nil receipt.
func (c *Client) submit(ctx context.Context, partition int, req *orreryv1.CommandRequest, o callOptions) (receipt *orreryv1.Receipt, raw []byte, err error) {
	if err := c.checkPartition(partition); err != nil {
		return nil, nil, err
	}
	if err := c.checkSizes(req); err != nil {
		return nil, nil, err
	}
	mayBeEmpty := req.GetWaitMicros() > 0 || req.GetAbandon()
	ctx, span := c.tracer.Start(ctx, tracing.CommandSpanName, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		tracing.AttrPartition.Int(partition), tracing.AttrCommandID.String(o.commandID), tracing.AttrMutations.Int(len(req.GetBatch().GetMutations()))))
	defer func() { tracing.EndWithError(span, err) }()
	attempts := 0
	err = c.retrying(ctx, "command", partition, o.onRetry, func() error {
		if attempts++; attempts > 1 && o.shortRetries && req.GetWaitMicros() > 0 {
			req = proto.CloneOf(req)
			req.WaitMicros = 0
		}
		reply, err := c.transport.Command(ctx, partition, req)
		if err != nil {
			return transportError(err)
		}
		if reply == nil {
			return orrery.Errorf(orrery.CodeUnavailable, "transport returned no command reply")
		}
		if reply.GetError() != nil {
			return orrery.FromProto(reply.GetError())
		}
		if mayBeEmpty && len(reply.GetReceipt()) == 0 {
			receipt, raw = nil, nil
			return nil
		}
		receipt, raw, err = decodeReceipt(reply.GetReceipt(), o.commandID)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if o.receipt != nil && receipt != nil {
		*o.receipt = Receipt{Receipt: receipt, Bytes: raw}
	}
	return receipt, raw, nil
}

// inspect sends one read to partition with the retry policy, on behalf of the client's
// principal.
func (c *Client) inspect(ctx context.Context, partition int, req *orreryv1.InspectRequest) (*orreryv1.InspectReply, error) {
	if err := c.checkPartition(partition); err != nil {
		return nil, err
	}
	req.Principal = c.principal
	if d, ok := ctx.Deadline(); ok {
		req.BudgetMicros = max(time.Until(d).Microseconds(), 1)
	}
	ctx, span := c.tracer.Start(ctx, tracing.InspectSpanName, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(tracing.AttrPartition.Int(partition)))
	var reply *orreryv1.InspectReply
	err := c.retrying(ctx, "inspect", partition, nil, func() error {
		r, err := c.transport.Inspect(ctx, partition, req)
		if err != nil {
			return transportError(err)
		}
		if r == nil {
			return orrery.Errorf(orrery.CodeUnavailable, "transport returned no inspect reply")
		}
		if r.GetError() != nil {
			return orrery.FromProto(r.GetError())
		}
		reply = r
		return nil
	})
	tracing.EndWithError(span, err)
	return reply, err
}

// retrying runs attempt until it succeeds, fails with a code that is not retriable, the
// policy's attempts are spent, or ctx ends. attempt returns *orrery.Error values. onRetry, when
// set, hears of every retriable failure before its backoff.
func (c *Client) retrying(ctx context.Context, op string, partition int, onRetry func(error), attempt func() error) error {
	if c.asErr != nil {
		return c.asErr
	}
	var lastErr error
	for n := 0; ; n++ {
		if ctx.Err() != nil {
			return stopped(ctx, op, partition, n, lastErr)
		}
		err := attempt()
		if err == nil {
			return nil
		}
		if !orrery.Retriable(orrery.CodeOf(err)) {
			return err
		}
		if ctx.Err() != nil {
			return stopped(ctx, op, partition, n+1, err)
		}
		lastErr = err
		if onRetry != nil {
			onRetry(err)
		}
		if c.retry.MaxAttempts > 0 && n+1 >= c.retry.MaxAttempts {
			return orrery.Wrap(orrery.CodeUnavailable, err, "%s on partition %d: gave up after %d attempts", op, partition, n+1)
		}
		delay := c.retry.Delay(n, c.retry.Jitter())
		c.log.DebugContext(ctx, "orrery client: retrying", "op", op, "partition", partition, "attempt", n+1, "delay", delay, "err", err)
		fired, timer := c.after(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return stopped(ctx, op, partition, n+1, lastErr)
		case <-fired:
		}
	}
}

// stopped is the error of a call whose context ended: DeadlineExceeded for an expired
// deadline, Unavailable for a cancellation (the outcome is unknown). Either wraps ctx.Err(),
// so errors.Is also matches context.DeadlineExceeded or context.Canceled. The last attempt's
// error is named in the message.
func stopped(ctx context.Context, op string, partition, attempts int, lastErr error) error {
	detail := ""
	if lastErr != nil && !errors.Is(lastErr, ctx.Err()) {
		detail = fmt.Sprintf(" (last error: %v)", lastErr)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return orrery.Wrap(orrery.CodeDeadlineExceeded, ctx.Err(), "%s on partition %d: deadline passed after %d attempts%s", op, partition, attempts, detail)
	}
	return orrery.Wrap(orrery.CodeUnavailable, ctx.Err(), "%s on partition %d: cancelled after %d attempts, outcome unknown%s", op, partition, attempts, detail)
}

// transportError classifies a transport failure: Orrery errors keep their code, an attempt
// deadline is DeadlineExceeded, anything else is Unavailable.
func transportError(err error) error {
	var e *orrery.Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, context.DeadlineExceeded):
		return orrery.Wrap(orrery.CodeDeadlineExceeded, err, "attempt deadline exceeded")
	default:
		return orrery.Wrap(orrery.CodeUnavailable, err, "transport")
	}
}

// decodeReceipt decodes a reply's receipt and checks that it answers commandID.
func decodeReceipt(raw []byte, commandID string) (*orreryv1.Receipt, []byte, error) {
	receipt := &orreryv1.Receipt{}
	if err := proto.Unmarshal(raw, receipt); err != nil {
		return nil, nil, orrery.Wrap(orrery.CodeInternal, err, "decode receipt")
	}
	if receipt.GetCommandId() != commandID {
		return nil, nil, orrery.Errorf(orrery.CodeInternal, "receipt answers command %q, not %q", receipt.GetCommandId(), commandID)
	}
	return receipt, raw, nil
}

// checkPartition rejects a partition outside [0, P).
func (c *Client) checkPartition(partition int) error {
	p := c.transport.Partitions()
	if p <= 0 {
		return orrery.Errorf(orrery.CodeUnavailable, "transport reports %d partitions", p)
	}
	if partition < 0 || partition >= p {
		return orrery.Invalid("partition", "must be between 0 and %d, got %d", p-1, partition)
	}
	return nil
}

// partitionOf routes a lane, reporting a transport without partitions as Unavailable.
func (c *Client) partitionOf(lane *orreryv1.Lane) (int, error) {
	p := c.transport.Partitions()
	if p <= 0 {
		return 0, orrery.Errorf(orrery.CodeUnavailable, "transport reports %d partitions", p)
	}
	return route.Partition(lane, p), nil
}
