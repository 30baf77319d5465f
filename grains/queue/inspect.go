package queue

import (
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// NextVisibleAt returns the earliest visibility-index instant of queue (namespace, queue) in
// this partition, in any priority band: when its next message becomes (or became) visible, or
// a lease ends.
// found is false when the queue holds no message here. A long-polling receive waits for it.
func NextVisibleAt(v kv.Reader, namespace, queue string) (atMicros int64, found bool, err error) {
	return firstVisibleBefore(v, namespace, queue, input.MaxInstantMicros+1)
}

// NextVisibleBefore is NextVisibleAt limited to instants before limitMicros: it reads the
// visibility index only up to there, so a caller that only cares about the near future does
// not step over the deleted entries beyond. A queue paused in this partition has none; a capped
// one (ApplySetShare) has none before its share admits a lease.
func NextVisibleBefore(v kv.Reader, namespace, queue string, limitMicros int64) (atMicros int64, found bool, err error) {
	if stopped, err := paused(v, namespace, queue); err != nil || stopped {
		return 0, false, err // nothing becomes visible to a receive while the queue is paused
	}
	return visibleUnderShare(v, namespace, queue, limitMicros)
}

// firstVisible returns the instant of the first visibility index entry in [start, end), a
// range of the queue whose QueuePrefix is queuePrefix.
func firstVisible(v kv.Reader, queuePrefix, start, end []byte) (atMicros int64, found bool, err error) {
	var first []byte
	err = v.Scan(start, end, func(key, _ []byte) (bool, error) {
		first = append([]byte(nil), key...)
		return false, nil
	})
	if err != nil || first == nil {
		return 0, false, err
	}
	atMicros, err = keys.VisibilityInstant(queuePrefix, first)
	if err != nil {
		return 0, false, orrery.Wrap(orrery.CodeInternal, err, "visibility index key %x", first)
	}
	return atMicros, true, nil
}

// VisibleAt reports whether queue (namespace, queue) in this partition has a message visible
// at nowMicros, of any priority. It reads the ranges a receive reads, each band's index up to
// nowMicros (so a kv.FloorView starts each at its band's floor). A queue paused in this
// partition has none visible, nor has a capped one whose share admits no lease now: a receive
// would lease nothing.
func VisibleAt(v kv.Reader, namespace, queue string, nowMicros int64) (bool, error) {
	if stopped, err := paused(v, namespace, queue); err != nil || stopped {
		return false, err
	}
	if open, err := receivable(v, namespace, queue, nowMicros); err != nil || !open {
		return false, err // the queue's share admits no lease now
	}
	bands, err := usedBands(v, namespace, queue)
	if err != nil {
		return false, err
	}
	found := false
	for _, p := range bands {
		err := v.Scan(keys.PriorityBandPrefix(namespace, queue, p), keys.PriorityVisibilityKey(namespace, queue, p, nowMicros+1, 0), func(_, _ []byte) (bool, error) {
			found = true
			return false, nil
		})
		if err != nil || found {
			return found, err
		}
	}
	return false, nil
}

// MaxLanePageBytes bounds the encoded messages of one lane page a partition answers with, so
// that a page of the largest messages still fits the actor transport's largest message.
const MaxLanePageBytes = 4 << 20

// ListLane reads up to maxMessages live messages of lane in key order (ids are
// length-prefixed: shorter ids first, then byte order), starting after the message afterID
// ("" starts at the beginning), and stops early once the page's encoded messages pass maxBytes
// (0: no byte bound; the first message always goes), so a page of large messages fits a reply.
// It is never silently partial: nextAfterID is the afterID of the next page when more messages
// remain, and empty otherwise.
func ListLane(v kv.Reader, lane *orreryv1.Lane, afterID string, maxMessages, maxBytes int) (msgs []*orreryv1.QueueMessage, nextAfterID string, err error) {
	if err := input.Lane("lane", lane, true); err != nil {
		return nil, "", err
	}
	if maxMessages <= 0 {
		return nil, "", orrery.Invalid("max_messages", "must be positive, got %d", maxMessages)
	}
	prefix := keys.Of(keys.Message, keys.AppendLane(nil, lane))
	start := prefix
	if afterID != "" {
		start = append(keys.MessageKey(lane, afterID), 0)
	}
	more := false
	var decodeErr error
	pageBytes := 0
	err = v.Scan(start, kv.PrefixEnd(prefix), func(_, value []byte) (bool, error) {
		if len(msgs) == maxMessages || (maxBytes > 0 && len(msgs) > 0 && pageBytes+len(value) > maxBytes) {
			more = true
			return false, nil
		}
		pageBytes += len(value)
		msg := &orreryv1.QueueMessage{}
		if err := proto.Unmarshal(value, msg); err != nil {
			decodeErr = orrery.Wrap(orrery.CodeInternal, err, "decode queue message")
			return false, nil
		}
		msgs = append(msgs, msg)
		return true, nil
	})
	if err != nil {
		return nil, "", err
	}
	if decodeErr != nil {
		return nil, "", decodeErr
	}
	if more {
		nextAfterID = msgs[len(msgs)-1].GetId()
	}
	return msgs, nextAfterID, nil
}
