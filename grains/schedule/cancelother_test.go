package schedule

import (
	"strings"
	"testing"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/kv"
)

// TestCancelOtherReplacesTheOccurrenceInFlight: under CANCEL_OTHER the next instant's
// occurrence replaces the one still in flight: its message is gone from the lane (its lease
// revoked), its ordinal is ledgered CANCELLED naming the one that replaced it, and the new one
// holds the slot; an occurrence acked in time is left alone.
func TestCancelOtherReplacesTheOccurrenceInFlight(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, policies(every(t0, minute), catchUp, orreryv1.OverlapPolicy_OVERLAP_POLICY_CANCEL_OTHER), 0, t0)
	first := OccurrenceID(scheduleID, 1, 0)
	if res := mustEmit(t, v, 1, t0); len(res.GetEnqueuedIds()) != 1 || res.GetEnqueuedIds()[0] != first {
		t.Fatalf("first emit %v", res)
	}
	res := mustEmit(t, v, 1, t0+minute)
	second := OccurrenceID(scheduleID, 1, 1)
	if len(res.GetEnqueuedIds()) != 1 || res.GetEnqueuedIds()[0] != second {
		t.Fatalf("second emit %v", res)
	}
	msgs := messages(t, v)
	if _, ok := msgs[first]; ok {
		t.Fatalf("the cancelled occurrence is still in the lane: %v", msgs)
	}
	if _, ok := msgs[second]; !ok || mustLoad(t, v).GetInFlightMessageId() != second {
		t.Fatalf("the replacing occurrence: lane %v, slot %q", msgs, mustLoad(t, v).GetInFlightMessageId())
	}
	ledger := ledgerOf(t, v)
	if ledger[0].GetOutcome() != orreryv1.LedgerOutcome_LEDGER_OUTCOME_CANCELLED || !strings.Contains(ledger[0].GetReason(), "ordinal 1 fired") {
		t.Fatalf("ordinal 0 ledgered %v", ledger[0])
	}
	ackOccurrence(t, v, second, t0+minute+sec)
	if res := mustEmit(t, v, 1, t0+2*minute); len(res.GetEnqueuedIds()) != 1 {
		t.Fatalf("third emit %v", res)
	}
	if got := outcomesOf(t, v, 1); got[1] != outEnqueued || got[2] != outEnqueued {
		t.Fatalf("an occurrence acked in time was cancelled: %v", got)
	}
}
