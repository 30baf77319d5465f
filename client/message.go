package client

import (
	"encoding/json"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// Message is one leased queue message as a Worker hands it to its handler. Its accessors read
// the message as it was received; the handler must not keep it after returning.
type Message struct {
	msg       *orreryv1.QueueMessage
	partition int
}

// ID is the message's id, unique within its lane (occurrence and timeout ids are derived).
func (m *Message) ID() string { return m.msg.GetId() }

// Lane is where the message lives.
func (m *Message) Lane() *orreryv1.Lane { return m.msg.GetLane() }

// Partition is the partition the message was received from.
func (m *Message) Partition() int { return m.partition }

// Payload is the payload JSON as the consumer's read policies show it (empty when the
// message has none, or when the consumer may not read it: see RedactedPaths).
func (m *Message) Payload() json.RawMessage { return json.RawMessage(m.msg.GetPayloadJson()) }

// Headers is the headers JSON object as the consumer's read policies show it (empty when the
// message has none, or when the consumer may not read them: see RedactedPaths).
func (m *Message) Headers() json.RawMessage { return json.RawMessage(m.msg.GetHeadersJson()) }

// RedactedPaths are the paths of the payload and headers the consumer's read policies
// withheld ("payload", "headers.x-secret"), sorted; empty when it received them whole.
func (m *Message) RedactedPaths() []string { return m.msg.GetRedactedPaths() }

// OrderingKey is the message's ordering key, if any.
func (m *Message) OrderingKey() string { return m.msg.GetOrderingKey() }

// DeliveryCount counts deliveries including this one (1 on the first delivery).
func (m *Message) DeliveryCount() uint32 { return m.msg.GetDeliveryCount() }

// Priority is the message's priority, 0..9 (EnqueueOptions.Priority).
func (m *Message) Priority() int { return int(m.msg.GetPriority()) }

// MaxDeliveries is the number of deliveries after which the message is dead-lettered.
func (m *Message) MaxDeliveries() uint32 { return m.msg.GetMaxDeliveries() }

// EnqueuedAt is the logged time of the enqueue.
func (m *Message) EnqueuedAt() time.Time { return micros(m.msg.GetEnqueuedAtUnixMicros()) }

// ExpiresAt is when the message expires; the zero Time when it never does.
func (m *Message) ExpiresAt() time.Time {
	if m.msg.GetExpiresAtUnixMicros() == 0 {
		return time.Time{}
	}
	return micros(m.msg.GetExpiresAtUnixMicros())
}

// LeaseToken is the token of this delivery's lease (what Ack, Release and ExtendLease need).
func (m *Message) LeaseToken() string { return m.msg.GetLease().GetToken() }

// LeaseUntil is when the lease granted at receipt ends (the worker extends it while the
// handler runs; this value is not updated).
func (m *Message) LeaseUntil() time.Time { return micros(m.msg.GetLease().GetUntilUnixMicros()) }

// Origin says what put a message in its queue.
type Origin int

const (
	// OriginEnqueue is a message a caller enqueued.
	OriginEnqueue Origin = iota
	// OriginOccurrence is an occurrence a schedule emitted (see Message.Occurrence).
	OriginOccurrence
	// OriginSagaTimeout is a saga's timeout (see Message.SagaTimeout).
	OriginSagaTimeout
)

// String names the origin.
func (o Origin) String() string {
	switch o {
	case OriginEnqueue:
		return "enqueue"
	case OriginOccurrence:
		return "occurrence"
	case OriginSagaTimeout:
		return "saga-timeout"
	default:
		return "origin?"
	}
}

// Origin says what put the message in its queue. A dead-lettered message keeps its origin.
func (m *Message) Origin() Origin {
	switch {
	case m.msg.GetOccurrence() != nil:
		return OriginOccurrence
	case m.msg.GetSagaTimeout() != nil:
		return OriginSagaTimeout
	default:
		return OriginEnqueue
	}
}

// Occurrence is the provenance of a message a schedule emitted, nil for any other message.
func (m *Message) Occurrence() *orreryv1.OccurrenceOrigin { return m.msg.GetOccurrence() }

// SagaTimeout is the provenance of a saga's timeout message, nil for any other message.
func (m *Message) SagaTimeout() *orreryv1.SagaTimeoutOrigin { return m.msg.GetSagaTimeout() }

// LastError is the error of the message's last failed attempt ("" when none failed, or the
// handler gave none): at most 1 KiB of it (apply version 19).
func (m *Message) LastError() string { return m.msg.GetLastError() }

// LastFailedAt is when the message's last failed attempt was released (the partition's logged
// time), the zero time when none failed.
func (m *Message) LastFailedAt() time.Time {
	if at := m.msg.GetLastFailedAtUnixMicros(); at != 0 {
		return micros(at)
	}
	return time.Time{}
}

// Retry is the message's own retry policy (nil when it has none: its queue's or its
// handler's may still be in force).
func (m *Message) Retry() *MessageRetry { return MessageRetryOf(m.msg.GetRetry()) }

// DeadLetteredFrom is the queue a dead-lettered message came from, empty otherwise.
func (m *Message) DeadLetteredFrom() string { return m.msg.GetDeadLetteredFrom() }

// UniqueKey is the unique key the message took in its lane (Unique, UniqueByPayload; "" for
// none, for a dead letter, and when a read policy withheld part of its payload or headers).
func (m *Message) UniqueKey() string { return m.msg.GetUniqueKey() }

// Proto returns the received wire message. It is shared: do not modify it.
func (m *Message) Proto() *orreryv1.QueueMessage { return m.msg }

func micros(unixMicros int64) time.Time { return time.UnixMicro(unixMicros).UTC() }
