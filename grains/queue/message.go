package queue

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// loadMessage reads the live message id of lane.
func loadMessage(v kv.Reader, lane *orreryv1.Lane, id string) (*orreryv1.QueueMessage, bool, error) {
	msg := &orreryv1.QueueMessage{}
	found, err := record.Load(v, keys.MessageKey(lane, id), msg)
	if err != nil || !found {
		return nil, false, err
	}
	return msg, true, nil
}

// storeMessage rewrites a live message whose index entry moves from oldIndexKey to the
// entry its new state implies. Payload and headers never change, so the counters do not.
func storeMessage(v kv.View, msg *orreryv1.QueueMessage, oldIndexKey []byte) error {
	newIndexKey := visibilityKey(msg)
	if !bytes.Equal(oldIndexKey, newIndexKey) {
		if err := v.Delete(oldIndexKey); err != nil {
			return err
		}
	}
	messageKey := keys.MessageKey(msg.GetLane(), msg.GetId())
	if _, err := record.Store(v, messageKey, msg); err != nil {
		return err
	}
	return v.Set(newIndexKey, messageKey)
}

// leasedMessage loads the message a lease command names and checks its token: an absent
// message is NotFound ("id"); no lease or another token is TokenInvalidated ("lease_token"),
// and so is a message cancelled while leased (ApplyCancel), whose lease is revoked.
// A lease that has ended still holds until someone receives the message again.
func leasedMessage(v kv.Reader, lane *orreryv1.Lane, id, leaseToken string) (*orreryv1.QueueMessage, error) {
	msg, found, err := loadMessage(v, lane, id)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, orrery.FieldErrorf(orrery.CodeNotFound, "id", "no message %q in the lane", id)
	}
	if msg.GetLease() == nil || msg.GetLease().GetToken() != leaseToken {
		return nil, orrery.FieldErrorf(orrery.CodeTokenInvalidated, "lease_token", "is not the current lease of message %q", id)
	}
	if c := msg.GetCancelled(); c != nil {
		return nil, orrery.FieldErrorf(orrery.CodeTokenInvalidated, "lease_token", "message %q was cancelled by %s at %s%s: its lease is revoked",
			id, c.GetCancelledBy(), input.FormatInstant(c.GetCancelledAtUnixMicros()), reasonSuffix(c.GetReason()))
	}
	return msg, nil
}

// validateLeaseCommand checks the lane, id and token every lease command carries. Leases are
// held in dead-letter queues too, so the dead-letter suffix is allowed.
func validateLeaseCommand(lane *orreryv1.Lane, id, leaseToken string) error {
	if err := input.Lane("lane", lane, true); err != nil {
		return err
	}
	if err := input.Name("id", id, input.MaxIDBytes); err != nil {
		return err
	}
	return input.Name("lease_token", leaseToken, input.MaxIDBytes)
}

// leaseUntil resolves and bounds a lease duration (0 means lim.DefaultLeaseMicros, otherwise
// 1 s..lim.MaxLeaseMicros) and returns the lease end it gives at loggedNow.
func leaseUntil(field string, leaseDurationMicros int64, lim input.Limits, loggedNowMicros int64) (int64, error) {
	if leaseDurationMicros == 0 {
		leaseDurationMicros = lim.DefaultLeaseMicros
	} else if err := input.Duration(field, leaseDurationMicros, input.Second, lim.MaxLeaseMicros); err != nil {
		return 0, err
	}
	until, ok := input.AddMicros(loggedNowMicros, leaseDurationMicros)
	if !ok {
		return 0, orrery.Invalid(field, "ends after the last accepted instant")
	}
	return until, nil
}

// delayedInstant bounds a delay (0..lim.MaxDelayMicros) and returns loggedNow + delay.
func delayedInstant(field string, delayMicros int64, lim input.Limits, loggedNowMicros int64) (int64, error) {
	if err := input.Duration(field, delayMicros, 0, lim.MaxDelayMicros); err != nil {
		return 0, err
	}
	at, ok := input.AddMicros(loggedNowMicros, delayMicros)
	if !ok {
		return 0, orrery.Invalid(field, "ends after the last accepted instant")
	}
	return at, nil
}

// LeaseToken is the deterministic token of a delivery: the lower-case hex of the first 16
// bytes of sha256(message key ‖ delivery count ‖ logged time), the last two as 8-byte
// big-endian integers. A retry of the same batch derives the same token; every later
// delivery of the message derives a different one.
func LeaseToken(lane *orreryv1.Lane, id string, deliveryCount uint32, loggedNowMicros int64) string {
	h := sha256.New()
	h.Write(keys.MessageKey(lane, id))
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(deliveryCount)))
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(loggedNowMicros)))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// effectiveMaxDeliveries is a stored message's delivery bound, falling back to the default
// for messages stored without one.
func effectiveMaxDeliveries(msg *orreryv1.QueueMessage, lim input.Limits) uint32 {
	if n := msg.GetMaxDeliveries(); n > 0 {
		return n
	}
	return lim.DefaultMaxDeliveries
}
