package queue

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// MaxLastErrorBytes bounds the error a failed release leaves on its message
// (QueueMessage.last_error): a longer one is cut at the last UTF-8 boundary within it.
const MaxLastErrorBytes = 1024

// Exhaustion is how a message that used up its deliveries or its retry policy's attempts
// left its lane for good.
type Exhaustion int

const (
	// DeadLettered: moved to its lane's dead-letter queue.
	DeadLettered Exhaustion = iota
	// Dropped: removed, its tombstone keeping the id taken (RETRY_EXHAUSTED_DROP).
	Dropped
)

// Noting is called in the same view with each message a receive or a failed release takes
// out of its lane because it used up its deliveries or attempts (as it was in its own lane,
// with its last error), and how, for what else changes with it (a schedule that pauses on
// failure).
type Noting func(msg *orreryv1.QueueMessage, how Exhaustion) error

// ApplySetRetryPolicy sets the retry policy of queue (m.namespace, m.queue) in this partition
// (the record under qr/ names principal and the logged time), or removes it when m.policy is
// absent. Setting the policy in force again keeps its record and reports changed false, as
// does removing a policy the queue does not have. The result holds the policy in force after
// it (none after a removal).
func ApplySetRetryPolicy(v kv.View, lim input.Limits, principal string, m *orreryv1.SetQueueRetryPolicy, loggedNowMicros int64) (*orreryv1.QueueRetryPolicyResult, error) {
	if m == nil {
		return nil, orrery.Invalid("", "set_queue_retry_policy is required")
	}
	if err := validateQueue(m.GetNamespace(), m.GetQueue()); err != nil {
		return nil, err
	}
	if err := input.RetryPolicy("policy", m.GetPolicy(), lim); err != nil {
		return nil, err
	}
	held, err := LoadRetryPolicy(v, m.GetNamespace(), m.GetQueue())
	if err != nil {
		return nil, err
	}
	key := keys.QueueRetryKey(m.GetNamespace(), m.GetQueue())
	if m.GetPolicy() == nil {
		if held == nil {
			return &orreryv1.QueueRetryPolicyResult{}, nil
		}
		return &orreryv1.QueueRetryPolicyResult{Changed: true}, v.Delete(key)
	}
	if held != nil && proto.Equal(held.GetPolicy(), m.GetPolicy()) {
		return &orreryv1.QueueRetryPolicyResult{Retry: held}, nil
	}
	rec := &orreryv1.QueueRetryPolicy{Namespace: m.GetNamespace(), Queue: m.GetQueue(), Policy: m.GetPolicy(),
		SetBy: principal, SetAtUnixMicros: loggedNowMicros}
	if _, err := record.Store(v, key, rec); err != nil {
		return nil, err
	}
	return &orreryv1.QueueRetryPolicyResult{Changed: true, Retry: rec}, nil
}

// LoadRetryPolicy returns the retry policy record of queue (namespace, queue) in this
// partition, or nil when it has none.
func LoadRetryPolicy(v kv.Reader, namespace, queue string) (*orreryv1.QueueRetryPolicy, error) {
	rec := &orreryv1.QueueRetryPolicy{}
	found, err := record.Load(v, keys.QueueRetryKey(namespace, queue), rec)
	if err != nil || !found {
		return nil, err
	}
	return rec, nil
}

// RetryBackoff is the backoff of a policy after the attempt-th failed attempt (attempt ≥ 1):
// min(max_backoff, initial × 2^(attempt−1)), computed without overflow.
func RetryBackoff(p *orreryv1.RetryPolicy, attempt uint32) int64 {
	backoff, ceiling := p.GetInitialBackoffMicros(), p.GetMaxBackoffMicros()
	for n := uint32(1); n < attempt && backoff < ceiling; n++ {
		if backoff > ceiling/2 {
			return ceiling
		}
		backoff *= 2
	}
	return min(backoff, ceiling)
}

// RetryDelay is the delay after which a message (lane, id) that failed its attempt-th attempt
// is visible again under p: RetryBackoff less a jitter of up to jitter_percent of it, the
// fraction taken from the first 8 bytes of sha256(message key ‖ attempt as 8-byte big-endian),
// so that every replica computes the same delay and each attempt a different one. The delay
// lies in [backoff − backoff×jitter_percent/100, backoff].
func RetryDelay(p *orreryv1.RetryPolicy, lane *orreryv1.Lane, id string, attempt uint32) int64 {
	backoff := RetryBackoff(p, attempt)
	percent := int64(min(p.GetJitterPercent(), input.MaxJitterPercent))
	span := uint64(backoff/100*percent + backoff%100*percent/100) // backoff × percent / 100, without overflow
	if span == 0 {
		return backoff
	}
	h := sha256.New()
	h.Write(keys.MessageKey(lane, id))
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(attempt)))
	fraction := binary.BigEndian.Uint64(h.Sum(nil)[:8])
	taken, _ := bits.Mul64(span, fraction) // span × fraction / 2^64 < span
	return backoff - int64(taken)
}

// TruncateError cuts a handler's error to MaxLastErrorBytes at a UTF-8 boundary.
func TruncateError(s string) string {
	if len(s) <= MaxLastErrorBytes {
		return s
	}
	cut := MaxLastErrorBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// queueRetry is a receive's view of its queue's retry policy: read at most once, and only for
// a message that could have used up its attempts.
type queueRetry struct {
	namespace, queue string
	loaded           bool
	record           *orreryv1.QueueRetryPolicy
}

// inForce is the retry policy a receive judges msg by (nil: none): its own, else its queue's.
// A message never delivered cannot have used up any bound (each is at least 1), so its queue's
// policy is not read for it.
func (q *queueRetry) inForce(v kv.Reader, msg *orreryv1.QueueMessage, lim input.Limits) (*orreryv1.RetryPolicy, error) {
	if msg.GetRetry() != nil {
		return msg.GetRetry(), nil
	}
	if msg.GetDeliveryCount() == 0 && effectiveMaxDeliveries(msg, lim) > 0 {
		return nil, nil
	}
	if !q.loaded {
		var err error
		if q.record, err = LoadRetryPolicy(v, q.namespace, q.queue); err != nil {
			return nil, err
		}
		q.loaded = true
	}
	return q.record.GetPolicy(), nil
}

// attemptLimit is how many deliveries msg may have under policy (nil: none): its max_attempts
// when set, else the message's max_deliveries.
func attemptLimit(policy *orreryv1.RetryPolicy, msg *orreryv1.QueueMessage, lim input.Limits) uint32 {
	if n := policy.GetMaxAttempts(); n > 0 {
		return n
	}
	return effectiveMaxDeliveries(msg, lim)
}

// exhausted reports whether msg used up its deliveries under policy (nil: none). A message in a
// dead-letter queue never does: it stays there until it is acked, redriven or expires.
func exhausted(policy *orreryv1.RetryPolicy, msg *orreryv1.QueueMessage, lim input.Limits) bool {
	return !input.IsDeadLetterQueue(msg.GetLane().GetQueue()) && msg.GetDeliveryCount() >= attemptLimit(policy, msg, lim)
}

// exhaust takes msg, which used up its deliveries under policy (nil: none), out of its lane:
// it drops it (a tombstone) when the policy says RETRY_EXHAUSTED_DROP and dead-letters it
// otherwise, then calls noting when set. It returns the payload and header bytes it wrote
// again (a dead-letter move's).
func exhaust(v kv.View, lim input.Limits, msg *orreryv1.QueueMessage, policy *orreryv1.RetryPolicy, loggedNowMicros int64, noting Noting) (uint64, error) {
	how, moved := DeadLettered, MessageBytes(msg)
	if policy.GetOnExhausted() == orreryv1.RetryExhausted_RETRY_EXHAUSTED_DROP {
		how, moved = Dropped, 0
		if err := Remove(v, msg, loggedNowMicros, false); err != nil {
			return 0, err
		}
	} else if err := deadLetter(v, lim, msg, loggedNowMicros); err != nil {
		return 0, err
	}
	if noting != nil {
		if err := noting(msg, how); err != nil {
			return 0, err
		}
	}
	return moved, nil
}
