package schedule

import (
	"fmt"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/schedule/cron"
)

// pinnedEvaluatorVersion is the cron evaluator version a new cron generation pins: the
// partition's, never the applying binary's. It is the first version until a newer one exists
// and a cluster-wide step moves partitions onto it.
const pinnedEvaluatorVersion = 1

// parseCron parses a cron spec in location with the schedule id as its hash key. Errors are
// Validation errors on "expression" (with the field number and position), "gap_policy" or
// "repeat_policy".
func parseCron(c *orreryv1.CronSpec, scheduleID string, location *time.Location) (*cron.Schedule, error) {
	opts := cron.Options{HashKey: scheduleID}
	switch c.GetGapPolicy() {
	case orreryv1.CronGapPolicy_CRON_GAP_POLICY_UNSPECIFIED, orreryv1.CronGapPolicy_CRON_GAP_POLICY_SHIFT:
		opts.Gap = cron.GapShift
	case orreryv1.CronGapPolicy_CRON_GAP_POLICY_SKIP:
		opts.Gap = cron.GapSkip
	default:
		return nil, orrery.Invalid("gap_policy", "unknown gap policy %d", c.GetGapPolicy())
	}
	switch c.GetRepeatPolicy() {
	case orreryv1.CronRepeatPolicy_CRON_REPEAT_POLICY_UNSPECIFIED:
		opts.Repeat = cron.RepeatAuto
	case orreryv1.CronRepeatPolicy_CRON_REPEAT_POLICY_FIRST:
		opts.Repeat = cron.RepeatFirst
	case orreryv1.CronRepeatPolicy_CRON_REPEAT_POLICY_LAST:
		opts.Repeat = cron.RepeatLast
	case orreryv1.CronRepeatPolicy_CRON_REPEAT_POLICY_BOTH:
		opts.Repeat = cron.RepeatBoth
	default:
		return nil, orrery.Invalid("repeat_policy", "unknown repeat policy %d", c.GetRepeatPolicy())
	}
	return cron.Parse(c.GetExpression(), location, opts)
}

// validateCron checks a cron spec at configure time in location: it parses, and it matches
// some instant.
func validateCron(c *orreryv1.CronSpec, scheduleID string, location *time.Location) *orrery.Error {
	parsed, err := parseCron(c, scheduleID, location)
	if err != nil {
		return orrery.AsError(err)
	}
	if _, ok := parsed.Next(time.Unix(0, 0)); !ok {
		return orrery.Invalid("expression", "%q matches no instant between 1970 and 9999", c.GetExpression())
	}
	return nil
}

// pinEvaluator stores the partition's cron evaluator version in a new cron generation
// (nothing for the other kinds).
func pinEvaluator(rec *orreryv1.ScheduleRecord) {
	rec.EvaluatorVersion = 0
	if rec.GetDefinition().GetSpec().GetCron() != nil {
		rec.EvaluatorVersion = pinnedEvaluatorVersion
	}
}

// unknownEvaluator says why this binary cannot compute the record's instants: its generation
// pins a cron evaluator version newer than the binary knows. It is "" otherwise.
func unknownEvaluator(rec *orreryv1.ScheduleRecord) string {
	if rec.GetDefinition().GetSpec().GetCron() == nil || rec.GetEvaluatorVersion() <= cron.EvaluatorVersion {
		return ""
	}
	return fmt.Sprintf("generation %d pins cron evaluator version %d; this binary evaluates versions up to %d: run a binary that knows it",
		rec.GetGeneration(), rec.GetEvaluatorVersion(), cron.EvaluatorVersion)
}

// evaluate prepares the record's series from the state alone. blocked is why the schedule
// must be suspended instead (the partition holds no rules of its zone). A generation whose
// evaluator version this binary does not know is an Internal error: the replica stops applying
// rather than compute instants the others would not.
func evaluate(r kv.Reader, rec *orreryv1.ScheduleRecord) (s series, blocked string, err error) {
	if reason := unknownEvaluator(rec); reason != "" {
		return series{}, "", orrery.Errorf(orrery.CodeInternal, "schedule %s: %s", rec.GetDefinition().GetScheduleId(), reason)
	}
	location, _, blocked, err := recordZone(r, rec)
	if err != nil || blocked != "" {
		return series{}, blocked, err
	}
	s, err = newSeries(rec, location)
	return s, "", err
}

// clockAnomaly says why the emit's logged time is a clock anomaly for the record: further
// past its reference instant (the next nominal instant or, if later, the instant its jitter
// fires it, the generation start or the last resume) than its anomaly window. It is "" when
// the guard is off or not tripped.
func clockAnomaly(rec *orreryv1.ScheduleRecord, loggedNowMicros int64) string {
	window := rec.GetDefinition().GetAnomalyWindowMicros()
	if window <= 0 || rec.GetSeriesEnded() {
		return ""
	}
	reference := max(rec.GetNextNominalUnixMicros(), nextFireAt(rec), rec.GetGenerationStartedAtUnixMicros(), rec.GetResumeFloorUnixMicros())
	if late := loggedNowMicros - reference; late > window {
		return fmt.Sprintf("clock anomaly: logged time %s is %s past the schedule's cursor %s, more than its anomaly window of %s",
			instant(loggedNowMicros), duration(late), instant(reference), duration(window))
	}
	return ""
}

// instant formats a Unix-microsecond instant for messages.
func instant(unixMicros int64) string { return input.FormatInstant(unixMicros) }

// duration formats a microsecond duration for messages.
func duration(micros int64) string { return input.FormatDuration(micros) }
