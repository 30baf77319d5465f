package queue

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// Remove deletes the live message msg names (by lane and id): the message, its
// visibility-index entry and its share of the lane counters, and writes the tombstone that
// keeps its id taken, with the message's digest when it was stored under compare-or-return
// (except for a recurring occurrence, whose id cannot come back). expired records why it went (TTL rather than ack or a dead-letter move).
// It works from the stored message, so a stale copy in msg cannot put the index or the
// counters out of step; an absent message is NotFound ("id").
func Remove(v kv.View, msg *orreryv1.QueueMessage, loggedNowMicros int64, expired bool) error {
	return removeAs(v, msg, &orreryv1.MessageTombstone{RemovedAtUnixMicros: loggedNowMicros, Expired: expired})
}

// removeCancelled is Remove for a cancelled message (ApplyCancel): its tombstone says so, and
// is written for a recurring occurrence too, so that a cancel sent again finds it.
func removeCancelled(v kv.View, msg *orreryv1.QueueMessage, loggedNowMicros int64) error {
	return removeAs(v, msg, &orreryv1.MessageTombstone{RemovedAtUnixMicros: loggedNowMicros, Cancelled: true})
}

// removeAs is Remove writing tombstone.
func removeAs(v kv.View, msg *orreryv1.QueueMessage, tombstone *orreryv1.MessageTombstone) error {
	lane, id := msg.GetLane(), msg.GetId()
	if lane == nil {
		return orrery.Errorf(orrery.CodeInternal, "remove message %q: no lane", id)
	}
	stored, err := removeLive(v, lane, id)
	if err != nil {
		return err
	}
	if o := stored.GetOccurrence(); o != nil && !o.GetManual() && !tombstone.GetCancelled() {
		// A recurring occurrence's id never comes back to its lane (PutFresh): nothing to
		// keep taken, and no tombstone to write now and prune a day later.
		return nil
	}
	if stored.GetCompared() { // stored under compare-or-return: its id stays compared
		var err error
		if tombstone.Digest, err = digestOf(stored); err != nil {
			return err
		}
	}
	loggedNowMicros := tombstone.GetRemovedAtUnixMicros()
	if _, err := record.Store(v, keys.MessageTombstoneKey(lane, id), tombstone); err != nil {
		return err
	}
	return v.Set(keys.TombstoneAgeKey(loggedNowMicros, lane, id), nil)
}

// removeLive deletes the live message id of lane, its visibility-index entry, its share of
// the lane counters and the record of a unique key it holds while live (releaseUnique),
// leaving no tombstone, and returns it as it was stored; an absent message is NotFound ("id").
func removeLive(v kv.View, lane *orreryv1.Lane, id string) (*orreryv1.QueueMessage, error) {
	stored, found, err := loadMessage(v, lane, id)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, orrery.FieldErrorf(orrery.CodeNotFound, "id", "no message %q in the lane", id)
	}
	if err := v.Delete(visibilityKey(stored)); err != nil {
		return nil, err
	}
	if err := countBand(v, stored, false); err != nil {
		return nil, err
	}
	if err := leaseChanged(v, stored, 0); err != nil {
		return nil, err
	}
	if err := v.Delete(keys.MessageKey(lane, id)); err != nil {
		return nil, err
	}
	if err := subtractCounters(v, lane, MessageBytes(stored)); err != nil {
		return nil, err
	}
	if err := releaseUnique(v, stored); err != nil { // a key held while live goes with it
		return nil, err
	}
	return stored, nil
}

// PruneTombstones removes, oldest first and at most maxRecords, the tombstones of messages
// removed at or before removedBefore, so their ids can be enqueued again. It reports how many
// it removed and whether more remain.
func PruneTombstones(v kv.View, removedBeforeMicros int64, maxRecords int) (removed int, more bool, err error) {
	return kv.DeleteIndexed(v, keys.Of(keys.TombstoneAge, nil), keys.TombstoneAgeUpTo(removedBeforeMicros), maxRecords, func(age []byte) ([]byte, error) {
		tomb, err := keys.TombstoneFromAge(age)
		if err != nil {
			return nil, orrery.Wrap(orrery.CodeInternal, err, "tombstone index %x", age)
		}
		return tomb, nil
	})
}

// subtractCounters takes one message of size bytes off a lane's counters, deleting the
// record when the lane is empty so idle lanes leave nothing behind.
func subtractCounters(v kv.View, lane *orreryv1.Lane, size uint64) error {
	counters, err := LoadCounters(v, lane)
	if err != nil {
		return err
	}
	if counters.GetMessages() == 0 || counters.GetBytes() < size {
		return orrery.Errorf(orrery.CodeInternal, "lane counters (%d messages, %d bytes) cannot lose a message of %d bytes", counters.GetMessages(), counters.GetBytes(), size)
	}
	counters.Messages--
	counters.Bytes -= size
	if counters.GetMessages() == 0 {
		if counters.GetBytes() != 0 {
			return orrery.Errorf(orrery.CodeInternal, "empty lane still counts %d bytes", counters.GetBytes())
		}
		return v.Delete(keys.LaneCountersKey(lane))
	}
	_, err = record.Store(v, keys.LaneCountersKey(lane), counters)
	return err
}
