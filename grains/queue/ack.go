package queue

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// ApplyAck removes a leased message for good. It needs the current lease token: an absent
// message is NotFound ("id"), a message without a lease or with another token is
// TokenInvalidated ("lease_token"). A lease that has ended still acks while nobody has
// received the message again. It returns the removed message too (callers use its origin).
func ApplyAck(v kv.View, lim input.Limits, m *orreryv1.Ack, loggedNowMicros int64) (*orreryv1.LeaseResult, *orreryv1.QueueMessage, error) {
	if m == nil {
		return nil, nil, orrery.Invalid("", "ack is required")
	}
	if err := validateLeaseCommand(m.GetLane(), m.GetId(), m.GetLeaseToken()); err != nil {
		return nil, nil, err
	}
	msg, err := leasedMessage(v, m.GetLane(), m.GetId(), m.GetLeaseToken())
	if err != nil {
		return nil, nil, err
	}
	if err := Remove(v, msg, loggedNowMicros, false); err != nil {
		return nil, nil, err
	}
	return &orreryv1.LeaseResult{Id: msg.GetId()}, msg, nil
}
