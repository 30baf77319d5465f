package queue

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// ApplyCancel cancels the message m.id of m.lane for principal at loggedNow:
//
//   - not leased (visible, delayed, or its lease ended): removed, with a cancelled tombstone,
//     CANCEL_OUTCOME_REMOVED;
//   - leased: marked cancelled (QueueMessage.cancelled), so that every lease command fails
//     TokenInvalidated and the next receive that meets it once its lease ends removes it,
//     CANCEL_OUTCOME_LEASE_REVOKED;
//   - already marked cancelled with its lease still running, or already removed (a
//     tombstone): nothing changes, CANCEL_OUTCOME_ALREADY_DONE (a marked one whose lease has
//     ended is removed now, and reported so as well).
//
// An id with neither a message nor a tombstone in the lane is NotFound ("id"). cancelled is
// the message as it was when this cancel first reached it (nil otherwise): the caller ledgers
// a schedule's occurrence with it.
func ApplyCancel(v kv.View, principal string, m *orreryv1.CancelMessage, loggedNowMicros int64) (res *orreryv1.CancelMessageResult, cancelled *orreryv1.QueueMessage, err error) {
	if m == nil {
		return nil, nil, orrery.Invalid("", "cancel_message is required")
	}
	if err := input.Lane("lane", m.GetLane(), true); err != nil {
		return nil, nil, err
	}
	if err := input.Name("id", m.GetId(), input.MaxIDBytes); err != nil {
		return nil, nil, err
	}
	if err := input.Reason("reason", m.GetReason()); err != nil {
		return nil, nil, err
	}
	lane, id := m.GetLane(), m.GetId()
	res = &orreryv1.CancelMessageResult{Id: id, Outcome: orreryv1.CancelOutcome_CANCEL_OUTCOME_ALREADY_DONE}
	msg, found, err := loadMessage(v, lane, id)
	if err != nil {
		return nil, nil, err
	}
	if !found {
		_, gone, err := v.Get(keys.MessageTombstoneKey(lane, id))
		if err != nil {
			return nil, nil, err
		}
		if !gone {
			return nil, nil, orrery.FieldErrorf(orrery.CodeNotFound, "id", "no message %q in the lane, nor a tombstone of one", id)
		}
		return res, nil, nil
	}
	leased := msg.GetLease() != nil && msg.GetLease().GetUntilUnixMicros() > loggedNowMicros
	switch {
	case msg.GetCancelled() != nil && leased:
		return res, nil, nil
	case msg.GetCancelled() != nil:
		return res, nil, removeCancelled(v, msg, loggedNowMicros)
	case leased:
		oldIndexKey := visibilityKey(msg)
		msg.Cancelled = &orreryv1.MessageCancel{CancelledBy: principal, CancelledAtUnixMicros: loggedNowMicros, Reason: m.GetReason()}
		if err := storeMessage(v, msg, oldIndexKey); err != nil {
			return nil, nil, err
		}
		res.Outcome = orreryv1.CancelOutcome_CANCEL_OUTCOME_LEASE_REVOKED
		return res, msg, nil
	}
	if err := removeCancelled(v, msg, loggedNowMicros); err != nil {
		return nil, nil, err
	}
	res.Outcome = orreryv1.CancelOutcome_CANCEL_OUTCOME_REMOVED
	return res, msg, nil
}

// reasonSuffix renders an optional reason after a sentence's subject.
func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}
