package duecoordinator

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/duecoordinator/backoff"
	"github.com/orreryhq/orrery/grains/input"
)

// dispatchOutcome is what the receipts of one round's commands say about the partition.
type dispatchOutcome struct {
	// backlog is set when a schedule still has occurrences due at the command's logged time
	// (EmitOccurrences stopped at its max).
	backlog bool
	// wakeAt is the earliest next due instant the results reported, on the coordinator's clock.
	wakeAt time.Time
}

// dispatch sends a round's refs as one due command. Its mutations stand alone (a full lane
// fails only the emit into it), and the partition bounds what it enqueues in all
// (batch.DueBatchOccurrences): refs it left due are a backlog, served by the next rounds. A
// command refused or failed as a whole is resent one ref per command, so one bad ref does not
// block the others. An error return means a call failed; per-ref outcomes never do.
func (c *Coordinator) dispatch(ctx context.Context, partitionID int, refs []*orreryv1.DueRef, skips *backoff.Backoff) (dispatchOutcome, error) {
	var out dispatchOutcome
	refs = c.dropUnknownKinds(partitionID, refs, skips)
	if len(refs) == 0 {
		return out, nil
	}
	receipt, sentAt, err := c.send(ctx, partitionID, refs)
	if err != nil {
		// A command the partition refuses as a whole (Validation: more than one transaction
		// can hold, e.g. large timeout payloads) is resent one ref per command.
		if len(refs) > 1 && orrery.CodeOf(err) == orrery.CodeValidation {
			c.cfg.Logger.Warn("due coordinator: command refused, resending one ref per command", "partition", partitionID, "refs", len(refs), "error", err)
			return c.oneByOne(ctx, partitionID, refs, skips)
		}
		return out, err
	}
	batchErr := orrery.FromProto(receipt.GetError())
	if batchErr == nil {
		return out, c.absorb(&out, partitionID, refs, receipt, sentAt, skips)
	}
	if len(refs) == 1 {
		c.refFailed(partitionID, refs[0], batchErr, sentAt, skips)
		return out, nil
	}
	c.cfg.Logger.Warn("due coordinator: command refused, resending one ref per command", "partition", partitionID, "refs", len(refs), "error", batchErr)
	return c.oneByOne(ctx, partitionID, refs, skips)
}

// oneByOne sends each ref as its own command, so one ref's failure touches no other.
func (c *Coordinator) oneByOne(ctx context.Context, partitionID int, refs []*orreryv1.DueRef, skips *backoff.Backoff) (dispatchOutcome, error) {
	var out dispatchOutcome
	for _, ref := range refs {
		one := []*orreryv1.DueRef{ref}
		receipt, sentAt, err := c.send(ctx, partitionID, one)
		if err != nil {
			return out, err
		}
		if refErr := orrery.FromProto(receipt.GetError()); refErr != nil {
			c.refFailed(partitionID, ref, refErr, sentAt, skips)
			continue
		}
		if err := c.absorb(&out, partitionID, one, receipt, sentAt, skips); err != nil {
			return out, err
		}
	}
	return out, nil
}

// dropUnknownKinds puts refs of a kind this coordinator cannot dispatch on backoff.
func (c *Coordinator) dropUnknownKinds(partitionID int, refs []*orreryv1.DueRef, skips *backoff.Backoff) []*orreryv1.DueRef {
	known := refs[:0:0]
	for _, ref := range refs {
		switch ref.GetKind() {
		case orreryv1.DueKind_DUE_KIND_SCHEDULE, orreryv1.DueKind_DUE_KIND_SAGA:
			known = append(known, ref)
		default:
			c.refFailed(partitionID, ref, orrery.Errorf(orrery.CodeInternal, "due ref of unknown kind %v", ref.GetKind()), c.cfg.Clock.Now(), skips)
		}
	}
	return known
}

// absorb reads the per-mutation results of a receipt that was not rolled back.
func (c *Coordinator) absorb(out *dispatchOutcome, partitionID int, refs []*orreryv1.DueRef, receipt *orreryv1.Receipt, sentAt time.Time, skips *backoff.Backoff) error {
	results := receipt.GetResults()
	if len(results) != len(refs) {
		return orrery.Errorf(orrery.CodeInternal, "receipt %s has %d results for %d mutations", receipt.GetCommandId(), len(results), len(refs))
	}
	logged := receipt.GetLoggedTimeUnixMicros()
	for i, res := range results {
		ref := refs[i]
		if err := orrery.FromProto(res.GetError()); err != nil {
			c.refFailed(partitionID, ref, err, sentAt, skips)
			continue
		}
		skips.Clear(ref)
		c.traceEmitted(partitionID, ref, res.GetSchedule(), sentAt)
		next := res.GetSchedule().GetNextDueAtUnixMicros()
		c.watch.succeeded(partitionID, ref, next, logged, sentAt)
		switch {
		case next == 0:
		case next <= logged:
			out.backlog = true
		default:
			if at := relativeInstant(sentAt, next, logged); out.wakeAt.IsZero() || at.Before(out.wakeAt) {
				out.wakeAt = at
			}
		}
	}
	return nil
}

// refFailed records a ref whose mutation failed and puts it on backoff. Stale tokens are the
// expected outcome of a race (the next scan sees the record's new token, a different ref);
// Expired, Validation, QuotaExceeded, Unauthorized (the record's creator lost its grant:
// the ref stays due, and emits once the grant is restored and its backoff ends) and
// IdempotencyConflict (a saga's timeout id held by a foreign message: the saga stays due until
// the id is free or the saga moves on) are lasting business outcomes; anything else is
// unexpected and logged. The watchdog reports a record
// failing once, when it starts failing or fails for another reason.
func (c *Coordinator) refFailed(partitionID int, ref *orreryv1.DueRef, err error, now time.Time, skips *backoff.Backoff) {
	switch orrery.CodeOf(err) {
	case orrery.CodeTokenInvalidated, orrery.CodeRevisionConflict, orrery.CodeNotFound:
		c.counts.stale.Add(1)
		c.watch.movedOn(ref, now)
		skips.Skip(ref, now)
		return
	case orrery.CodeExpired, orrery.CodeValidation, orrery.CodeQuotaExceeded, orrery.CodeUnauthorized, orrery.CodeIdempotencyConflict:
		c.counts.skipped.Add(1)
	default:
		c.counts.skipped.Add(1)
		c.counts.errors.Add(1)
		c.cfg.Logger.Warn("due coordinator: ref failed", "partition", partitionID, "kind", ref.GetKind(), "id", ref.GetId(), "token", ref.GetToken(), "error", err)
	}
	c.watch.failed(partitionID, ref, err, now)
	skips.Skip(ref, now)
}

// send submits refs as one due command with a fresh command id. A retriable failure is
// retried once with the same id: a due command keeps no inbox entry, so if the first attempt
// did apply, the retry applies again and its CAS tokens make it harmless (an emit finds nothing
// left due, an expiry a saga already moved on). It returns the receipt and when the attempt
// that got it was sent (see relativeInstant).
func (c *Coordinator) send(ctx context.Context, partitionID int, refs []*orreryv1.DueRef) (*orreryv1.Receipt, time.Time, error) {
	req := &orreryv1.CommandRequest{
		Principal: input.CoordinatorPrincipal, Due: true,
		Batch: &orreryv1.Batch{CommandId: c.cfg.CommandIDPrefix + "-" + strconv.FormatUint(c.nextID.Add(1), 10), Mutations: due.Mutations(refs, c.cfg.EmitMax)},
	}
	c.counts.refs.Add(uint64(len(refs)))
	for attempt := 1; ; attempt++ {
		c.counts.commands.Add(1)
		sentAt := c.cfg.Clock.Now()
		receipt, err := c.command(ctx, partitionID, req)
		if err == nil {
			return receipt, sentAt, nil
		}
		if attempt == 2 || !retriable(ctx, err) {
			return nil, time.Time{}, err
		}
		c.counts.retries.Add(1)
	}
}

// command makes one Command call and decodes its receipt.
func (c *Coordinator) command(ctx context.Context, partitionID int, req *orreryv1.CommandRequest) (*orreryv1.Receipt, error) {
	callCtx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	reply, err := c.cfg.Partitions.Command(callCtx, partitionID, req)
	if err == nil && reply == nil {
		err = orrery.Errorf(orrery.CodeInternal, "Command returned no reply")
	}
	if err == nil {
		err = orrery.FromProto(reply.GetError())
	}
	if err != nil {
		return nil, orrery.Wrap(orrery.CodeOf(err), err, "command %s to partition %d", req.GetBatch().GetCommandId(), partitionID)
	}
	receipt := &orreryv1.Receipt{}
	if err := proto.Unmarshal(reply.GetReceipt(), receipt); err != nil {
		return nil, orrery.Wrap(orrery.CodeInternal, err, "decode receipt of command %s", req.GetBatch().GetCommandId())
	}
	if receipt.GetCommandId() != req.GetBatch().GetCommandId() {
		return nil, orrery.Errorf(orrery.CodeInternal, "partition %d answered command %s with the receipt of %s", partitionID, req.GetBatch().GetCommandId(), receipt.GetCommandId())
	}
	return receipt, nil
}
