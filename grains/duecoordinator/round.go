package duecoordinator

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/duecoordinator/backoff"
)

// Round limits.
const (
	// maxPagesPerRound bounds the ScanDue pages one round reads to get past refs on backoff.
	maxPagesPerRound = 4
	// failureBackoffInitial and failureBackoffMax bound the wait after a failed round.
	failureBackoffInitial = time.Second
	failureBackoffMax     = 30 * time.Second
	// warnAfterRoundFailures is how many failed rounds of a partition in a row log at DEBUG
	// before one WARN (about 7 s of backoff, 1 + 2 + 4 s, which a leader election or a silo
	// restart does not last); a partition that warned logs one INFO when a round succeeds.
	warnAfterRoundFailures = 4
)

// roundState is what a partition's rounds carry from one to the next. Only the worker serving
// the partition touches it.
type roundState struct {
	// resumeAfter, when set, starts the next round's scan after this due-index key instead of
	// at the oldest ref: the keys before it are refs on backoff the last round paged past.
	resumeAfter []byte
	// failures counts failed rounds since the last good one.
	failures int
	// skips are the refs on backoff.
	skips backoff.Backoff
}

// roundOutcome is what a round tells the scheduler.
type roundOutcome struct {
	// again puts the partition at the back of the queue: more is due now.
	again bool
	// wakeAt is when to serve the partition next, if not again (zero: the safety rescan).
	wakeAt time.Time
	// scanned says nextDueAt and epoch come from a scan.
	scanned   bool
	nextDueAt time.Time
	epoch     uint64
	// failures, skippedRefs and stuckDue copy the round state for Stats and Notify.
	failures    int
	skippedRefs int
	stuckDue    []int64
}

// serve runs one round for p: ScanDue (paging past refs on backoff, at most maxPagesPerRound
// pages), one batch for what is dispatchable, and the decision when to come back.
func (c *Coordinator) serve(ctx context.Context, p *partition) roundOutcome {
	w := &p.round
	w.skips.Prune(c.cfg.Clock.Now())
	c.watch.prune(p.id, c.cfg.Clock.Now())
	var out roundResult
	if err := c.takeDispatchErr(p); err != nil {
		out.failed = err // a dispatch of an earlier round failed: back off before the next
	} else {
		c.counts.rounds.Add(1)
		out = c.round(ctx, p, w)
	}
	now := c.cfg.Clock.Now()
	out.skippedRefs = w.skips.Len()
	out.stuckDue = w.skips.StuckDue(now)
	if out.failed != nil {
		// Back off: neither a backlog nor a ref's retry brings a failing partition back sooner.
		w.failures++
		if ctx.Err() == nil {
			c.counts.errors.Add(1)
			level := slog.LevelDebug
			if w.failures == warnAfterRoundFailures {
				level = slog.LevelWarn
			}
			c.cfg.Logger.Log(ctx, level, "due coordinator: round failed", "partition", p.id, "consecutive_failures", w.failures, "error", out.failed)
		}
		out.again, out.wakeAt, out.failures = false, now.Add(failureBackoff(w.failures)), w.failures
		return out.roundOutcome
	}
	if w.failures >= warnAfterRoundFailures {
		c.cfg.Logger.Info("due coordinator: partition answers again", "partition", p.id, "after_failures", w.failures)
	}
	w.failures = 0
	if at := w.skips.NextRetry(now); !at.IsZero() && (out.wakeAt.IsZero() || at.Before(out.wakeAt)) {
		out.wakeAt = at
	}
	return out.roundOutcome
}

// roundResult is a roundOutcome plus the error that failed the round, if any.
type roundResult struct {
	roundOutcome
	failed error
}

// round scans and dispatches what is due; serve turns its result into scheduling. The round
// does not wait for the dispatch's receipts, which come only once the partition has committed
// and applied the command: the next round may run meanwhile, passing by the refs still being
// sent, so a ref falling due meanwhile, or the next part of a backlog (more due than one round
// takes), is sent without waiting for that commit. At most maxSendingPerPartition dispatches
// of one partition are outstanding; a failed one makes the next round back off.
func (c *Coordinator) round(ctx context.Context, p *partition, w *roundState) roundResult {
	partitionID := p.id
	var out roundResult
	// Take a dispatch slot before scanning, so the scan sees what is due when its command can
	// go: waiting after it would send refs that were due then and leave the ones that fell due
	// meanwhile for another round.
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		out.failed = ctx.Err()
		return out
	}
	dispatched := false
	defer func() {
		if !dispatched {
			<-p.slots
		}
	}()
	after := w.resumeAfter
	var reply *orreryv1.ScanDueReply
	var refs []*orreryv1.DueRef
	var scannedAt time.Time
	passedSending := false
	for page := 0; page < maxPagesPerRound; page++ {
		sentAt := c.cfg.Clock.Now()
		r, err := c.scan(ctx, partitionID, after)
		if err != nil {
			out.failed = err
			return out
		}
		if r.GetMore() && len(r.GetRefs()) == 0 {
			// A page that makes no progress would be asked for again and again.
			out.failed = orrery.Errorf(orrery.CodeInternal, "partition %d answered ScanDue with more=true and no refs", partitionID)
			return out
		}
		reply, scannedAt = r, sentAt
		c.watch.observe(partitionID, r.GetRefs(), r.GetLoggedTimeUnixMicros(), sentAt)
		var passed bool
		refs, passed = c.notSending(p, w.skips.Filter(reply.GetRefs(), scannedAt))
		passedSending = passedSending || passed
		if len(refs) > 0 || !reply.GetMore() {
			break
		}
		after = reply.GetContinuation()
	}
	out.scanned, out.epoch = true, reply.GetActivationEpoch()
	if at := reply.GetNextDueAtUnixMicros(); at != 0 {
		out.nextDueAt = time.UnixMicro(at)
	}
	switch {
	case !reply.GetMore():
		w.resumeAfter = nil
		if at := reply.GetNextDueAtUnixMicros(); at != 0 {
			out.wakeAt = relativeInstant(scannedAt, at, reply.GetLoggedTimeUnixMicros())
		}
	case len(refs) > 0:
		w.resumeAfter = after // the page that held dispatchable refs is read again next round
		out.again = true
	case passedSending && c.rescanOnReply(p):
		// Refs in flight filled the pages: their receipts bring the partition back.
		w.resumeAfter = nil
	default:
		w.resumeAfter = reply.GetContinuation() // every page read was on backoff
		out.again = true
	}
	if len(refs) > 0 {
		dispatched = true
		c.startDispatch(ctx, p, refs)
	}
	return out
}

// notSending returns the refs that no dispatch of p is sending, and whether it left any out.
func (c *Coordinator) notSending(p *partition, refs []*orreryv1.DueRef) ([]*orreryv1.DueRef, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := refs[:0:0]
	for _, ref := range refs {
		if !p.sending[backoff.KeyOf(ref)] {
			out = append(out, ref)
		}
	}
	return out, len(out) < len(refs)
}

// rescanOnReply asks for a round of p when its next dispatch returns, and reports whether one
// is in flight to do so.
func (c *Coordinator) rescanOnReply(p *partition) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(p.sending) == 0 {
		return false
	}
	p.rescanOnReply = true
	return true
}

// startDispatch sends refs on a goroutine, in the slot of p's the round took (at most
// maxSendingPerPartition dispatches are outstanding), which it frees once the receipts are
// read. Its refs count as sending until then; then dispatched schedules p again.
func (c *Coordinator) startDispatch(ctx context.Context, p *partition, refs []*orreryv1.DueRef) {
	c.mu.Lock()
	for _, ref := range refs {
		p.sending[backoff.KeyOf(ref)] = true
	}
	c.sending++
	c.workers.Add(1)
	c.mu.Unlock()
	c.cfg.Pool.Go(func() {
		defer c.workers.Done()
		d, err := c.dispatch(ctx, p.id, refs, &p.round.skips)
		<-p.slots
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, ref := range refs {
			delete(p.sending, backoff.KeyOf(ref))
		}
		c.sending--
		c.dispatchedLocked(p, d, err)
		c.signalIdleLocked()
	})
}

// dispatchedLocked takes what a dispatch's receipts say: a failure makes p's next round back
// off, a backlog (or a round waiting for this reply) brings p back now, and a schedule's next
// due instant moves p's timer if it is earlier.
func (c *Coordinator) dispatchedLocked(p *partition, d dispatchOutcome, err error) {
	if c.stopped || c.owned[p.id] != p {
		return
	}
	now := c.cfg.Clock.Now()
	rescan := p.rescanOnReply
	p.rescanOnReply = false
	p.skippedRefs, p.stuckDue = p.round.skips.Len(), p.round.skips.StuckDue(now)
	if at := p.round.skips.NextRetry(now); !at.IsZero() {
		c.hintLocked(p, at, false)
	}
	switch {
	case err != nil:
		p.dispatchErr = err
		c.hintLocked(p, now, false)
	case d.backlog || rescan:
		c.hintLocked(p, now, false)
	case !d.wakeAt.IsZero():
		c.hintLocked(p, d.wakeAt, false)
	}
}

// takeDispatchErr returns and clears the error of p's last failed dispatch.
func (c *Coordinator) takeDispatchErr(p *partition) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := p.dispatchErr
	p.dispatchErr = nil
	return err
}

// scan sends one ScanDue.
func (c *Coordinator) scan(ctx context.Context, partitionID int, after []byte) (*orreryv1.ScanDueReply, error) {
	c.counts.scans.Add(1)
	callCtx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	reply, err := c.cfg.Partitions.ScanDue(callCtx, partitionID, &orreryv1.ScanDueRequest{MaxRefs: uint32(c.cfg.RefsPerRound), After: after})
	if err == nil && reply == nil {
		err = orrery.Errorf(orrery.CodeInternal, "ScanDue returned no reply")
	}
	if err == nil {
		err = orrery.FromProto(reply.GetError())
	}
	if err != nil {
		return nil, orrery.Wrap(orrery.CodeOf(err), err, "scan partition %d", partitionID)
	}
	return reply, nil
}

// relativeInstant converts a partition instant to the coordinator's clock: atMicros is
// (atMicros − loggedMicros) after observedAt, when the request the partition answered with
// loggedMicros was sent. The partition read its logged time after that, so the instant is
// never later on the coordinator's clock than on the partition's, whatever the reply's delay:
// a timer set at it may fire early (the scan then says how long is left), never late.
// Measuring from the partition's own logged time keeps a clock skew between silos from turning
// into a hot loop (a partition whose clock lags would otherwise report as "due" an instant
// this silo already considers past). Without a logged time, atMicros is taken as is.
func relativeInstant(observedAt time.Time, atMicros, loggedMicros int64) time.Time {
	if loggedMicros == 0 {
		return time.UnixMicro(atMicros)
	}
	return observedAt.Add(time.Duration(atMicros-loggedMicros) * time.Microsecond)
}

// failureBackoff is the wait after the n-th consecutive failed round: 1 s doubling to 30 s.
func failureBackoff(n int) time.Duration {
	d := failureBackoffInitial
	for i := 1; i < n && d < failureBackoffMax; i++ {
		d *= 2
	}
	return min(d, failureBackoffMax)
}

// retriable reports whether a failed call may be repeated with the same command id: the
// partition was unavailable or the per-request timeout expired while the coordinator itself
// was still running.
func retriable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	return errors.Is(err, orrery.ErrUnavailable) || errors.Is(err, orrery.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded)
}
