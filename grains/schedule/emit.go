package schedule

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
)

// ApplyEmit enqueues the contiguous occurrences of the expected generation that are due at
// logged time, at most m.Max (zero means 1), and advances the watermark in the same view.
// A stale generation fails TokenInvalidated; nothing due (or a cancelled or paused schedule)
// succeeds with the revision unchanged. An occurrence whose TTL has already passed stops the
// emit there: if it is the first, the emit fails Expired without advancing.
func ApplyEmit(v kv.View, lim input.Limits, m *orreryv1.EmitOccurrences, loggedNowMicros int64) (*orreryv1.ScheduleResult, error) {
	maxEmit := m.GetMax()
	if maxEmit == 0 {
		maxEmit = 1
	}
	if maxEmit > lim.MaxEmitPerCommand {
		return nil, orrery.Invalid("max", "must be at most %d, got %d", lim.MaxEmitPerCommand, maxEmit)
	}
	rec, err := loadExisting(v, m.GetLane(), m.GetScheduleId())
	if err != nil {
		return nil, err
	}
	if rec.GetGeneration() != m.GetExpectedGeneration() {
		return nil, orrery.FieldErrorf(orrery.CodeTokenInvalidated, "expected_generation", "schedule is at generation %d, expected %d", rec.GetGeneration(), m.GetExpectedGeneration())
	}
	if !canEmit(rec) {
		return result(rec, nil), nil
	}
	oldDueAt := rec.GetNextDueAtUnixMicros()
	var enqueued []string
	for uint32(len(enqueued)) < maxEmit {
		ordinal := rec.GetNextOrdinal()
		dueAt, exists, err := DueAt(rec, ordinal)
		if err != nil {
			return nil, err
		}
		if !exists || dueAt > loggedNowMicros {
			break
		}
		msg, err := occurrence(rec, lim, ordinal, dueAt, loggedNowMicros)
		if err != nil {
			if len(enqueued) == 0 {
				return nil, err
			}
			break // emit what precedes the expired occurrence; the next emit reports it
		}
		if _, err := queue.Put(v, lim, msg); err != nil {
			return nil, err
		}
		enqueued = append(enqueued, msg.GetId())
		rec.NextOrdinal = ordinal + 1
	}
	if len(enqueued) == 0 {
		return result(rec, nil), nil
	}
	rec.Revision++
	if err := refreshNextDue(rec); err != nil {
		return nil, err
	}
	if err := save(v, lim, rec, oldDueAt); err != nil {
		return nil, err
	}
	return result(rec, enqueued), nil
}

// occurrence builds the message of one ordinal, failing Expired if its TTL has passed.
func occurrence(rec *orreryv1.ScheduleRecord, lim input.Limits, ordinal uint64, dueAtMicros, loggedNowMicros int64) (*orreryv1.QueueMessage, error) {
	def := rec.GetDefinition()
	id := OccurrenceID(def.GetScheduleId(), rec.GetGeneration(), ordinal)
	msg, err := message(def, lim, id, dueAtMicros, loggedNowMicros)
	if err != nil {
		return nil, err
	}
	msg.Origin = &orreryv1.QueueMessage_Occurrence{Occurrence: &orreryv1.OccurrenceOrigin{
		ScheduleId:             def.GetScheduleId(),
		Generation:             rec.GetGeneration(),
		Ordinal:                ordinal,
		NominalDueAtUnixMicros: dueAtMicros,
	}}
	return msg, nil
}

// message builds a queue message from the definition's template, due at dueAt.
func message(def *orreryv1.ScheduleDefinition, lim input.Limits, id string, dueAtMicros, loggedNowMicros int64) (*orreryv1.QueueMessage, error) {
	t := def.GetTemplate()
	var expiresAt int64
	if ttl := t.GetTimeToLiveMicros(); ttl > 0 {
		at, ok := input.AddMicros(dueAtMicros, ttl)
		if !ok {
			at = input.MaxInstantMicros
		}
		if at <= loggedNowMicros {
			return nil, orrery.FieldErrorf(orrery.CodeExpired, "definition.template.time_to_live_micros",
				"occurrence %s due at %d µs expired at %d µs, before logged time %d µs", id, dueAtMicros, at, loggedNowMicros)
		}
		expiresAt = at
	}
	return &orreryv1.QueueMessage{
		Id:                   id,
		Lane:                 def.GetLane(),
		PayloadJson:          t.GetPayloadJson(),
		HeadersJson:          t.GetHeadersJson(),
		OrderingKey:          t.GetOrderingKey(),
		EnqueuedAtUnixMicros: loggedNowMicros,
		VisibleAtUnixMicros:  loggedNowMicros,
		ExpiresAtUnixMicros:  expiresAt,
		MaxDeliveries:        input.EffectiveMaxDeliveries(t.GetMaxDeliveries(), lim),
	}, nil
}
