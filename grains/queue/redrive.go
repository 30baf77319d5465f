package queue

import (
	"bytes"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// ApplyRedrive moves dead letters of m.lane back to the lane at loggedNow, as
// RedriveDeadLetters describes: up to m.max (0 means lim.MaxReceivePerCommand) in the
// dead-letter lane's id order, within lim.MaxReceiveBytesPerCommand, skipping (at most
// SweepBudget) those leased at loggedNow or whose id the lane holds live.
func ApplyRedrive(v kv.View, lim input.Limits, m *orreryv1.RedriveDeadLetters, loggedNowMicros int64) (*orreryv1.RedriveResult, error) {
	if m == nil {
		return nil, orrery.Invalid("", "redrive_dead_letters is required")
	}
	lane := m.GetLane()
	if err := input.Lane("lane", lane, false); err != nil {
		return nil, err
	}
	maxMessages := m.GetMax()
	if maxMessages == 0 {
		maxMessages = lim.MaxReceivePerCommand
	}
	if maxMessages > lim.MaxReceivePerCommand {
		return nil, orrery.Invalid("max", "must be between 0 (%d) and %d, got %d", lim.MaxReceivePerCommand, lim.MaxReceivePerCommand, maxMessages)
	}
	live := &orreryv1.Lane{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Key: lane.GetKey()}
	dead := DeadLetterLane(live)
	prefix := keys.Of(keys.Message, keys.AppendLane(nil, dead))
	start, end := prefix, kv.PrefixEnd(prefix)
	res := &orreryv1.RedriveResult{}
	var spent uint64
	within := func() bool {
		return len(res.RedrivenIds) < int(maxMessages) && res.Skipped < SweepBudget &&
			(lim.MaxReceiveBytesPerCommand <= 0 || spent < uint64(lim.MaxReceiveBytesPerCommand))
	}
	for within() {
		// Read a chunk first and write after, so no view is written while it is scanned.
		page, err := scanMessages(v, start, end, int(maxMessages)-len(res.RedrivenIds))
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			return res, nil
		}
		for _, msg := range page {
			if !within() {
				break
			}
			moved, err := redriveOne(v, lim, live, msg, loggedNowMicros)
			if err != nil {
				return nil, err
			}
			if moved {
				res.RedrivenIds = append(res.RedrivenIds, msg.GetId())
				spent += MessageBytes(msg)
			} else {
				res.Skipped++
			}
			start = append(keys.MessageKey(dead, msg.GetId()), 0)
		}
	}
	rest, err := scanMessages(v, start, end, 1)
	if err != nil {
		return nil, err
	}
	res.More = len(rest) > 0
	return res, nil
}

// DeadLetterLane is the lane of lane's dead-letter queue.
func DeadLetterLane(lane *orreryv1.Lane) *orreryv1.Lane {
	return &orreryv1.Lane{Namespace: lane.GetNamespace(), Queue: lane.GetQueue() + input.DeadLetterSuffix, Key: lane.GetKey()}
}

// redriveOne moves the dead letter msg back to live, unless it is leased at loggedNow or live
// holds its id; moved reports which. A dead letter cancelled while leased (ApplyCancel) whose
// lease has ended is removed instead, as a receive would remove it, and not moved.
func redriveOne(v kv.View, lim input.Limits, live *orreryv1.Lane, msg *orreryv1.QueueMessage, loggedNowMicros int64) (moved bool, err error) {
	if l := msg.GetLease(); l != nil && l.GetUntilUnixMicros() > loggedNowMicros {
		return false, nil
	}
	if msg.GetCancelled() != nil { // cancelled while leased, its lease ended: removed, never moved
		return false, removeCancelled(v, msg, loggedNowMicros)
	}
	id := msg.GetId()
	if _, found, err := v.Get(keys.MessageKey(live, id)); err != nil || found {
		return false, err
	}
	stored, err := removeLive(v, msg.GetLane(), id)
	if err != nil {
		return false, err
	}
	tombstoneKey := keys.MessageTombstoneKey(live, id)
	tombstone := &orreryv1.MessageTombstone{}
	found, err := record.Load(v, tombstoneKey, tombstone)
	if err != nil {
		return false, err
	}
	if found {
		if err := v.Delete(tombstoneKey); err != nil {
			return false, err
		}
		if err := v.Delete(keys.TombstoneAgeKey(tombstone.GetRemovedAtUnixMicros(), live, id)); err != nil {
			return false, err
		}
	}
	back := proto.CloneOf(stored)
	back.Lane = proto.CloneOf(live)
	back.DeadLetteredFrom = ""
	back.DeliveryCount = 0
	back.Lease = nil
	back.VisibleAtUnixMicros = loggedNowMicros
	return true, store(v, lim, back, true)
}

// scanMessages decodes up to limit live messages of [start, end) of the message keyspace.
func scanMessages(v kv.Reader, start, end []byte, limit int) ([]*orreryv1.QueueMessage, error) {
	var msgs []*orreryv1.QueueMessage
	var decodeErr error
	err := v.Scan(start, end, func(key, value []byte) (bool, error) {
		msg := &orreryv1.QueueMessage{}
		if err := proto.Unmarshal(value, msg); err != nil {
			decodeErr = orrery.Wrap(orrery.CodeInternal, err, "decode queue message %x", bytes.Clone(key))
			return false, nil
		}
		msgs = append(msgs, msg)
		return len(msgs) < limit, nil
	})
	if err != nil {
		return nil, err
	}
	return msgs, decodeErr
}
