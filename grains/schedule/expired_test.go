package schedule

import (
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// expiring is an hourly definition from t0 whose occurrences live 10 minutes.
func expiring() *orreryv1.ScheduleDefinition {
	def := definition(every(t0, hour))
	def.Template.TimeToLiveMicros = 10 * minute
	return def
}

// TestAnExpiredOccurrenceStopsTheSeries: by default an occurrence whose time to live passed
// before its emit stops the series there: an emit that already enqueued earlier ones keeps
// them and stops; the next emit fails Expired on definition.expired, naming the occurrence and
// the ways out, and changes nothing; nothing is ledgered for the expired ordinal.
func TestAnExpiredOccurrenceStopsTheSeries(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, expiring(), 0, t0)
	if ids := drain(t, v, 1, t0+5*minute); len(ids) != 1 {
		t.Fatalf("ordinal 0 within its time to live: enqueued %v", ids)
	}
	// Ordinal 1 (t0+1h) expired at t0+1h10m; the emit at t0+2h05m stops at it.
	now := t0 + 2*hour + 5*minute
	before := mustLoad(t, v)
	_, err := emit(v, 1, 32, now)
	wantCode(t, err, orrery.ErrExpired, "definition.expired")
	for _, want := range []string{"occurrence 1 of generation 1", "SkipExpired", "nothing is lost"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}
	after := mustLoad(t, v)
	if after.GetNextOrdinal() != 1 || after.GetRevision() != before.GetRevision() || after.GetNextDueAtUnixMicros() != t0+hour {
		t.Fatalf("the failed emit moved the schedule: %v", after)
	}
	if _, found := outcomesOf(t, v, 1)[1]; found {
		t.Fatal("the expired ordinal was ledgered")
	}

}

// TestAnEmitKeepsWhatItDidBeforeAnExpiredOccurrence: an emit that passed ordinals older than
// the catch-up window keeps those passes and stops, without an error, at the expired ordinal
// after them; the next emit fails there.
func TestAnEmitKeepsWhatItDidBeforeAnExpiredOccurrence(t *testing.T) {
	v := kv.NewMemory()
	def := expiring()
	def.Spec = every(t0, 5*minute)
	def.CatchUpWindowMicros = 30 * minute
	configure(t, v, def, 0, t0)
	// At 60 min: ordinals 0..5 (0..25 min) lie beyond the window; 6 (30 min) expired at 40.
	res, err := emit(v, 1, 32, t0+60*minute)
	if err != nil || res.GetPassedWithoutMessage() != 6 || len(res.GetEnqueuedIds()) != 0 {
		t.Fatalf("emit: %v %v, want 6 passed and a stop", res, err)
	}
	if rec := mustLoad(t, v); rec.GetNextOrdinal() != 6 {
		t.Fatalf("watermark %d, want 6 (stopped at the expired ordinal)", rec.GetNextOrdinal())
	}
	_, err = emit(v, 1, 32, t0+60*minute)
	wantCode(t, err, orrery.ErrExpired, "definition.expired")
}

// TestSkipExpiredPassesTheExpiredOccurrences: SkipExpired ledgers the expired ordinals EXPIRED
// with the principal, up to the first live one, and the series goes on; with nothing expired
// it changes nothing.
func TestSkipExpiredPassesTheExpiredOccurrences(t *testing.T) {
	v := kv.NewMemory()
	def := expiring()
	def.Spec = every(t0, 5*minute)
	def.Template.TimeToLiveMicros = 20 * minute
	configure(t, v, def, 0, t0)
	if ids := drain(t, v, 1, t0); len(ids) != 1 {
		t.Fatalf("ordinal 0: %v", ids)
	}
	// At 27 min: ordinals 1 (5 min, expired at 25) .. are due; 1 expired: stop, error.
	_, err := emit(v, 1, 32, t0+27*minute)
	wantCode(t, err, orrery.ErrExpired, "definition.expired")
	// Skip it: ordinal 1 is ledgered EXPIRED with the principal; 2 (10 min, lives to 30) is not.
	res, err := ApplySkipExpired(v, input.DefaultLimits(), "ops", &orreryv1.SkipExpired{Lane: lane, ScheduleId: scheduleID}, t0+27*minute)
	if err != nil || res.GetPassedWithoutMessage() != 1 {
		t.Fatalf("skip-expired: %v %v", res, err)
	}
	if rec := mustLoad(t, v); rec.GetNextOrdinal() != 2 || rec.GetNextDueAtUnixMicros() != t0+10*minute {
		t.Fatalf("after the skip: %v", rec)
	}
	var skipped *orreryv1.LedgerRecord
	for _, e := range ledgerOf(t, v) {
		if e.GetOrdinal() == 1 {
			skipped = e
		}
	}
	if skipped.GetOutcome() != outExpired || !strings.Contains(skipped.GetReason(), "skipped by ops") {
		t.Fatalf("ledger of the skipped ordinal: %v", skipped)
	}
	// The series goes on: ordinals 2..5 (10..25 min) are live at 27 min.
	if ids := drain(t, v, 1, t0+27*minute); len(ids) != 4 || ids[0] != OccurrenceID(scheduleID, 1, 2) {
		t.Fatalf("after the skip enqueued %v", ids)
	}
	// Nothing left to skip: 0 passed, no change.
	rev := mustLoad(t, v).GetRevision()
	if res, err := ApplySkipExpired(v, input.DefaultLimits(), "ops", &orreryv1.SkipExpired{Lane: lane, ScheduleId: scheduleID}, t0+27*minute); err != nil ||
		res.GetPassedWithoutMessage() != 0 || mustLoad(t, v).GetRevision() != rev {
		t.Fatalf("a skip with nothing expired: %v %v", res, err)
	}
}

// TestTheExpiredPolicyIsValidated: an unknown expired policy is refused naming the field.
func TestTheExpiredPolicyIsValidated(t *testing.T) {
	def := expiring()
	def.Expired = orreryv1.ExpiredPolicy(9)
	if err := ValidateDefinition(def, input.DefaultLimits()); err == nil || err.Field != "expired" {
		t.Fatalf("policy 9: %v", err)
	}
}
