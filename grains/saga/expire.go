package saga

import (
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
)

// ApplyExpire applies ExpireSaga at the logged time loggedNowMicros: when the saga is Waiting at
// exactly the expected revision and its deadline is at or before loggedNowMicros, it enqueues
// the timeout message (id TimeoutMessageID(saga id, revision), in lane {saga namespace, timeout
// queue, saga key}) and writes TimedOut with the next revision and the message id, removing the
// due-index entry — all in v.
//
// An absent saga is NotFound; another revision or a terminal phase is RevisionConflict; a saga
// with no deadline or a deadline after loggedNowMicros is Validation (not due). A timeout whose
// time to live already ended (deadline + TTL ≤ loggedNowMicros) is Expired and nothing is
// written. These errors leave v untouched. A QuotaExceeded from the destination lane is returned
// as queue.Put reports it; the caller discards the mutation's write buffer, so the saga stays
// Waiting. Under queue.CompareOrReturn (apply version 18), a foreign message holding the
// timeout's id in its lane (live, or a tombstone with a digest: one a client enqueued under
// that id, whose origin is not this saga's timeout) fails the expiry IdempotencyConflict
// ("id") likewise: nothing is enqueued or lost, the saga stays Waiting and due, and its expiry
// is retried until the id is free (the foreign message gone and its tombstone pruned) or the
// saga moves on.
func ApplyExpire(v kv.View, lim input.Limits, m *orreryv1.ExpireSaga, loggedNowMicros int64, idempotency queue.Idempotency) (*orreryv1.SagaResult, error) {
	lane, sagaID, expected := m.GetLane(), m.GetSagaId(), m.GetExpectedRevision()
	if err := validateAddress(lane, sagaID); err != nil {
		return nil, err
	}
	if expected == 0 {
		return nil, orrery.Invalid("expected_revision", "must be the WAITING revision to expire, got 0")
	}
	current, found, err := load(v, lane, sagaID)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, notFound(lane, sagaID)
	}
	if current.GetRevision() != expected {
		return nil, revisionConflict(expected, current.GetRevision())
	}
	if err := checkTransition(opExpire, current.GetPhase(), timedOut); err != nil {
		return nil, err
	}

	deadline, timeout := current.GetDeadlineUnixMicros(), current.GetTimeout()
	switch {
	case deadline == 0:
		return nil, orrery.Invalid("expected_revision", "saga %s is not due: revision %d has no deadline", sagaID, expected)
	case deadline > loggedNowMicros:
		return nil, orrery.Invalid("expected_revision",
			"saga %s is not due: revision %d is due at %s, %s after the logged time %s",
			sagaID, expected, input.FormatInstant(deadline), input.FormatDuration(deadline-loggedNowMicros), input.FormatInstant(loggedNowMicros))
	case timeout == nil:
		return nil, orrery.Errorf(orrery.CodeInternal, "stored saga %s revision %d has a deadline but no timeout", sagaID, expected)
	}
	template := timeout.GetTemplate()
	var expiresAt int64
	if ttl := template.GetTimeToLiveMicros(); ttl != 0 {
		var ok bool
		if expiresAt, ok = input.AddMicros(deadline, ttl); !ok {
			return nil, orrery.Errorf(orrery.CodeInternal, "stored saga %s: deadline %s plus time to live %s overflows", sagaID, input.FormatInstant(deadline), input.FormatDuration(ttl))
		}
		if expiresAt <= loggedNowMicros {
			return nil, orrery.Errorf(orrery.CodeExpired,
				"the timeout of saga %s revision %d expired at %s (deadline %s + time to live %s), at or before the logged time %s; nothing was enqueued",
				sagaID, expected, input.FormatInstant(expiresAt), input.FormatInstant(deadline), input.FormatDuration(ttl), input.FormatInstant(loggedNowMicros))
		}
	}

	messageID := TimeoutMessageID(sagaID, expected)
	msg := &orreryv1.QueueMessage{
		Id:                   messageID,
		Lane:                 timeoutLane(lane, timeout),
		PayloadJson:          template.GetPayloadJson(),
		HeadersJson:          template.GetHeadersJson(),
		OrderingKey:          template.GetOrderingKey(),
		EnqueuedAtUnixMicros: loggedNowMicros,
		VisibleAtUnixMicros:  loggedNowMicros,
		ExpiresAtUnixMicros:  expiresAt,
		MaxDeliveries:        input.EffectiveMaxDeliveries(template.GetMaxDeliveries(), lim),
		Priority:             template.GetPriority(),
		Retry:                template.GetRetry(),
		Origin: &orreryv1.QueueMessage_SagaTimeout{SagaTimeout: &orreryv1.SagaTimeoutOrigin{
			SagaId:             sagaID,
			WaitingRevision:    expected,
			DeadlineUnixMicros: deadline,
		}},
	}
	// created=false cannot happen for a Waiting revision that never timed out unless another
	// message took the id: under SameByID the saga still ends TimedOut, under CompareOrReturn
	// only when that message is this timeout (the same template and origin).
	if _, err := queue.PutAs(v, lim, msg, idempotency); err != nil {
		return nil, err
	}

	next := proto.CloneOf(current)
	next.Revision = current.GetRevision() + 1
	next.Phase = timedOut
	next.TimeoutMessageId = messageID
	if err := store(v, lim, current, next); err != nil {
		return nil, err
	}
	if err := due.Remove(v, deadline, orreryv1.DueKind_DUE_KIND_SAGA, current.GetLane(), sagaID); err != nil {
		return nil, err
	}
	return result(next), nil
}
