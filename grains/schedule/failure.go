package schedule

import (
	"fmt"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// DeadLettered is called in the same view as the receive that moved msg, an occurrence that
// used up its deliveries, to its dead-letter queue. When msg is an occurrence of its
// schedule's current generation, the ordinal's ledger record becomes DEAD_LETTERED, and a
// schedule whose definition sets pause_on_failure pauses (unless paused or cancelled
// already), with the reason on the record. For any other message it does nothing: a manual
// occurrence, or one of a replaced generation, says nothing about the current definition.
// dropped says that the message was removed instead, its retry policy's attempts used up
// (RETRY_EXHAUSTED_DROP): it is ledgered DEAD_LETTERED all the same, the reason saying so.
func DeadLettered(v kv.View, lim input.Limits, msg *orreryv1.QueueMessage, dropped bool, loggedNowMicros int64) error {
	origin := msg.GetOccurrence()
	if origin == nil || origin.GetManual() {
		return nil
	}
	rec, found, err := Load(v, msg.GetLane(), origin.GetScheduleId())
	if err != nil || !found || rec.GetGeneration() != origin.GetGeneration() {
		return err
	}
	reason := fmt.Sprintf("message %s was dead-lettered after %d deliveries", msg.GetId(), msg.GetDeliveryCount())
	if dropped {
		reason = fmt.Sprintf("message %s was dropped after %d deliveries (its retry policy's on_exhausted is DROP)", msg.GetId(), msg.GetDeliveryCount())
	}
	entry := ledgerEntry(rec, origin.GetOrdinal(), origin.GetNominalDueAtUnixMicros(), orreryv1.LedgerOutcome_LEDGER_OUTCOME_DEAD_LETTERED)
	entry.MessageId, entry.Reason = msg.GetId(), reason
	if err := writeLedger(v, msg.GetLane(), entry, loggedNowMicros); err != nil {
		return err
	}
	if !rec.GetDefinition().GetPauseOnFailure() || rec.GetPaused() || rec.GetCancelled() {
		return nil
	}
	oldDueAt := rec.GetNextDueAtUnixMicros()
	rec.Paused, rec.PausedAtUnixMicros = true, loggedNowMicros
	rec.PausedReason = "pause_on_failure: " + reason
	rec.Revision++
	refreshNextDue(rec)
	return save(v, lim, rec, oldDueAt, loggedNowMicros)
}
