package schedule

import (
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// ApplyConfigure creates (expected revision 0, id absent) or replaces (exact current revision)
// a schedule. Replacement increments revision and generation, resets the ordinal to 0, clears
// cancelled and paused, and keeps the original creator.
func ApplyConfigure(v kv.View, lim input.Limits, principal string, m *orreryv1.ConfigureSchedule, loggedNowMicros int64) (*orreryv1.ScheduleResult, error) {
	def := m.GetDefinition()
	if err := ValidateDefinition(def, lim); err != nil {
		return nil, err.InField("definition")
	}
	lane, id := def.GetLane(), def.GetScheduleId()
	if _, deleted, err := v.Get(keys.ScheduleTombstoneKey(lane, id)); err != nil {
		return nil, err
	} else if deleted {
		return nil, orrery.FieldErrorf(orrery.CodeRevisionConflict, "definition.schedule_id", "schedule %s was deleted; its id cannot be configured again", id)
	}
	old, found, err := Load(v, lane, id)
	if err != nil {
		return nil, err
	}
	rec := &orreryv1.ScheduleRecord{
		Definition:                    proto.Clone(def).(*orreryv1.ScheduleDefinition),
		Revision:                      1,
		Generation:                    1,
		Creator:                       principal,
		GenerationStartedAtUnixMicros: loggedNowMicros,
	}
	var oldDueAt int64
	switch {
	case m.GetExpectedRevision() == 0 && found:
		return nil, orrery.FieldErrorf(orrery.CodeRevisionConflict, "expected_revision", "schedule %s exists at revision %d; expected revision 0 creates only an absent schedule", id, old.GetRevision())
	case m.GetExpectedRevision() != 0 && !found:
		return nil, orrery.FieldErrorf(orrery.CodeNotFound, "definition.schedule_id", "no schedule %s to replace at revision %d", id, m.GetExpectedRevision())
	case found:
		if err := checkRevision(old, m.GetExpectedRevision()); err != nil {
			return nil, err
		}
		rec.Revision = old.GetRevision() + 1
		rec.Generation = old.GetGeneration() + 1
		rec.Creator = old.GetCreator()
		oldDueAt = old.GetNextDueAtUnixMicros()
	}
	if err := refreshNextDue(rec); err != nil {
		return nil, orrery.AsError(err)
	}
	if err := save(v, lim, rec, oldDueAt); err != nil {
		return nil, err
	}
	return result(rec, nil), nil
}

// ValidateDefinition checks every field of a definition; the error names the field relative
// to the definition.
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
	if err := validateSpec(def.GetSpec(), lim); err != nil {
		return err.InField("spec")
	}
	switch def.GetMisfire() {
	case orreryv1.MisfirePolicy_MISFIRE_POLICY_UNSPECIFIED, orreryv1.MisfirePolicy_MISFIRE_POLICY_CATCH_UP:
	case orreryv1.MisfirePolicy_MISFIRE_POLICY_SKIP, orreryv1.MisfirePolicy_MISFIRE_POLICY_COALESCE:
		return orrery.Invalid("misfire", "policy %s is not supported yet; use CATCH_UP", def.GetMisfire())
	default:
		return orrery.Invalid("misfire", "unknown policy %d", def.GetMisfire())
	}
	switch def.GetOverlap() {
	case orreryv1.OverlapPolicy_OVERLAP_POLICY_UNSPECIFIED, orreryv1.OverlapPolicy_OVERLAP_POLICY_ALLOW_ALL:
	case orreryv1.OverlapPolicy_OVERLAP_POLICY_SKIP, orreryv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE:
		return orrery.Invalid("overlap", "policy %s is not supported yet; use ALLOW_ALL", def.GetOverlap())
	default:
		return orrery.Invalid("overlap", "unknown policy %d", def.GetOverlap())
	}
	if err := input.Template("template", def.GetTemplate(), lim); err != nil {
		return orrery.AsError(err)
	}
	return nil
}

func validateSpec(spec *orreryv1.ScheduleSpec, lim input.Limits) *orrery.Error {
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
	default:
		return orrery.Invalid("", "needs one of at, after or every")
	}
}
