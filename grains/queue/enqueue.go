package queue

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// ApplyEnqueue validates m and adds its message to the lane, visible at loggedNow + delay and
// expiring time_to_live after that (never when zero). It is idempotent by id within the lane:
// when a live message or a tombstone holds the id it writes nothing and reports
// created=false — under CompareOrReturn only when that is the same message (PutAs), and
// IdempotencyConflict ("id") otherwise. With m.unique, an enqueue the id rules let through
// stores nothing either while its lane's record of the unique key is in force, and reports
// created=false with duplicate_of, the holder's id (unique.go). A full lane fails with
// QuotaExceeded (field "lane"), which rolls back the batch. Errors name fields relative to m.
func ApplyEnqueue(v kv.View, lim input.Limits, m *orreryv1.Enqueue, loggedNowMicros int64, idempotency Idempotency) (*orreryv1.EnqueueResult, error) {
	msg, err := newMessage(lim, m, loggedNowMicros)
	if err != nil {
		return nil, err
	}
	if spec := m.GetUnique(); spec != nil { // unique.go
		claim, err := resolveUnique(spec, msg.GetPayloadJson(), msg.GetHeadersJson(), loggedNowMicros)
		if err != nil {
			return nil, err
		}
		return putUnique(v, lim, msg, claim, idempotency)
	}
	created, err := PutAs(v, lim, msg, idempotency)
	if err != nil {
		return nil, err
	}
	return &orreryv1.EnqueueResult{Id: m.GetId(), Created: created}, nil
}

// newMessage validates an Enqueue and builds the message it stores (the sequence is Put's).
func newMessage(lim input.Limits, m *orreryv1.Enqueue, loggedNowMicros int64) (*orreryv1.QueueMessage, error) {
	if m == nil {
		return nil, orrery.Invalid("", "enqueue is required")
	}
	if err := input.Lane("lane", m.GetLane(), false); err != nil {
		return nil, err
	}
	if err := input.EnqueueID("id", m.GetId()); err != nil {
		return nil, err
	}
	if err := input.JSONValue("payload_json", m.GetPayloadJson(), lim.MaxPayloadBytes); err != nil {
		return nil, err
	}
	if err := input.JSONObject("headers_json", m.GetHeadersJson(), lim.MaxHeadersBytes); err != nil {
		return nil, err
	}
	if k := m.GetOrderingKey(); k != "" {
		if err := input.Name("ordering_key", k, input.MaxKeyBytes); err != nil {
			return nil, err
		}
	}
	visibleAt, err := delayedInstant("delay_micros", m.GetDelayMicros(), lim, loggedNowMicros)
	if err != nil {
		return nil, err
	}
	var expiresAt int64
	if ttl := m.GetTimeToLiveMicros(); ttl != 0 {
		if err := input.Duration("time_to_live_micros", ttl, 1, input.MaxTimeToLiveMicros); err != nil {
			return nil, err
		}
		var ok bool
		if expiresAt, ok = input.AddMicros(visibleAt, ttl); !ok {
			return nil, orrery.Invalid("time_to_live_micros", "ends after the last accepted instant")
		}
	}
	if err := input.MaxDeliveries("max_deliveries", m.GetMaxDeliveries(), lim); err != nil {
		return nil, err
	}
	if err := input.Priority("priority", m.GetPriority()); err != nil {
		return nil, err
	}
	if err := input.RetryPolicy("retry", m.GetRetry(), lim); err != nil {
		return nil, err
	}
	lane := m.GetLane()
	return &orreryv1.QueueMessage{
		Id:                   m.GetId(),
		Lane:                 &orreryv1.Lane{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Key: lane.GetKey()},
		PayloadJson:          m.GetPayloadJson(),
		HeadersJson:          m.GetHeadersJson(),
		OrderingKey:          m.GetOrderingKey(),
		EnqueuedAtUnixMicros: loggedNowMicros,
		VisibleAtUnixMicros:  visibleAt,
		ExpiresAtUnixMicros:  expiresAt,
		MaxDeliveries:        input.EffectiveMaxDeliveries(m.GetMaxDeliveries(), lim),
		Priority:             m.GetPriority(),
		Retry:                m.GetRetry(),
	}, nil
}
