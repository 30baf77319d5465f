package client

import (
	"context"
	"fmt"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/tracing"
)

// delivery is one received message from receipt to settlement. Its lease is tracked on the
// local clock from the request that granted or last extended it, sent at s and answered at a:
// the partition stamped the lease between the two, so it lasts at least until s + LeaseDuration
// (the next extension is due at s + LeaseDuration/2) and at most until a + LeaseDuration (a
// failing extension gives up then). After a long-poll receive the two are far apart; the first
// extension, due at once, narrows them.
type delivery struct {
	msg         *Message
	leaseLatest time.Time // the lease surely ends by then
	nextExtend  time.Time // when to extend it next
	// lost is why the lease was lost (the extension's error), once extend reports it lost.
	lost error
}

func (r *run) newDelivery(partition int, qm *orreryv1.QueueMessage, sent, answered time.Time) *delivery {
	return &delivery{
		msg:         &Message{msg: qm, partition: partition},
		leaseLatest: answered.Add(r.cfg.LeaseDuration),
		nextExtend:  sent.Add(r.cfg.LeaseDuration / 2),
	}
}

// slotOutcome is how waiting for a slot ended.
type slotOutcome int

const (
	slotAcquired  slotOutcome = iota
	slotStopping              // the run stopped first
	slotLeaseLost             // the message's lease could not be kept
)

// waitSlot waits for a free handler slot for d, extending d's lease meanwhile.
func (r *run) waitSlot(d *delivery) slotOutcome {
	for {
		due, timer := r.w.c.after(d.nextExtend.Sub(r.now()))
		select {
		case <-r.slots:
			timer.Stop()
			return slotAcquired
		case <-r.ctx.Done():
			timer.Stop()
			return slotStopping
		case <-due:
			if !r.extend(d) {
				return slotLeaseLost
			}
		}
	}
}

// start runs d's handler on the slot its caller holds; the slot is freed when the handler
// returns (see settleAfter). A delivery that arrives as the run stops is released instead.
func (r *run) start(d *delivery) {
	if r.ctx.Err() != nil {
		r.settle(d, errStopping)
		r.putSlots(1)
		return
	}
	r.deliveries.Go(func() { r.deliver(d) })
}

// errStopping is the outcome of a delivery that was never handled because the run stopped.
var errStopping = orrery.Errorf(orrery.CodeUnavailable, "worker stopping")

// abandon releases messages received as the run stopped, before they got a slot.
func (r *run) abandon(partition int, msgs []*orreryv1.QueueMessage) {
	now := r.now()
	for _, qm := range msgs {
		r.settle(r.newDelivery(partition, qm, now, now), errStopping)
	}
}

// deliver runs the handler and keeps the lease until it returns, then settles the message.
func (r *run) deliver(d *delivery) {
	handlerCtx, cancel := context.WithCancelCause(r.ctx)
	defer cancel(nil)
	handlerCtx, span := tracing.StartHandling(handlerCtx, r.w.c.tracer, d.msg.msg, d.msg.partition)
	done := make(chan error, 1)
	r.metrics.started(d.msg, r.now())
	go func() {
		err := callHandler(handlerCtx, r.cfg.Handler, d.msg)
		tracing.EndWithError(span, err)
		r.metrics.handled(err)
		done <- err
	}()
	for {
		due, timer := r.w.c.after(d.nextExtend.Sub(r.now()))
		select {
		case err := <-done:
			timer.Stop()
			r.settleAfter(d, err)
			return
		case <-due:
			if r.extend(d) {
				continue
			}
			// The message is no longer ours (its lease ran out, or it was cancelled:
			// CancelMessage): stop the handler, with the extension's error as the cause, and do
			// not settle it.
			cancel(d.lost)
			err := <-done
			r.w.c.log.Warn("orrery worker: lease lost while the handler ran", "id", d.msg.ID(), "partition", d.msg.Partition(), "handler_err", err)
			r.putSlots(1)
			return
		}
	}
}

// callHandler runs h, turning a panic into an error.
func callHandler(ctx context.Context, h Handler, m *Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return h(ctx, m)
}

// settleAfter settles d once its handler has returned. The handler's slot is handed on as soon
// as a settle slot is free, so the next handler does not wait for this ack's commit (a
// partition's fsync): acks are batched per partition, and handlers keep running meanwhile.
func (r *run) settleAfter(d *delivery, handlerErr error) {
	r.settling <- struct{}{}
	r.putSlots(1)
	defer func() { <-r.settling }()
	r.settle(d, handlerErr)
}

// settle acks d when handlerErr is nil and releases it otherwise.
func (r *run) settle(d *delivery, handlerErr error) {
	ctx, cancel := r.settleContext(time.Time{})
	defer cancel()
	m := d.msg
	if handlerErr == nil {
		if err := r.ackers[m.Partition()].ack(ctx, m); err != nil {
			r.w.c.log.Warn("orrery worker: ack failed", "id", m.ID(), "partition", m.Partition(), "err", err)
		}
		return
	}
	if handlerErr != errStopping {
		r.w.c.log.Info("orrery worker: handler failed, releasing", "id", m.ID(), "partition", m.Partition(), "delivery", m.DeliveryCount(), "err", handlerErr)
	}
	delay := r.cfg.ReleaseDelay
	if r.cfg.Backoff != nil && handlerErr != errStopping {
		delay = max(r.cfg.Backoff(int(m.DeliveryCount())), 0)
	}
	var err error
	if handlerErr == errStopping { // not an attempt that failed: released as it was
		_, err = r.w.c.Release(ctx, m.Lane(), m.ID(), m.LeaseToken(), delay)
	} else {
		// A failed attempt: the partition keeps the error and takes the delay from the retry
		// policy in force (delay when there is none), unless the handler asked for its own.
		f := Failure{Err: handlerErr, Delay: delay, Backoff: true, Retry: r.cfg.Retry}
		if after, asked := retryAfterOf(handlerErr); asked {
			f.Delay, f.Backoff = after, false
		}
		err = r.w.c.releaseFailedOrPlain(ctx, m.Lane(), m.ID(), m.LeaseToken(), f)
	}
	if err != nil {
		r.w.c.log.Warn("orrery worker: release failed", "id", m.ID(), "partition", m.Partition(), "err", err)
	}
}

// extend extends d's lease. It reports false when the lease is lost, with the reason in d.lost:
// the partition refused the extension for good (the message was cancelled, or another lease
// took it), or the lease has surely run out while extensions kept failing.
func (r *run) extend(d *delivery) bool {
	lease := r.cfg.LeaseDuration
	ctx, cancel := r.settleContext(r.now().Add(lease))
	defer cancel()
	m := d.msg
	sent := r.now()
	_, err := r.w.c.ExtendLease(ctx, m.Lane(), m.ID(), m.LeaseToken(), lease)
	if err == nil {
		d.leaseLatest = r.now().Add(lease)
		d.nextExtend = sent.Add(lease / 2)
		return true
	}
	if !orrery.Retriable(orrery.CodeOf(err)) || r.now().After(d.leaseLatest) {
		r.w.c.log.Warn("orrery worker: lease extension failed, lease lost", "id", m.ID(), "partition", m.Partition(), "err", err)
		d.lost = fmt.Errorf("orrery worker: the lease of message %s was lost: %w", m.ID(), err)
		return false
	}
	r.w.c.log.Debug("orrery worker: lease extension failed, trying again", "id", m.ID(), "err", err)
	d.nextExtend = r.now().Add(lease / 8)
	return true
}

// settleContext bounds one ack, release or extension: it outlives the run's context, for at
// most SettleTimeout and, when limit is set, until limit (an instant on the client's clock).
func (r *run) settleContext(limit time.Time) (context.Context, context.CancelFunc) {
	timeout := r.cfg.SettleTimeout
	if !limit.IsZero() {
		timeout = min(timeout, limit.Sub(r.now()))
	}
	return context.WithTimeout(context.WithoutCancel(r.ctx), timeout)
}
