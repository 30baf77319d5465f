package queue

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// ApplyExtendLease moves a current lease's end to loggedNow + duration (0 means
// lim.DefaultLeaseMicros, otherwise 1 s..lim.MaxLeaseMicros). The token rule is Ack's, and
// the lease must not have ended (Expired, field "lease_token"): an ended lease cannot be
// revived, since the message is already visible to others.
func ApplyExtendLease(v kv.View, lim input.Limits, m *orreryv1.ExtendLease, loggedNowMicros int64) (*orreryv1.LeaseResult, error) {
	if m == nil {
		return nil, orrery.Invalid("", "extend_lease is required")
	}
	if err := validateLeaseCommand(m.GetLane(), m.GetId(), m.GetLeaseToken()); err != nil {
		return nil, err
	}
	until, err := leaseUntil("lease_duration_micros", m.GetLeaseDurationMicros(), lim, loggedNowMicros)
	if err != nil {
		return nil, err
	}
	msg, err := leasedMessage(v, m.GetLane(), m.GetId(), m.GetLeaseToken())
	if err != nil {
		return nil, err
	}
	if msg.GetLease().GetUntilUnixMicros() <= loggedNowMicros {
		return nil, orrery.FieldErrorf(orrery.CodeExpired, "lease_token", "the lease of message %q ended at %s", msg.GetId(), input.FormatInstant(msg.GetLease().GetUntilUnixMicros()))
	}
	if err := leaseChanged(v, msg, until); err != nil {
		return nil, err
	}
	oldIndexKey := visibilityKey(msg)
	msg.Lease.UntilUnixMicros = until
	if err := storeMessage(v, msg, oldIndexKey); err != nil {
		return nil, err
	}
	return &orreryv1.LeaseResult{Id: msg.GetId(), LeaseUntilUnixMicros: until}, nil
}
