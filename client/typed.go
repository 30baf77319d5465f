package client

import (
	"cmp"
	"context"
	"encoding/json"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// Queue is one queue of a namespace, for enqueues in Go types: c.Queue("acme", "emails").
type Queue struct {
	c               *Client
	namespace, name string
}

// Queue is namespace's queue.
func (c *Client) Queue(namespace, queue string) *Queue {
	return &Queue{c: c, namespace: namespace, name: queue}
}

// EnqueueOptions are an enqueue's settings; the zero value is a message visible at once, kept
// until received, delivered up to the partition's default number of times.
type EnqueueOptions struct {
	// ID is the message id, which makes the enqueue idempotent within its lane: an enqueue of
	// an id already there (or acked within 24 h) stores nothing, and fails ErrMessageConflict
	// when its payload, headers or ordering key differ from the message's. Default: a fresh
	// UUID.
	ID string
	// Key is the lane key, which with the namespace decides the partition. Default: the
	// message id, which spreads a queue's messages over the partitions.
	Key string
	// HeadersJSON is a JSON object of headers ("" for none).
	HeadersJSON string
	// OrderingKey, when set, delivers the queue's messages with the same key one at a time.
	OrderingKey string
	// Delay keeps the message invisible for that long.
	Delay time.Duration
	// TimeToLive, when positive, expires a message not received in time.
	TimeToLive time.Duration
	// MaxDeliveries, when positive, dead-letters the message after that many deliveries.
	MaxDeliveries int
	// Unique, when set (Unique, UniqueByPayload), stores the message only if its lane holds no
	// message under the same unique key; otherwise the enqueue is a duplicate (EnqueueJSON).
	// Uniqueness is per lane: messages meant to share a queue-wide key must share a lane Key.
	Unique *orreryv1.UniqueSpec
	// ErrorOnDuplicate makes a duplicate enqueue fail with a *DuplicateError (errors.Is
	// ErrDuplicate) instead of reporting the holder's id with created false.
	ErrorOnDuplicate bool
	// Priority, 0 (the default) to 9, leases the message before lower priorities visible as
	// long (README "Priorities": within a priority first in, first out, and a message waits
	// behind later higher-priority ones at most 9 × the partition's priority step). It needs a
	// cluster at apply version 20; before, a priority is refused (Validation).
	Priority int
	// Retry, when set, is the message's retry policy (apply version 19), which wins over its
	// queue's (Client.SetQueueRetryPolicy) and yields to its handler's.
	Retry *MessageRetry
}

// EnqueueJSON enqueues a message whose payload is payloadJSON (a JSON value, "" for none) and
// returns its id and whether it was stored (false: the same message was there already;
// another message under the id fails ErrMessageConflict). An enqueue skipped as a duplicate
// (o.Unique) returns the id of the message holding the key, with created false, or fails with
// a *DuplicateError when o.ErrorOnDuplicate is set.
func (q *Queue) EnqueueJSON(ctx context.Context, payloadJSON string, o EnqueueOptions, opts ...CallOption) (id string, created bool, err error) {
	id = cmp.Or(o.ID, NewID())
	res, err := q.c.Enqueue(ctx, &orreryv1.Enqueue{
		Lane: &orreryv1.Lane{Namespace: q.namespace, Queue: q.name, Key: cmp.Or(o.Key, id)}, Id: id,
		PayloadJson: payloadJSON, HeadersJson: o.HeadersJSON, OrderingKey: o.OrderingKey,
		DelayMicros: o.Delay.Microseconds(), TimeToLiveMicros: o.TimeToLive.Microseconds(),
		MaxDeliveries: int32(min(o.MaxDeliveries, 1<<31-1)), Unique: o.Unique, Priority: priorityOf(o.Priority), Retry: o.Retry.Proto(),
	}, opts...)
	if err != nil {
		return "", false, err
	}
	if holder := res.GetDuplicateOf(); holder != "" {
		if o.ErrorOnDuplicate {
			return "", false, &DuplicateError{ID: res.GetId(), DuplicateOf: holder}
		}
		return holder, false, nil
	}
	return res.GetId(), res.GetCreated(), nil
}

// Enqueue enqueues args, marshalled to JSON (encoding/json), on q and returns the message id
// (for a duplicate, o.Unique, the id of the message holding the key, as EnqueueJSON).
// A value that does not marshal is a Validation error on payload_json; nothing is sent.
func Enqueue[T any](ctx context.Context, q *Queue, args T, o EnqueueOptions, opts ...CallOption) (id string, err error) {
	payload, err := json.Marshal(args)
	if err != nil {
		return "", orrery.Invalid("payload_json", "cannot marshal %T: %v", args, err)
	}
	id, _, err = q.EnqueueJSON(ctx, string(payload), o, opts...)
	return id, err
}

// Job is a received message whose JSON payload was decoded into Args.
type Job[T any] struct {
	*Message
	Args T
}

// JSONHandler is the Handler that decodes each message's payload into a T (encoding/json)
// and calls h with it. A payload that does not decode into T is the handler's error, so the
// message is released, and dead-lettered after its max deliveries; h is not called for it.
// A message without a payload decodes as T's zero value.
func JSONHandler[T any](h func(ctx context.Context, j *Job[T]) error) Handler {
	return func(ctx context.Context, m *Message) error {
		j := &Job[T]{Message: m}
		if payload := m.Payload(); len(payload) > 0 {
			if err := json.Unmarshal(payload, &j.Args); err != nil {
				return orrery.Invalid("payload_json", "message %s: cannot decode its payload into %T: %v", m.ID(), j.Args, err)
			}
		}
		return h(ctx, j)
	}
}

// priorityOf is a priority option on the wire: out of range it stays out of range (refused,
// naming the field), never wraps into it.
func priorityOf(priority int) int32 { return int32(min(max(priority, -1), 1<<31-1)) }
