package queue

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// ApplyRelease returns a leased message early: it clears the lease and makes the message
// visible at loggedNow + delay (0..lim.MaxDelayMicros). The delivery still counts toward
// max_deliveries. The token rule is Ack's.
func ApplyRelease(v kv.View, lim input.Limits, m *orreryv1.Release, loggedNowMicros int64) (*orreryv1.LeaseResult, error) {
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
	msg, err := leasedMessage(v, m.GetLane(), m.GetId(), m.GetLeaseToken())
	if err != nil {
		return nil, err
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
