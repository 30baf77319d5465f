package schedule

import (
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

// Bounds of the optional per-definition windows, in microseconds.
const (
	MinWindowMicros = input.Second
	MaxWindowMicros = 365 * input.Day
)

// ValidateDefinition checks every field of a definition, before any write; the error is a
// Validation error naming the field relative to the definition (for a cron expression,
// "spec.cron.expression" with the field number and character position in the message).
func ValidateDefinition(def *orreryv1.ScheduleDefinition, lim input.Limits) *orrery.Error {
	if def == nil {
		return orrery.Invalid("", "is required")
	}
	if err := input.Lane("lane", def.GetLane(), false); err != nil {
		return orrery.AsError(err)
	}
	if err := input.UUID("schedule_id", def.GetScheduleId()); err != nil {
		return orrery.AsError(err)
	}
	if name := def.GetName(); name != "" {
		if err := input.Name("name", name, input.MaxScheduleNameBytes); err != nil {
			return orrery.AsError(err)
		}
	}
	if err := validateSpec(def.GetSpec(), def.GetScheduleId(), lim); err != nil {
		return err.InField("spec")
	}
	switch def.GetMisfire() {
	case orreryv1.MisfirePolicy_MISFIRE_POLICY_UNSPECIFIED, orreryv1.MisfirePolicy_MISFIRE_POLICY_CATCH_UP,
		orreryv1.MisfirePolicy_MISFIRE_POLICY_SKIP, orreryv1.MisfirePolicy_MISFIRE_POLICY_COALESCE:
	default:
		return orrery.Invalid("misfire", "unknown policy %d", def.GetMisfire())
	}
	switch def.GetOverlap() {
	case orreryv1.OverlapPolicy_OVERLAP_POLICY_UNSPECIFIED, orreryv1.OverlapPolicy_OVERLAP_POLICY_ALLOW_ALL,
		orreryv1.OverlapPolicy_OVERLAP_POLICY_SKIP, orreryv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE,
		orreryv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ALL, orreryv1.OverlapPolicy_OVERLAP_POLICY_CANCEL_OTHER:
	default:
		return orrery.Invalid("overlap", "unknown policy %d", def.GetOverlap())
	}
	if err := optionalWindow("catch_up_window_micros", def.GetCatchUpWindowMicros()); err != nil {
		return err
	}
	if err := optionalWindow("anomaly_window_micros", def.GetAnomalyWindowMicros()); err != nil {
		return err
	}
	if err := input.Template("template", def.GetTemplate(), lim); err != nil {
		return orrery.AsError(err)
	}
	if err := validatePace(def); err != nil {
		return err
	}
	if err := input.Labels("labels", def.GetLabels()); err != nil {
		return orrery.AsError(err)
	}
	if err := validateCalendarNames(def); err != nil {
		return err
	}
	if err := validateExpiredPolicy(def); err != nil {
		return err
	}
	if err := validateJitter(def); err != nil {
		return err
	}
	return validateBounds(def)
}

// HasBounds reports whether def sets a bound (start_at, end_at, max_occurrences): a behaviour
// of apply version 2.
func HasBounds(def *orreryv1.ScheduleDefinition) bool {
	return def.GetStartAtUnixMicros() != 0 || def.GetEndAtUnixMicros() != 0 || def.GetMaxOccurrences() != 0
}

// validateBounds checks the definition's bounds: instants within the representable range, a
// start for cron only, an end not before the start.
func validateBounds(def *orreryv1.ScheduleDefinition) *orrery.Error {
	start, end := def.GetStartAtUnixMicros(), def.GetEndAtUnixMicros()
	for _, b := range []struct {
		field  string
		micros int64
	}{{"start_at_unix_micros", start}, {"end_at_unix_micros", end}} {
		if b.micros < 0 || b.micros > input.MaxInstantMicros {
			return orrery.Invalid(b.field, "must be 0 (none) or an instant up to 9999-12-31, got %d", b.micros)
		}
	}
	if start != 0 && def.GetSpec().GetCron() == nil {
		return orrery.Invalid("start_at_unix_micros", "is for cron schedules only: an Every schedule starts at its first_due_at, and At and After have one instant")
	}
	if start != 0 && end != 0 && end < start {
		return orrery.Invalid("end_at_unix_micros", "is %s, before start_at %s", input.FormatInstant(end), input.FormatInstant(start))
	}
	return nil
}

// optionalWindow checks a window that is zero (off) or between MinWindowMicros and
// MaxWindowMicros.
func optionalWindow(field string, micros int64) *orrery.Error {
	if micros == 0 {
		return nil
	}
	return orrery.AsError(input.Duration(field, micros, MinWindowMicros, MaxWindowMicros))
}

func validateSpec(spec *orreryv1.ScheduleSpec, scheduleID string, lim input.Limits) *orrery.Error {
	switch kind := spec.GetKind().(type) {
	case *orreryv1.ScheduleSpec_At:
		return orrery.AsError(input.Instant("at.due_at_unix_micros", kind.At.GetDueAtUnixMicros()))
	case *orreryv1.ScheduleSpec_After:
		return orrery.AsError(input.Duration("after.delay_micros", kind.After.GetDelayMicros(), 0, lim.MaxDelayMicros))
	case *orreryv1.ScheduleSpec_Every:
		if err := input.Duration("every.interval_micros", kind.Every.GetIntervalMicros(), MinIntervalMicros, MaxIntervalMicros); err != nil {
			return orrery.AsError(err)
		}
		return orrery.AsError(input.Instant("every.first_due_at_unix_micros", kind.Every.GetFirstDueAtUnixMicros()))
	case *orreryv1.ScheduleSpec_Cron:
		if err := validateCron(kind.Cron, scheduleID, time.UTC); err != nil { // the zone: see ApplyConfigure
			return err.InField("cron")
		}
		return nil
	default:
		return orrery.Invalid("", "needs one of at, after, every or cron")
	}
}
