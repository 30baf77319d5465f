package schedule

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

// OccurrenceID is the stable id of ordinal within generation of a schedule:
// recurring-{ScheduleId:N}-{Generation:x16}-{Ordinal:x16}.
func OccurrenceID(scheduleID string, generation, ordinal uint64) string {
	// Built by hand: every occurrence makes one (and its ledger record another).
	b := make([]byte, 0, len("recurring-")+len(scheduleID)+2*17)
	b = append(b, "recurring-"...)
	for i := 0; i < len(scheduleID); i++ {
		if scheduleID[i] != '-' {
			b = append(b, scheduleID[i])
		}
	}
	b = appendHex16(append(b, '-'), generation)
	b = appendHex16(append(b, '-'), ordinal)
	return string(b)
}

// OccurrenceOrdinal is the ordinal an OccurrenceID names, and whether id is one.
func OccurrenceOrdinal(id string) (uint64, bool) {
	const hexLen = 16
	if !strings.HasPrefix(id, "recurring-") || len(id) < len("recurring-")+2*(hexLen+1) || id[len(id)-hexLen-1] != '-' {
		return 0, false
	}
	ordinal, err := strconv.ParseUint(id[len(id)-hexLen:], 16, 64)
	return ordinal, err == nil
}

// appendHex16 appends v as 16 lowercase hexadecimal digits (%016x).
func appendHex16(b []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, digits[(v>>uint(shift))&0xf])
	}
	return b
}

// ManualID is the id of an occurrence triggered by hand at a logged time:
// manual-{ScheduleId:N}-{Generation:x16}-{LoggedTimeUnixMicro:x16}.
func ManualID(scheduleID string, generation uint64, loggedNowMicros int64) string {
	return fmt.Sprintf("manual-%s-%016x-%016x", input.UUIDHex(scheduleID), generation, uint64(loggedNowMicros))
}

// message builds a queue message from the definition's template, due at dueAt, failing
// Expired if its TTL (relative to dueAt) has already passed at loggedNow.
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
				"occurrence %s due at %s expired at %s, before logged time %s", id, instant(dueAtMicros), instant(at), instant(loggedNowMicros))
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
		Priority:             t.GetPriority(),
		Retry:                t.GetRetry(),
	}, nil
}
