package schedule

import (
	"fmt"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/schedule/cron"
)

// Fingerprint horizon around a generation's start, in the zone's rules.
const (
	// FingerprintLookbackSeconds reaches back before the generation start, so a transition
	// just before it (which decides the first instants) is covered.
	FingerprintLookbackSeconds = 24 * 3600
	// FingerprintYears is how far past the generation start the fingerprint reaches.
	FingerprintYears = 5
	// lastFingerprintUnix is 9999-12-31T23:59:59Z, the end of the evaluator's range.
	lastFingerprintUnix int64 = 253402300799
)

// parseCron parses a cron spec with the schedule id as its hash key. Errors are Validation
// errors on "expression" (with the field number and position), "time_zone", "gap_policy" or
// "repeat_policy".
func parseCron(c *orreryv1.CronSpec, scheduleID string) (*cron.Schedule, error) {
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
	return cron.Parse(c.GetExpression(), c.GetTimeZone(), opts)
}

// validateCron checks a cron spec at configure time: it parses, and it matches some instant.
func validateCron(c *orreryv1.CronSpec, scheduleID string) *orrery.Error {
	parsed, err := parseCron(c, scheduleID)
	if err != nil {
		return orrery.AsError(err)
	}
	if _, ok := parsed.Next(time.Unix(0, 0)); !ok {
		return orrery.Invalid("expression", "%q matches no instant between 1970 and 9999", c.GetExpression())
	}
	return nil
}

// fingerprintHorizon is [generation start - 1 day, generation start + 5 years] in Unix
// seconds, clamped to the evaluator's range.
func fingerprintHorizon(generationStartMicros int64) (fromUnix, toUnix int64) {
	start := time.UnixMicro(generationStartMicros).UTC()
	fromUnix = start.Unix() - FingerprintLookbackSeconds
	toUnix = min(start.AddDate(FingerprintYears, 0, 0).Unix(), lastFingerprintUnix)
	return fromUnix, toUnix
}

// zoneFingerprint is this silo's fingerprint of the record's zone over its generation's
// horizon.
func zoneFingerprint(rec *orreryv1.ScheduleRecord) (string, error) {
	from, to := fingerprintHorizon(rec.GetGenerationStartedAtUnixMicros())
	return cron.Fingerprint(rec.GetDefinition().GetSpec().GetCron().GetTimeZone(), from, to)
}

// pinEvaluator stores this silo's evaluator version and zone fingerprint in a new cron
// generation (nothing for the other kinds).
func pinEvaluator(rec *orreryv1.ScheduleRecord) error {
	rec.EvaluatorVersion, rec.ZoneFingerprint = 0, ""
	if rec.GetDefinition().GetSpec().GetCron() == nil {
		return nil
	}
	fingerprint, err := zoneFingerprint(rec)
	if err != nil {
		return orrery.AsError(err).InField("definition.spec.cron")
	}
	rec.EvaluatorVersion, rec.ZoneFingerprint = cron.EvaluatorVersion, fingerprint
	return nil
}

// evaluatorMismatch says why this silo must not compute the record's cron instants: its
// evaluator version or its zone rules over the generation's horizon differ from the pinned
// ones. It is "" when they agree (and always for the other kinds).
func evaluatorMismatch(rec *orreryv1.ScheduleRecord) string {
	c := rec.GetDefinition().GetSpec().GetCron()
	if c == nil {
		return ""
	}
	if rec.GetEvaluatorVersion() != cron.EvaluatorVersion {
		return fmt.Sprintf("generation %d was configured with cron evaluator version %d; this silo runs version %d",
			rec.GetGeneration(), rec.GetEvaluatorVersion(), cron.EvaluatorVersion)
	}
	fingerprint, err := zoneFingerprint(rec)
	if err != nil {
		return fmt.Sprintf("time zone %q cannot be evaluated on this silo: %v", c.GetTimeZone(), err)
	}
	if fingerprint != rec.GetZoneFingerprint() {
		from, to := fingerprintHorizon(rec.GetGenerationStartedAtUnixMicros())
		return fmt.Sprintf("the rules of time zone %q between %s and %s differ from those generation %d was configured with (fingerprint %.12s…, this silo %.12s…): tzdata changed",
			zoneName(c.GetTimeZone()), time.Unix(from, 0).UTC().Format(time.DateOnly), time.Unix(to, 0).UTC().Format(time.DateOnly),
			rec.GetGeneration(), rec.GetZoneFingerprint(), fingerprint)
	}
	return ""
}

func zoneName(zone string) string {
	if zone == "" {
		return "UTC"
	}
	return zone
}

// clockAnomaly says why the emit's logged time is a clock anomaly for the record: further
// past its reference instant (the next nominal instant, or the generation start or last
// resume if later) than its anomaly window. It is "" when the guard is off or not tripped.
func clockAnomaly(rec *orreryv1.ScheduleRecord, loggedNowMicros int64) string {
	window := rec.GetDefinition().GetAnomalyWindowMicros()
	if window <= 0 || rec.GetSeriesEnded() {
		return ""
	}
	reference := max(rec.GetNextNominalUnixMicros(), rec.GetGenerationStartedAtUnixMicros(), rec.GetResumeFloorUnixMicros())
	if late := loggedNowMicros - reference; late > window {
		return fmt.Sprintf("clock anomaly: logged time %s is %s past the schedule's cursor %s, more than its anomaly window of %s",
			instant(loggedNowMicros), duration(late), instant(reference), duration(window))
	}
	return ""
}

// instant formats a Unix-microsecond instant for messages.
func instant(unixMicros int64) string {
	if unixMicros < 0 || unixMicros > input.MaxInstantMicros {
		return fmt.Sprintf("%d µs", unixMicros)
	}
	return time.UnixMicro(unixMicros).UTC().Format("2006-01-02T15:04:05.999999Z")
}

// duration formats a microsecond duration for messages.
func duration(micros int64) string {
	if micros < 0 || micros > 1<<62/1000 {
		return fmt.Sprintf("%d µs", micros)
	}
	return (time.Duration(micros) * time.Microsecond).String()
}
