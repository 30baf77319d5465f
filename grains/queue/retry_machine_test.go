package queue

import (
	"crypto/sha256"
	"math/big"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// retryModel is the reference model's part for retry policies: the policy each queue and each
// created message has, each message's max_deliveries, and the ids a policy dropped.
type retryModel struct {
	queue         map[string]*orreryv1.RetryPolicy // queue → its policy (SetQueueRetryPolicy)
	message       map[string]*orreryv1.RetryPolicy // source lane+id → the enqueue's policy
	maxDeliveries map[string]uint32                // source lane+id → resolved max_deliveries
	dropped       map[string]bool                  // actual lane+id → dropped, its attempts used up
}

func newRetryModel() retryModel {
	return retryModel{queue: map[string]*orreryv1.RetryPolicy{}, message: map[string]*orreryv1.RetryPolicy{},
		maxDeliveries: map[string]uint32{}, dropped: map[string]bool{}}
}

// modelPolicies are the policies the machine draws from: small attempt counts so that
// exhaustion happens, with and without jitter, a cap and a zero backoff.
var modelPolicies = []*orreryv1.RetryPolicy{
	{MaxAttempts: 1, InitialBackoffMicros: input.Second, MaxBackoffMicros: 4 * input.Second},
	{MaxAttempts: 2, InitialBackoffMicros: input.Second, MaxBackoffMicros: 3 * input.Second, JitterPercent: 50, OnExhausted: orreryv1.RetryExhausted_RETRY_EXHAUSTED_DROP},
	{InitialBackoffMicros: input.Second / 2, MaxBackoffMicros: 10 * input.Second, JitterPercent: 100},
	{MaxAttempts: 3, OnExhausted: orreryv1.RetryExhausted_RETRY_EXHAUSTED_DROP},
	{MaxAttempts: 3, InitialBackoffMicros: 2 * input.Second, MaxBackoffMicros: 2 * input.Second, OnExhausted: orreryv1.RetryExhausted_RETRY_EXHAUSTED_DEAD_LETTER},
}

// drawPolicy draws none (most often) or one of modelPolicies.
func (m *machine) drawPolicy(c chooser, label string) *orreryv1.RetryPolicy {
	i := c.intRange(label, -len(modelPolicies), len(modelPolicies)-1)
	if i < 0 {
		return nil
	}
	return proto.CloneOf(modelPolicies[i])
}

// setRetryPolicy sets or removes the test queue's policy: changed only when it differs.
func (m *machine) setRetryPolicy(c chooser) {
	m.t.Helper()
	p := m.drawPolicy(c, "queue_retry")
	res, err := ApplySetRetryPolicy(m.store, m.lim, "operator", &orreryv1.SetQueueRetryPolicy{Namespace: testNamespace, Queue: testQueue, Policy: p}, m.now)
	held := m.retry.queue[testQueue]
	if err != nil || res.GetChanged() == proto.Equal(held, p) || !proto.Equal(res.GetRetry().GetPolicy(), p) {
		m.t.Fatalf("set retry policy %v (held %v): %v %v", p, held, res, err)
	}
	m.retry.queue[testQueue] = p
}

// sourceKey is the model key of the lane+id a message was created under.
func sourceKey(lane *orreryv1.Lane, id string) string {
	if input.IsDeadLetterQueue(lane.GetQueue()) {
		lane = laneOf(lane.GetQueue()[:len(lane.GetQueue())-len(input.DeadLetterSuffix)], lane.GetKey())
	}
	return modelKey(lane, id)
}

// policyInForce is the model's rule: the handler's policy, else the message's, else its
// queue's (nil: none).
func (m *machine) policyInForce(handler *orreryv1.RetryPolicy, lane *orreryv1.Lane, id string) *orreryv1.RetryPolicy {
	switch {
	case handler != nil:
		return handler
	case m.retry.message[sourceKey(lane, id)] != nil:
		return m.retry.message[sourceKey(lane, id)]
	default:
		return m.retry.queue[lane.GetQueue()]
	}
}

// attemptLimit is the model's bound on deliveries: max_attempts of the policy in force, else
// the message's max_deliveries.
func (m *machine) attemptLimit(handler *orreryv1.RetryPolicy, lane *orreryv1.Lane, id string) uint32 {
	if n := m.policyInForce(handler, lane, id).GetMaxAttempts(); n > 0 {
		return n
	}
	return m.retry.maxDeliveries[sourceKey(lane, id)]
}

// modelRetryDelay computes a failure's delay independently, in big integers:
// min(max, initial × 2^(attempt−1)) less ⌊⌊backoff × jitter / 100⌋ × h / 2^64⌋, h the first
// 8 bytes of sha256(message key ‖ attempt) as a big-endian number.
func modelRetryDelay(p *orreryv1.RetryPolicy, lane *orreryv1.Lane, id string, attempt uint32) int64 {
	backoff := new(big.Int).Lsh(big.NewInt(p.GetInitialBackoffMicros()), uint(attempt-1))
	if ceiling := big.NewInt(p.GetMaxBackoffMicros()); backoff.Cmp(ceiling) > 0 {
		backoff = ceiling
	}
	span := new(big.Int).Div(new(big.Int).Mul(backoff, big.NewInt(int64(p.GetJitterPercent()))), big.NewInt(100))
	sum := sha256.Sum256(append(keys.MessageKey(lane, id), big.NewInt(int64(attempt)).FillBytes(make([]byte, 8))...))
	taken := new(big.Int).Rsh(new(big.Int).Mul(span, new(big.Int).SetBytes(sum[:8])), 64)
	return new(big.Int).Sub(backoff, taken).Int64()
}

// release releases a drawn lease, sometimes as a failed attempt (an error, backoff, a
// handler's policy), and checks what the model says of it: a failure whose attempts reached
// the policy's max_attempts takes the message out at once (dead-lettered or dropped), any
// other release makes it visible after the policy's delay (backoff with a policy) or
// delay_micros, keeping a failure's error and time.
func (m *machine) release(c chooser, use issued, stored *orreryv1.QueueMessage, want orrery.Code) error {
	m.t.Helper()
	cmd := &orreryv1.Release{Lane: use.lane, Id: use.id, LeaseToken: use.token,
		DelayMicros: int64(c.intRange("release_delay", 0, 2)) * input.Second,
		Error:       []string{"", "boom"}[c.intRange("release_error", 0, 1)],
		Backoff:     c.intRange("release_backoff", 0, 1) == 1,
	}
	if c.intRange("release_handler_retry", 0, 3) == 0 {
		cmd.Retry = m.drawPolicy(c, "handler_retry")
	}
	_, err := ApplyRelease(m.store, m.lim, cmd, m.now)
	if err != nil || want != 0 {
		return err
	}
	key := modelKey(use.lane, use.id)
	failed := cmd.Error != "" || cmd.Backoff
	policy := m.policyInForce(cmd.Retry, use.lane, use.id)
	after, live := m.message(use.lane, use.id)
	if failed && policy != nil && !input.IsDeadLetterQueue(use.lane.GetQueue()) && stored.GetDeliveryCount() >= m.attemptLimit(cmd.Retry, use.lane, use.id) {
		m.checkExhausted(use.lane, use.id, policy, cmd.Error)
		return nil
	}
	wantVisible := m.now + cmd.DelayMicros
	if failed && cmd.Backoff && policy != nil {
		wantVisible = m.now + modelRetryDelay(policy, use.lane, use.id, stored.GetDeliveryCount())
	}
	switch {
	case !live || after.GetLease() != nil || after.GetVisibleAtUnixMicros() != wantVisible:
		m.t.Fatalf("release %v of %s (delivery %d, policy %v): %v (live %v), want visible at %d", cmd, key, stored.GetDeliveryCount(), policy, after, live, wantVisible)
	case failed && (after.GetLastError() != cmd.Error || after.GetLastFailedAtUnixMicros() != m.now):
		m.t.Fatalf("failed release of %s kept %q at %d", key, after.GetLastError(), after.GetLastFailedAtUnixMicros())
	case !failed && (after.GetLastError() != stored.GetLastError() || after.GetLastFailedAtUnixMicros() != stored.GetLastFailedAtUnixMicros()):
		m.t.Fatalf("a plain release of %s changed its last failure", key)
	}
	return nil
}

// checkExhausted requires the message (lane, id), whose attempts policy used up, to have left
// its lane as the policy says: dropped (a tombstone, nowhere live) or dead-lettered (live in
// the dead-letter lane with lastError), and records a drop.
func (m *machine) checkExhausted(lane *orreryv1.Lane, id string, policy *orreryv1.RetryPolicy, lastError string) {
	m.t.Helper()
	key := modelKey(lane, id)
	_, live := m.message(lane, id)
	_, gone := m.tombstone(lane, id)
	dead, inDLQ := m.message(DeadLetterLane(lane), id)
	if policy.GetOnExhausted() == orreryv1.RetryExhausted_RETRY_EXHAUSTED_DROP {
		if live || !gone || inDLQ {
			m.t.Fatalf("%s used up its attempts under %v: live %v, tombstoned %v, dead-lettered %v; want dropped", key, policy, live, gone, inDLQ)
		}
		m.retry.dropped[key] = true
		return
	}
	if live || !inDLQ || dead.GetLastError() != lastError || dead.GetDeliveryCount() != 0 {
		m.t.Fatalf("%s used up its attempts under %v: live %v, dead letter %v (%v); want dead-lettered with %q", key, policy, live, dead, inDLQ, lastError)
	}
}

// receiveJudged receives with cmd and checks the messages it should take out of their lane:
// each visible one whose deliveries reached the bound of the policy in force (the message's,
// else its queue's; else max_deliveries) is never delivered, and is either still where it was
// (a budget stopped the receive first) or gone as the policy says.
func (m *machine) receiveJudged(cmd *orreryv1.Receive) *orreryv1.ReceiveResult {
	m.t.Helper()
	type due struct {
		msg         *orreryv1.QueueMessage
		policy      *orreryv1.RetryPolicy
		lastError   string
		deliveryCnt uint32
	}
	var exhausted []due
	err := kv.ScanPrefix(m.store, keys.Message, func(_, value []byte) (bool, error) {
		msg := &orreryv1.QueueMessage{}
		if err := proto.Unmarshal(value, msg); err != nil {
			return false, err
		}
		lane := msg.GetLane()
		visibleAt := msg.GetVisibleAtUnixMicros()
		if l := msg.GetLease(); l != nil {
			visibleAt = l.GetUntilUnixMicros()
		}
		expired := msg.GetExpiresAtUnixMicros() != 0 && msg.GetExpiresAtUnixMicros() <= m.now
		if lane.GetQueue() == cmd.GetQueue() && !input.IsDeadLetterQueue(lane.GetQueue()) && visibleAt <= m.now && !expired && msg.GetCancelled() == nil &&
			msg.GetDeliveryCount() >= m.attemptLimit(nil, lane, msg.GetId()) {
			exhausted = append(exhausted, due{msg: msg, policy: m.policyInForce(nil, lane, msg.GetId()), lastError: msg.GetLastError(), deliveryCnt: msg.GetDeliveryCount()})
		}
		return true, nil
	})
	if err != nil {
		m.t.Fatal(err)
	}
	res, err := ApplyReceive(m.store, m.lim, cmd, m.now)
	if err != nil {
		m.t.Fatalf("receive: %v", err)
	}
	for _, d := range exhausted {
		lane, id := d.msg.GetLane(), d.msg.GetId()
		for _, got := range res.GetMessages() {
			if proto.Equal(got.GetLane(), lane) && got.GetId() == id {
				m.t.Fatalf("%s delivered after %d deliveries, its bound under %v", id, d.deliveryCnt, d.policy)
			}
		}
		if now, live := m.message(lane, id); live && proto.Equal(now, d.msg) {
			continue // not reached
		}
		m.checkExhausted(lane, id, d.policy, d.lastError)
	}
	return res
}
