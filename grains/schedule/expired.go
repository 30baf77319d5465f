package schedule

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// HasExpiredPolicy reports whether def sets an expired policy: a behaviour of apply version 7.
func HasExpiredPolicy(def *orreryv1.ScheduleDefinition) bool {
	return def.GetExpired() != orreryv1.ExpiredPolicy_EXPIRED_POLICY_UNSPECIFIED
}

// validateExpiredPolicy checks the definition's expired policy is a known one.
func validateExpiredPolicy(def *orreryv1.ScheduleDefinition) *orrery.Error {
	switch def.GetExpired() {
	case orreryv1.ExpiredPolicy_EXPIRED_POLICY_UNSPECIFIED, orreryv1.ExpiredPolicy_EXPIRED_POLICY_FAIL, orreryv1.ExpiredPolicy_EXPIRED_POLICY_SKIP:
		return nil
	default:
		return orrery.Invalid("expired", "unknown policy %d", def.GetExpired())
	}
}

// expiredStops reports whether an expired occurrence of the emit's series stops it (see
// Rules.ExpiredStops).
func (e *emitter) expiredStops() bool {
	return e.rules.ExpiredStops && e.rec.GetDefinition().GetExpired() != orreryv1.ExpiredPolicy_EXPIRED_POLICY_SKIP
}

// occurrenceExpired reports whether an occurrence of def firing at fireMicros has outlived its
// time to live at logged time nowMicros (as message would refuse it).
func occurrenceExpired(def *orreryv1.ScheduleDefinition, fireMicros, nowMicros int64) bool {
	ttl := def.GetTemplate().GetTimeToLiveMicros()
	if ttl <= 0 {
		return false
	}
	at, ok := input.AddMicros(fireMicros, ttl)
	return ok && at <= nowMicros
}

// expiredStop is the error of an emit whose series stopped at the expired occurrence p: the
// schedule emits nothing further until an operator skips it (SkipExpired) or replaces the
// definition. The due coordinator keeps the schedule due, on backoff, and its watchdog reports
// it failing with this reason.
func expiredStop(rec *orreryv1.ScheduleRecord, p point, loggedNowMicros int64) error {
	return orrery.FieldErrorf(orrery.CodeExpired, "definition.expired",
		"occurrence %d of generation %d (%s); the schedule stops here and nothing is lost: skip the expired occurrences (SkipExpired; CLI schedules skip-expired), replace the definition, or set the expired policy to skip",
		p.ordinal, rec.GetGeneration(), expiredReason(rec, p.nominal, loggedNowMicros))
}

// ApplySkipExpired passes the expired occurrences a schedule stopped at (see SkipExpired): from
// the watermark, each ordinal due by the logged time whose time to live has passed is ledgered
// EXPIRED, with the principal in the reason, at most Limits.MaxPassedPerEmit per command. A
// schedule that cannot emit (paused, cancelled, suspended), or whose next occurrence has not
// expired, passes nothing (passed_without_message 0).
func ApplySkipExpired(v kv.View, lim input.Limits, principal string, m *orreryv1.SkipExpired, loggedNowMicros int64) (*orreryv1.ScheduleResult, error) {
	rec, err := loadExisting(v, m.GetLane(), m.GetScheduleId())
	if err != nil {
		return nil, err
	}
	if !canEmit(rec) || pausedBacklog(rec) {
		return result(rec, nil), nil
	}
	s, reason, err := evaluate(v, rec)
	if err != nil || reason != "" { // a suspension is the next emit's to record
		return result(rec, nil), err
	}
	def := rec.GetDefinition()
	oldDueAt := rec.GetNextDueAtUnixMicros()
	var passed uint32
	for passed < maxPassedPerEmit(lim) && !rec.GetSeriesEnded() {
		ordinal, nominal := rec.GetNextOrdinal(), rec.GetNextNominalUnixMicros()
		fire := fireAt(rec, ordinal, nominal)
		if fire > loggedNowMicros || !occurrenceExpired(def, fire, loggedNowMicros) {
			break
		}
		entry := ledgerEntry(rec, ordinal, nominal, orreryv1.LedgerOutcome_LEDGER_OUTCOME_EXPIRED)
		entry.Reason = expiredReason(rec, nominal, loggedNowMicros) + "; skipped by " + principal
		if err := writeFreshLedger(v, def.GetLane(), entry, loggedNowMicros); err != nil {
			return nil, err
		}
		if err := s.pass(ordinal, nominal); err != nil {
			return nil, err
		}
		passed++
	}
	if passed == 0 {
		return result(rec, nil), nil
	}
	rec.Revision++
	refreshNextDue(rec)
	if err := save(v, lim, rec, oldDueAt, loggedNowMicros); err != nil {
		return nil, err
	}
	res := result(rec, nil)
	res.PassedWithoutMessage = passed
	return res, nil
}
