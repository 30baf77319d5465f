package queue

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// ApplyRelease returns a leased message early: it clears the lease and makes the message
// visible at loggedNow + delay (0..lim.MaxDelayMicros). The delivery still counts toward
// max_deliveries. The token rule is Ack's. A release that sets error or backoff is a failed
// attempt (ApplyReleaseNoting).
func ApplyRelease(v kv.View, lim input.Limits, m *orreryv1.Release, loggedNowMicros int64) (*orreryv1.LeaseResult, error) {
	return ApplyReleaseNoting(v, lim, m, loggedNowMicros, nil)
}

// ApplyReleaseNoting is ApplyRelease that, for a failed attempt (error or backoff set), keeps
// the error (cut to MaxLastErrorBytes) and the logged time on the message and judges it by the
// retry policy in force (m.retry, else the message's, else its queue's): once its deliveries
// reached the policy's max_attempts it is dead-lettered or dropped at once (calling noting,
// when set, as ApplyReceiveNoting does); otherwise, with backoff, it is visible again after
// the policy's RetryDelay for this attempt. With no policy in force the release is today's:
// visible after delay_micros, max_deliveries judged by the next receive.
func ApplyReleaseNoting(v kv.View, lim input.Limits, m *orreryv1.Release, loggedNowMicros int64, noting Noting) (*orreryv1.LeaseResult, error) {
	if m == nil {
		return nil, orrery.Invalid("", "release is required")
	}
	if err := validateLeaseCommand(m.GetLane(), m.GetId(), m.GetLeaseToken()); err != nil {
		return nil, err
	}
	visibleAt, err := delayedInstant("delay_micros", m.GetDelayMicros(), lim, loggedNowMicros)
	if err != nil {
		return nil, err
	}
	if err := input.RetryPolicy("retry", m.GetRetry(), lim); err != nil {
		return nil, err
	}
	msg, err := leasedMessage(v, m.GetLane(), m.GetId(), m.GetLeaseToken())
	if err != nil {
		return nil, err
	}
	if failed := m.GetError() != "" || m.GetBackoff(); failed {
		policy, err := releasePolicy(v, m, msg)
		if err != nil {
			return nil, err
		}
		msg.LastError, msg.LastFailedAtUnixMicros = TruncateError(m.GetError()), loggedNowMicros
		if policy != nil && exhausted(policy, msg, lim) {
			if _, err := exhaust(v, lim, msg, policy, loggedNowMicros, noting); err != nil {
				return nil, err
			}
			return &orreryv1.LeaseResult{Id: msg.GetId()}, nil
		}
		if policy != nil && m.GetBackoff() {
			var ok bool
			if visibleAt, ok = input.AddMicros(loggedNowMicros, RetryDelay(policy, msg.GetLane(), msg.GetId(), msg.GetDeliveryCount())); !ok {
				return nil, orrery.Invalid("backoff", "ends after the last accepted instant")
			}
		}
	}
	if err := leaseChanged(v, msg, 0); err != nil {
		return nil, err
	}
	oldIndexKey := visibilityKey(msg)
	msg.Lease = nil
	msg.VisibleAtUnixMicros = visibleAt
	if err := storeMessage(v, msg, oldIndexKey); err != nil {
		return nil, err
	}
	return &orreryv1.LeaseResult{Id: msg.GetId()}, nil
}

// releasePolicy is the retry policy in force for a failed release of msg (nil: none): the
// handler's (m.retry), else the message's own, else its queue's.
func releasePolicy(v kv.Reader, m *orreryv1.Release, msg *orreryv1.QueueMessage) (*orreryv1.RetryPolicy, error) {
	switch {
	case m.GetRetry() != nil:
		return m.GetRetry(), nil
	case msg.GetRetry() != nil:
		return msg.GetRetry(), nil
	}
	queuePolicy, err := LoadRetryPolicy(v, msg.GetLane().GetNamespace(), msg.GetLane().GetQueue())
	if err != nil {
		return nil, err
	}
	return queuePolicy.GetPolicy(), nil
}
