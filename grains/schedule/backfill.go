package schedule

import (
	"fmt"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
	"github.com/orreryhq/orrery/grains/record"
)

// BackfillID is the id of the occurrence a backfill enqueues for the instant nominal of a
// schedule's generation: backfill-{ScheduleId:N}-{Generation:x16}-{NominalUnixMicro:x16},
// distinct from the series' and the manual occurrences' ids.
func BackfillID(scheduleID string, generation uint64, nominalMicros int64) string {
	return fmt.Sprintf("backfill-%s-%016x-%016x", input.UUIDHex(scheduleID), generation, uint64(nominalMicros))
}

// ApplyBackfill runs the schedule's instants in [from, to] now (see BackfillSchedule): each not
// backfilled before is enqueued with its BackfillID and ledgered BACKFILLED, at most
// Limits.MaxEmitPerCommand instants per command; the result's enqueued ids are the new ones,
// and backfill_resume_from_unix_micros where the next command resumes (0: done). Under
// queue.CompareOrReturn (apply version 18) an instant whose id a foreign message holds (one a
// client enqueued under it) fails the backfill IdempotencyConflict ("id"), writing nothing:
// no instant is ledgered BACKFILLED for a message that is not its occurrence.
func ApplyBackfill(v kv.View, lim input.Limits, m *orreryv1.BackfillSchedule, loggedNowMicros int64, idempotency queue.Idempotency) (*orreryv1.ScheduleResult, error) {
	from, to := m.GetFromUnixMicros(), m.GetToUnixMicros()
	if err := input.Instant("from_unix_micros", from); err != nil {
		return nil, err
	}
	if err := input.Instant("to_unix_micros", to); err != nil {
		return nil, err
	}
	if to < from {
		return nil, orrery.Invalid("to_unix_micros", "is %s, before from %s", input.FormatInstant(to), input.FormatInstant(from))
	}
	if to > loggedNowMicros {
		return nil, orrery.Invalid("to_unix_micros", "is %s, after the logged time %s: a backfill runs past instants", input.FormatInstant(to), input.FormatInstant(loggedNowMicros))
	}
	rec, err := loadExisting(v, m.GetLane(), m.GetScheduleId())
	if err != nil {
		return nil, err
	}
	switch {
	case rec.GetCancelled():
		return nil, refused(rec, "backfill", "cancelled", "cancelled", configureAgain)
	case rec.GetSuspended():
		return nil, refused(rec, "backfill", "suspended", "suspended ("+rec.GetSuspendedReason()+")", "only a new definition releases it")
	}
	s, blocked, err := evaluate(v, rec)
	if err != nil {
		return nil, err
	}
	if blocked != "" {
		return nil, refused(rec, "backfill", "suspended", "blocked ("+blocked+")", "only a new definition releases it")
	}
	def := rec.GetDefinition()
	res := result(rec, nil)
	at, ordinal, exists, err := s.firstAtOrAfter(max(from, def.GetStartAtUnixMicros()))
	for handled := uint32(0); err == nil && exists && at <= to; handled++ {
		if end := def.GetEndAtUnixMicros(); end > 0 && at > end {
			break
		}
		if handled == lim.MaxEmitPerCommand {
			res.BackfillResumeFromUnixMicros = at
			return res, nil
		}
		id, created, bfErr := backfillOne(v, lim, rec, at, loggedNowMicros, idempotency)
		if bfErr != nil {
			return nil, bfErr
		}
		if created {
			res.EnqueuedIds = append(res.EnqueuedIds, id)
			res.EnqueuedNominalDueAtUnixMicros = append(res.EnqueuedNominalDueAtUnixMicros, at)
		}
		ordinal++
		at, exists, err = s.unbounded(ordinal, at)
	}
	return res, err
}

// backfillOne enqueues the backfill occurrence of the instant nominal and ledgers it, unless
// its backfill ledger record exists (created false).
func backfillOne(v kv.View, lim input.Limits, rec *orreryv1.ScheduleRecord, nominalMicros, loggedNowMicros int64, idempotency queue.Idempotency) (id string, created bool, err error) {
	def := rec.GetDefinition()
	entry := ledgerEntry(rec, 0, nominalMicros, orreryv1.LedgerOutcome_LEDGER_OUTCOME_BACKFILLED)
	entry.Backfill = true
	if found, err := record.Load(v, ledgerKey(def.GetLane(), entry), &orreryv1.LedgerRecord{}); err != nil || found {
		return "", false, err
	}
	id = BackfillID(def.GetScheduleId(), rec.GetGeneration(), nominalMicros)
	// It fires now: its time to live counts from the backfill.
	msg, err := message(def, lim, id, loggedNowMicros, loggedNowMicros)
	if err != nil {
		return "", false, err
	}
	msg.Origin = &orreryv1.QueueMessage_Occurrence{Occurrence: &orreryv1.OccurrenceOrigin{
		ScheduleId: def.GetScheduleId(), Generation: rec.GetGeneration(), NominalDueAtUnixMicros: nominalMicros, Backfill: true,
	}}
	if _, err := queue.PutAs(v, lim, msg, idempotency); err != nil {
		return "", false, err
	}
	entry.MessageId = id
	if err := writeFreshLedger(v, def.GetLane(), entry, loggedNowMicros); err != nil {
		return "", false, err
	}
	return id, true, nil
}

// firstAtOrAfter is the series' first instant at or after fromMicros (ignoring the
// definition's bounds) and the ordinal to pass to unbounded for the one after it (for cron
// the cursor is the instant, and the ordinal only counts).
func (s series) firstAtOrAfter(fromMicros int64) (atMicros int64, ordinal uint64, exists bool, err error) {
	if s.cron != nil {
		at, exists, err := s.unbounded(0, fromMicros-1)
		return at, 0, exists, err
	}
	if every := s.rec.GetDefinition().GetSpec().GetEvery(); every != nil {
		if first := every.GetFirstDueAtUnixMicros(); fromMicros > first {
			interval := every.GetIntervalMicros()
			ordinal = uint64((fromMicros - first + interval - 1) / interval)
		}
	}
	at, exists, err := s.unbounded(ordinal, 0)
	if err == nil && exists && at < fromMicros { // At and After: their one instant is before the range
		exists = false
	}
	return at, ordinal, exists, err
}
