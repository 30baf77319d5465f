package queue

import (
	"encoding/binary"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// Put stores msg as a new message in msg.Lane unless a live message or a tombstone with its id
// exists there, in which case it writes nothing and reports created=false. The caller has
// validated msg and set its times; Put assigns the sequence and checks the lane quota
// (QuotaExceeded, naming field "lane").
func Put(v kv.View, lim input.Limits, msg *orreryv1.QueueMessage) (created bool, err error) {
	return put(v, lim, msg, true)
}

// PutAs is Put under the given idempotency: under CompareOrReturn, an id the lane holds for
// another message (a live one, or a tombstone that kept a digest) fails IdempotencyConflict
// ("id") and writes nothing, and a message it stores is marked compared, so that its
// tombstone will keep its digest (Remove). SameByID is Put.
func PutAs(v kv.View, lim input.Limits, msg *orreryv1.QueueMessage, idempotency Idempotency) (created bool, err error) {
	if idempotency != CompareOrReturn {
		return put(v, lim, msg, true)
	}
	if held, err := idHeld(v, msg, idempotency); err != nil || held {
		return false, err
	}
	msg.Compared = true
	if err := store(v, lim, msg, true); err != nil {
		return false, err
	}
	return true, nil
}

// idHeld reports whether msg's lane holds its id (a live message or a tombstone), under
// idempotency as PutAs reads it: under CompareOrReturn an id held for another message fails
// IdempotencyConflict ("id").
func idHeld(v kv.Reader, msg *orreryv1.QueueMessage, idempotency Idempotency) (bool, error) {
	lane, id := msg.GetLane(), msg.GetId()
	if idempotency != CompareOrReturn {
		if _, found, err := v.Get(keys.MessageKey(lane, id)); err != nil || found {
			return found, err
		}
		_, found, err := v.Get(keys.MessageTombstoneKey(lane, id))
		return found, err
	}
	stored, found, err := loadMessage(v, lane, id)
	if err != nil {
		return false, err
	}
	if found {
		if parts := differsFromLive(stored, msg); len(parts) > 0 {
			return false, conflict(id, parts, nil)
		}
		return true, nil
	}
	tombstone := &orreryv1.MessageTombstone{}
	gone, err := record.Load(v, keys.MessageTombstoneKey(lane, id), tombstone)
	if err != nil || !gone {
		return false, err
	}
	if held := tombstone.GetDigest(); held != nil {
		digest, err := digestOf(msg)
		if err != nil {
			return false, err
		}
		if parts := differsFromDigest(held, digest); len(parts) > 0 {
			return false, conflict(id, parts, tombstone)
		}
	}
	return true, nil
}

// PutFresh stores msg like Put for a message whose id has never been in its lane, skipping
// the two lookups (a live message, a tombstone) that make Put idempotent. Schedule
// occurrences use it: the schedule's watermark passes each ordinal once, schedule ids are
// never reused, and client enqueues cannot take their ids (input.ReservedMessageID). Storing
// an id that is present would break the lane's index and counters, so nothing else may call it.
func PutFresh(v kv.View, lim input.Limits, msg *orreryv1.QueueMessage) error {
	return store(v, lim, msg, true)
}

// put is Put with the lane quota check optional: a dead-letter move bypasses it (a full
// dead-letter lane must not wedge its source queue) but still counts the message.
func put(v kv.View, lim input.Limits, msg *orreryv1.QueueMessage, enforceQuota bool) (created bool, err error) {
	if held, err := idHeld(v, msg, SameByID); err != nil || held {
		return false, err
	}
	if err := store(v, lim, msg, enforceQuota); err != nil {
		return false, err
	}
	return true, nil
}

// store assigns msg its sequence and writes it, its index entry and its lane's counters,
// checking the lane quota when asked to.
func store(v kv.View, lim input.Limits, msg *orreryv1.QueueMessage, enforceQuota bool) error {
	lane, id := msg.GetLane(), msg.GetId()
	counters, err := LoadCounters(v, lane)
	if err != nil {
		return err
	}
	size := MessageBytes(msg)
	if enforceQuota && counters.GetMessages()+1 > lim.MaxLaneMessages {
		return orrery.FieldErrorf(orrery.CodeQuotaExceeded, "lane", "lane holds %d messages, the limit is %d", counters.GetMessages(), lim.MaxLaneMessages)
	}
	if enforceQuota && counters.GetBytes()+size > lim.MaxLaneBytes {
		return orrery.FieldErrorf(orrery.CodeQuotaExceeded, "lane", "lane holds %d bytes, adding %d exceeds the limit of %d", counters.GetBytes(), size, lim.MaxLaneBytes)
	}
	seq, err := nextSequence(v)
	if err != nil {
		return err
	}
	msg.Sequence = seq
	if _, err := record.Store(v, keys.MessageKey(lane, id), msg); err != nil {
		return err
	}
	if err := v.Set(visibilityKey(msg), keys.MessageKey(lane, id)); err != nil {
		return err
	}
	if err := countBand(v, msg, true); err != nil {
		return err
	}
	counters.Messages++
	counters.Bytes += size
	_, err = record.Store(v, keys.LaneCountersKey(lane), counters)
	return err
}

// MessageBytes is what a message counts against its lane's byte quota.
func MessageBytes(msg *orreryv1.QueueMessage) uint64 {
	return uint64(len(msg.GetPayloadJson()) + len(msg.GetHeadersJson()))
}

// LoadCounters reads a lane's quota counters (zero when absent).
func LoadCounters(v kv.Reader, lane *orreryv1.Lane) (*orreryv1.LaneCounters, error) {
	c := &orreryv1.LaneCounters{}
	_, err := record.Load(v, keys.LaneCountersKey(lane), c)
	return c, err
}

// visibilityKey is the index entry of a message, in its priority's band: at its lease end
// while leased, else at its visible time.
func visibilityKey(msg *orreryv1.QueueMessage) []byte {
	at := msg.GetVisibleAtUnixMicros()
	if l := msg.GetLease(); l != nil {
		at = l.GetUntilUnixMicros()
	}
	return keys.PriorityVisibilityKey(msg.GetLane().GetNamespace(), msg.GetLane().GetQueue(), int(msg.GetPriority()), at, msg.GetSequence())
}

// Sequence returns the partition's enqueue sequence: how many messages were ever enqueued.
func Sequence(v kv.Reader) (uint64, error) {
	b, found, err := v.Get(keys.Sequence)
	if err != nil || !found {
		return 0, err
	}
	if len(b) != 8 {
		return 0, orrery.Errorf(orrery.CodeInternal, "sequence record is %d bytes, want 8", len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

func nextSequence(v kv.View) (uint64, error) {
	seq, err := Sequence(v)
	if err != nil {
		return 0, err
	}
	seq++
	return seq, v.Set(keys.Sequence, binary.BigEndian.AppendUint64(nil, seq))
}
