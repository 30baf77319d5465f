package queue

import (
	"bytes"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// SweepBudget bounds how many expired or dead-lettered messages one receive handles besides
// the ones it delivers, so a backlog of dead messages cannot make one command unbounded. A
// receive that spends it, or Limits.MaxReceiveBytesPerCommand, may return fewer messages than
// it asked for while visible ones remain; NextVisibleAt then still reports an instant at or
// before the logged time.
const SweepBudget = 1024

// ApplyReceive leases up to m.max (0 means 1) messages of queue (namespace, queue) in this
// partition that are visible at loggedNow, in order of visible time minus priority ×
// lim.PriorityStepMicros, then of enqueue (priority.go; without priorities, visible-time then
// enqueue order); a queue paused in this partition (ApplyPause) leases none, and a capped one
// (ApplySetShare) at most what its share admits. On the way it removes messages whose TTL has
// passed or that were cancelled while leased (ApplyCancel), and moves messages that used up
// their deliveries to the dead-letter queue; none of them is delivered. Each delivered message gets delivery_count+1
// and a lease {LeaseToken, owner, loggedNow + lease duration}, and its index entry moves to
// the lease end. The result holds full copies of the leased messages; More is set when
// visible messages remain that the max or a budget left behind.
func ApplyReceive(v kv.View, lim input.Limits, m *orreryv1.Receive, loggedNowMicros int64) (*orreryv1.ReceiveResult, error) {
	return ApplyReceiveNoting(v, lim, m, loggedNowMicros, nil)
}

// ApplyReceiveNoting is ApplyReceive that calls deadLettered, when set, in the same view with
// each message the receive moves to its dead-letter queue or drops (as it was in its own lane),
// for what else changes with it (a schedule that pauses on failure). A message's deliveries are
// bounded by the max_attempts of the retry policy in force (the message's, else its queue's:
// RetryPolicy), else by its max_deliveries; a policy whose on_exhausted is DROP drops it.
func ApplyReceiveNoting(v kv.View, lim input.Limits, m *orreryv1.Receive, loggedNowMicros int64, deadLettered Noting) (*orreryv1.ReceiveResult, error) {
	maxMessages, until, err := validateReceive(lim, m, loggedNowMicros)
	if err != nil {
		return nil, err
	}
	namespace, queue := m.GetNamespace(), m.GetQueue()
	res := &orreryv1.ReceiveResult{}
	if stopped, err := paused(v, namespace, queue); err != nil || stopped {
		return res, err // a paused queue leases nothing (ApplyPause)
	}
	share, err := LoadShare(v, namespace, queue)
	if err != nil {
		return nil, err
	}
	if share != nil {
		return receiveShared(v, lim, m, share, maxMessages, until, loggedNowMicros, deadLettered)
	}
	return receiveUpTo(v, lim, m, maxMessages, until, loggedNowMicros, deadLettered)
}

// receiveUpTo is ApplyReceiveNoting's receive of up to maxMessages, leased until untilMicros.
func receiveUpTo(v kv.View, lim input.Limits, m *orreryv1.Receive, maxMessages int, until, loggedNowMicros int64, deadLettered Noting) (*orreryv1.ReceiveResult, error) {
	namespace, queue := m.GetNamespace(), m.GetQueue()
	res := &orreryv1.ReceiveResult{}
	queuePolicy := &queueRetry{namespace: namespace, queue: queue}
	visible, err := newVisibleScan(v, namespace, queue, loggedNowMicros, lim.PriorityStepMicros)
	if err != nil {
		return nil, err
	}
	swept := 0
	var spent uint64 // payload and header bytes delivered or moved to the dead-letter queue
	within := func() bool {
		return swept < SweepBudget && (lim.MaxReceiveBytesPerCommand <= 0 || spent < uint64(lim.MaxReceiveBytesPerCommand))
	}
	for len(res.Messages) < maxMessages && within() {
		// Read a chunk first and write after, so no view is written while it is scanned.
		entries, err := visible.next(v, maxMessages-len(res.Messages))
		if err != nil {
			return nil, err
		}
		if len(entries) == 0 {
			return res, nil // nothing visible remains
		}
		for _, e := range entries {
			if !within() {
				break
			}
			leased, moved, err := receiveOne(v, lim, e, m.GetOwner(), until, loggedNowMicros, queuePolicy, deadLettered)
			if err != nil {
				return nil, err
			}
			spent += moved
			visible.handled(e)
			if leased == nil {
				swept++
				continue
			}
			res.Messages = append(res.Messages, leased)
		}
	}
	// The max or a budget stopped the receive. Handled entries left the visible ranges, so
	// whatever is still there is visible and was not delivered.
	more, err := visible.remains(v)
	if err != nil {
		return nil, err
	}
	res.More = more
	return res, nil
}

// CheckReceive returns the Validation error ApplyReceive would return for m at loggedNow, or
// nil, reading nothing: a long-poll receive is checked before it waits.
func CheckReceive(lim input.Limits, m *orreryv1.Receive, loggedNowMicros int64) error {
	_, _, err := validateReceive(lim, m, loggedNowMicros)
	return err
}

// validateReceive checks m and returns the resolved message count and lease end.
func validateReceive(lim input.Limits, m *orreryv1.Receive, loggedNowMicros int64) (maxMessages int, leaseUntilMicros int64, err error) {
	if m == nil {
		return 0, 0, orrery.Invalid("", "receive is required")
	}
	if err := input.Name("namespace", m.GetNamespace(), input.MaxNamespaceBytes); err != nil {
		return 0, 0, err
	}
	if err := input.QueueName("queue", m.GetQueue(), true); err != nil {
		return 0, 0, err
	}
	count := m.GetMax()
	if count == 0 {
		count = 1
	}
	if count > lim.MaxReceivePerCommand {
		return 0, 0, orrery.Invalid("max", "must be between 0 (one) and %d, got %d", lim.MaxReceivePerCommand, count)
	}
	if owner := m.GetOwner(); owner != "" {
		if err := input.Name("owner", owner, input.MaxIDBytes); err != nil {
			return 0, 0, err
		}
	}
	until, err := leaseUntil("lease_duration_micros", m.GetLeaseDurationMicros(), lim, loggedNowMicros)
	if err != nil {
		return 0, 0, err
	}
	return int(count), until, nil
}

// indexEntry is a copied visibility-index entry: its key and the message key it points at;
// a visibleScan adds its band and effective order (priority.go).
type indexEntry struct {
	key, messageKey []byte
	band            int
	effective       int64
	sequence        uint64
}

// scanIndex copies up to limit index entries of [start, end).
func scanIndex(v kv.Reader, start, end []byte, limit int) ([]indexEntry, error) {
	var entries []indexEntry
	err := v.Scan(start, end, func(key, value []byte) (bool, error) {
		entries = append(entries, indexEntry{key: bytes.Clone(key), messageKey: bytes.Clone(value)})
		return len(entries) < limit, nil
	})
	return entries, err
}

// receiveOne handles one visible index entry: it expires, removes (cancelled), dead-letters or
// drops (its deliveries used up: exhaust) or leases the message and returns a copy of it when
// leased, nil otherwise, and the payload and header bytes it wrote again (a leased or
// dead-lettered message; an expired or dropped one leaves only a tombstone).
func receiveOne(v kv.View, lim input.Limits, e indexEntry, owner string, untilMicros, loggedNowMicros int64, queuePolicy *queueRetry, deadLettered Noting) (*orreryv1.QueueMessage, uint64, error) {
	msg := &orreryv1.QueueMessage{}
	found, err := record.Load(v, e.messageKey, msg)
	if err != nil {
		return nil, 0, err
	}
	if !found || !bytes.Equal(visibilityKey(msg), e.key) {
		return nil, 0, orrery.Errorf(orrery.CodeInternal, "visibility index entry %x is out of step with its message", e.key)
	}
	if exp := msg.GetExpiresAtUnixMicros(); exp != 0 && exp <= loggedNowMicros {
		return nil, 0, Remove(v, msg, loggedNowMicros, true)
	}
	if msg.GetCancelled() != nil { // cancelled while leased, and the lease has ended
		return nil, 0, removeCancelled(v, msg, loggedNowMicros)
	}
	policy, err := queuePolicy.inForce(v, msg, lim)
	if err != nil {
		return nil, 0, err
	}
	if exhausted(policy, msg, lim) {
		moved, err := exhaust(v, lim, msg, policy, loggedNowMicros, deadLettered)
		return nil, moved, err
	}
	msg.DeliveryCount++
	msg.Lease = &orreryv1.Lease{
		Token:           LeaseToken(msg.GetLane(), msg.GetId(), msg.GetDeliveryCount(), loggedNowMicros),
		Owner:           owner,
		UntilUnixMicros: untilMicros,
	}
	if err := storeMessage(v, msg, e.key); err != nil {
		return nil, 0, err
	}
	return proto.CloneOf(msg), MessageBytes(msg), nil
}

// deadLetter moves a message that used up its deliveries to its lane's dead-letter queue
// (queue + input.DeadLetterSuffix, same namespace, key and id), visible at loggedNow with
// its delivery count reset and its lease cleared. The source lane keeps a tombstone, so the
// id stays taken there. The move bypasses the dead-letter lane's quota but is counted. If the
// dead-letter lane already holds or held the id (possible only once tombstones are pruned),
// the message is not duplicated there: the source copy is removed and the earlier one stays.
func deadLetter(v kv.View, lim input.Limits, msg *orreryv1.QueueMessage, loggedNowMicros int64) error {
	if err := Remove(v, msg, loggedNowMicros, false); err != nil {
		return err
	}
	moved := proto.CloneOf(msg)
	source := msg.GetLane()
	moved.Lane = DeadLetterLane(source)
	moved.DeadLetteredFrom = source.GetQueue()
	moved.UniqueKey = "" // a dead letter holds no unique key (Remove released a key held while live)
	moved.DeliveryCount = 0
	moved.Lease = nil
	moved.VisibleAtUnixMicros = loggedNowMicros
	_, err := put(v, lim, moved, false)
	return err
}
