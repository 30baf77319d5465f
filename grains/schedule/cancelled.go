package schedule

import (
	"fmt"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// MessageCancelled is called in the same view as the CancelMessage that first reached msg (it
// removed msg, or revoked its lease). When msg is a recurring occurrence of its schedule's
// current generation in its schedule's own lane, the ordinal's ledger record becomes
// CANCELLED, naming principal, the lease it revoked if any, and reason; and when msg holds its
// schedule's overlap slot, the slot is freed (ReleaseSlot), so the series goes on as after an
// ack. For any other message (not an occurrence, a manual or backfilled one, one of a replaced
// generation, a dead letter) it does nothing.
func MessageCancelled(v kv.View, lim input.Limits, msg *orreryv1.QueueMessage, principal, reason string, loggedNowMicros int64) error {
	origin := msg.GetOccurrence()
	if origin == nil || origin.GetManual() || origin.GetBackfill() || input.IsDeadLetterQueue(msg.GetLane().GetQueue()) {
		return nil
	}
	rec, found, err := Load(v, msg.GetLane(), origin.GetScheduleId())
	if err != nil || !found {
		return err
	}
	if rec.GetGeneration() == origin.GetGeneration() {
		entry := ledgerEntry(rec, origin.GetOrdinal(), origin.GetNominalDueAtUnixMicros(), orreryv1.LedgerOutcome_LEDGER_OUTCOME_CANCELLED)
		entry.MessageId = msg.GetId()
		entry.Reason = "cancelled by " + principal
		if msg.GetLease() != nil && msg.GetCancelled() != nil {
			entry.Reason += fmt.Sprintf(" while leased (delivery %d): its lease revoked", msg.GetDeliveryCount())
		}
		if reason != "" {
			entry.Reason += ": " + reason
		}
		if err := writeLedger(v, msg.GetLane(), entry, loggedNowMicros); err != nil {
			return err
		}
	}
	return ReleaseSlot(v, lim, msg)
}
