package schedule

import (
	"fmt"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
	"github.com/orreryhq/orrery/grains/record"
)

// tracksSlot reports whether the overlap policy keeps an in-flight slot (SKIP, BUFFER_ONE,
// BUFFER_ALL, CANCEL_OTHER).
func tracksSlot(def *orreryv1.ScheduleDefinition) bool {
	switch def.GetOverlap() {
	case orreryv1.OverlapPolicy_OVERLAP_POLICY_SKIP, orreryv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE,
		orreryv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ALL, orreryv1.OverlapPolicy_OVERLAP_POLICY_CANCEL_OTHER:
		return true
	}
	return false
}

// holds reports whether rec's series waits for its in-flight occurrence: BUFFER_ALL with the
// slot taken. Its due instants stay due, out of the due index (see refreshNextDue), until the
// slot is freed (ReleaseSlot) or its holder expires.
func holds(rec *orreryv1.ScheduleRecord) bool {
	return rec.GetDefinition().GetOverlap() == orreryv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ALL && rec.GetInFlightMessageId() != ""
}

// slotFree reports whether the overlap slot is free at the emit's logged time. A holder
// that is gone from its lane (acked, expired and swept, dead-lettered) or whose TTL has
// passed no longer holds it: the record forgets it (written if the emit saves the record).
func (e *emitter) slotFree() (bool, error) {
	id := e.rec.GetInFlightMessageId()
	if id == "" {
		return true, nil
	}
	live := true
	if expires := e.rec.GetInFlightExpiresAtUnixMicros(); expires > 0 && expires <= e.now {
		live = false
	} else if _, found, err := e.v.Get(keys.MessageKey(e.rec.GetDefinition().GetLane(), id)); err != nil {
		return false, err
	} else if !found {
		live = false
	}
	if !live {
		e.rec.InFlightMessageId, e.rec.InFlightExpiresAtUnixMicros = "", 0
	}
	return !live, nil
}

// enqueue puts the occurrence origin stands for into the schedule's lane, records it in the
// ledger as ENQUEUED and, if the overlap policy keeps a slot, makes it the slot's holder. It
// fails Expired, writing nothing, when the occurrence's TTL has already passed.
func (e *emitter) enqueue(origin *orreryv1.OccurrenceOrigin) error {
	def := e.rec.GetDefinition()
	id := OccurrenceID(origin.GetScheduleId(), origin.GetGeneration(), origin.GetOrdinal())
	// The time to live counts from the instant the occurrence fires (its jitter included).
	msg, err := message(def, e.lim, id, fireAt(e.rec, origin.GetOrdinal(), origin.GetNominalDueAtUnixMicros()), e.now)
	if err != nil {
		return err
	}
	msg.Origin = &orreryv1.QueueMessage_Occurrence{Occurrence: origin}
	// A series ordinal is passed once, so its occurrence id is new to the lane.
	if err := queue.PutFresh(e.v, e.lim, msg); err != nil {
		return err
	}
	e.budget.spend(int(queue.MessageBytes(msg)))
	if tracksSlot(def) {
		e.rec.InFlightMessageId, e.rec.InFlightExpiresAtUnixMicros = id, msg.GetExpiresAtUnixMicros()
	}
	e.enqueued, e.nominals = append(e.enqueued, id), append(e.nominals, origin.GetNominalDueAtUnixMicros())
	paceSpent(e.rec)
	e.changed = true
	return nil
}

// flushBuffered enqueues the buffered occurrence when the slot is free (or records it
// EXPIRED when its TTL passed while it waited).
func (e *emitter) flushBuffered() error {
	buffered := e.rec.GetBuffered()
	if buffered == nil || !e.room() {
		return nil
	}
	if free, err := e.slotFree(); err != nil || !free {
		return err
	}
	e.rec.Buffered = nil
	entry := ledgerEntry(e.rec, buffered.GetOrdinal(), buffered.GetNominalDueAtUnixMicros(), orreryv1.LedgerOutcome_LEDGER_OUTCOME_ENQUEUED)
	entry.MessageId = OccurrenceID(buffered.GetScheduleId(), buffered.GetGeneration(), buffered.GetOrdinal())
	err := e.enqueue(buffered)
	switch {
	case orrery.CodeOf(err) == orrery.CodeExpired:
		entry.Outcome = orreryv1.LedgerOutcome_LEDGER_OUTCOME_EXPIRED
		entry.Reason = expiredReason(e.rec, buffered.GetNominalDueAtUnixMicros(), e.now)
		e.passed++
		e.changed = true
	case err != nil:
		return err
	}
	return writeLedger(e.v, e.rec.GetDefinition().GetLane(), entry, e.now)
}

// cancelHolder removes the message holding the slot (CANCEL_OTHER), whose lease is thereby
// revoked, ledgers its ordinal CANCELLED, naming the ordinal that replaces it, and frees the
// slot.
func (e *emitter) cancelHolder(by uint64) error {
	lane := e.rec.GetDefinition().GetLane()
	msg := &orreryv1.QueueMessage{}
	found, err := record.Load(e.v, keys.MessageKey(lane, e.rec.GetInFlightMessageId()), msg)
	if err != nil {
		return err
	}
	e.rec.InFlightMessageId, e.rec.InFlightExpiresAtUnixMicros = "", 0
	if !found {
		return nil
	}
	if err := queue.Remove(e.v, msg, e.now, false); err != nil {
		return err
	}
	origin := msg.GetOccurrence()
	entry := ledgerEntry(e.rec, origin.GetOrdinal(), origin.GetNominalDueAtUnixMicros(), orreryv1.LedgerOutcome_LEDGER_OUTCOME_CANCELLED)
	entry.MessageId = msg.GetId()
	entry.Reason = fmt.Sprintf("in flight (delivery %d) when ordinal %d fired: overlap CANCEL_OTHER removed it and revoked its lease", msg.GetDeliveryCount(), by)
	e.changed = true
	return writeLedger(e.v, lane, entry, e.now)
}

// ReleaseSlot is called in the same view as the ack that removed the message acked (and, from
// apply version 4, the receive that dead-lettered it): when it is the occurrence holding its
// schedule's overlap slot, the slot is freed (a new revision), and a buffered occurrence, or
// the next instant a BUFFER_ALL series held back, becomes due at once. For any other message
// it does nothing.
func ReleaseSlot(v kv.View, lim input.Limits, acked *orreryv1.QueueMessage) error {
	origin := acked.GetOccurrence()
	if origin == nil || origin.GetManual() {
		return nil
	}
	rec, found, err := Load(v, acked.GetLane(), origin.GetScheduleId())
	if err != nil || !found || rec.GetInFlightMessageId() != acked.GetId() {
		return err
	}
	oldDueAt := rec.GetNextDueAtUnixMicros()
	rec.InFlightMessageId, rec.InFlightExpiresAtUnixMicros = "", 0
	rec.Revision++
	refreshNextDue(rec)
	return save(v, lim, rec, oldDueAt, 0)
}

// dropBuffered records a buffered occurrence that will never be enqueued (its generation is
// being replaced or the schedule deleted) as DROPPED.
func dropBuffered(v kv.View, rec *orreryv1.ScheduleRecord, reason string, loggedNowMicros int64) error {
	buffered := rec.GetBuffered()
	if buffered == nil {
		return nil
	}
	entry := ledgerEntry(rec, buffered.GetOrdinal(), buffered.GetNominalDueAtUnixMicros(), orreryv1.LedgerOutcome_LEDGER_OUTCOME_DROPPED)
	entry.Reason = reason
	rec.Buffered = nil
	return writeLedger(v, rec.GetDefinition().GetLane(), entry, loggedNowMicros)
}

// suspend stops the generation for good (until a new ConfigureSchedule): it records why, and
// records as SUSPENDED the buffered occurrence, if any, and the ordinal at which the series
// stopped, which is passed. It returns how many ordinals it passed.
func suspend(v kv.View, rec *orreryv1.ScheduleRecord, reason string, loggedNowMicros int64) (uint32, error) {
	lane := rec.GetDefinition().GetLane()
	passed := uint32(0)
	if buffered := rec.GetBuffered(); buffered != nil {
		entry := ledgerEntry(rec, buffered.GetOrdinal(), buffered.GetNominalDueAtUnixMicros(), orreryv1.LedgerOutcome_LEDGER_OUTCOME_SUSPENDED)
		entry.Reason = reason
		if err := writeLedger(v, lane, entry, loggedNowMicros); err != nil {
			return 0, err
		}
		rec.Buffered = nil
		passed++
	}
	if !rec.GetSeriesEnded() {
		ordinal, nominal := rec.GetNextOrdinal(), rec.GetNextNominalUnixMicros()
		entry := ledgerEntry(rec, ordinal, nominal, orreryv1.LedgerOutcome_LEDGER_OUTCOME_SUSPENDED)
		entry.Reason = reason
		if err := writeLedger(v, lane, entry, loggedNowMicros); err != nil {
			return 0, err
		}
		// Passed without computing what follows: this silo's rules may not be trusted.
		rec.NextOrdinal = ordinal + 1
		if rec.GetDefinition().GetSpec().GetCron() != nil {
			rec.CronCursorUnixMicros = nominal
		}
		passed++
	}
	rec.Suspended, rec.SuspendedReason, rec.SuspendedAtUnixMicros = true, reason, loggedNowMicros
	return passed, nil
}
