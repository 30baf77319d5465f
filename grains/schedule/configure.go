package schedule

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// ApplyConfigure creates (expected revision 0, id absent) or replaces (exact current revision)
// a schedule. Replacement increments revision and generation, resets the ordinal (and the
// cron cursor) to the new generation's start, clears cancelled, paused and suspended, drops a
// buffered occurrence (ledger DROPPED) and keeps the original creator and the overlap slot's
// in-flight occurrence (still un-acked, it still overlaps). A cron generation pins the
// partition's evaluator version, and its zone is evaluated with the rules the partition holds,
// which the carried rules (PartitionCommand.zone_rules, see ZoneRulesFor) replace when they are
// of a newer release; a zone that neither holds is unknown (Validation on
// definition.spec.cron.time_zone).
//
// Every calendar the definition references must exist in the partition (Validation on
// definition.calendars[i]); the schedule's references move to the new definition's calendars.
//
// Under Rules.KeepsGenerations a replacement keeps the replaced record as a ScheduleGeneration
// (the last KeptGenerations).
func ApplyConfigure(v kv.View, lim input.Limits, principal string, m *orreryv1.ConfigureSchedule, carried []*orreryv1.ZoneRules, loggedNowMicros int64, rules Rules) (*orreryv1.ScheduleResult, error) {
	def := m.GetDefinition()
	if err := ValidateDefinition(def, lim); err != nil {
		return nil, err.InField("definition")
	}
	location, adopt := time.UTC, (*orreryv1.ZoneRules)(nil)
	if c := def.GetSpec().GetCron(); c != nil {
		var err error
		if location, adopt, err = configureZone(v, c.GetTimeZone(), carried); err != nil {
			return nil, orrery.AsError(err).InField("definition.spec.cron")
		}
		if err := validateCron(c, def.GetScheduleId(), location); err != nil {
			return nil, err.InField("definition.spec.cron")
		}
	}
	if err := checkCalendarsExist(v, def); err != nil {
		return nil, err.InField("definition")
	}
	lane, id := def.GetLane(), def.GetScheduleId()
	if deleted, err := Deleted(v, lane, id); err != nil {
		return nil, err
	} else if deleted {
		return nil, orrery.FieldErrorf(orrery.CodeRevisionConflict, "definition.schedule_id", "schedule %s was deleted; %s", id, deletedStaysTerminal)
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
		rec.InFlightMessageId = old.GetInFlightMessageId()
		rec.InFlightExpiresAtUnixMicros = old.GetInFlightExpiresAtUnixMicros()
		oldDueAt = old.GetNextDueAtUnixMicros()
	}
	if def.GetSpec().GetCron() != nil {
		// Occurrences at or after the generation's start, and its start bound.
		rec.CronCursorUnixMicros = max(loggedNowMicros, def.GetStartAtUnixMicros()) - 1
	}
	pinEvaluator(rec)
	s, err := newSeries(rec, location)
	if err != nil {
		return nil, err
	}
	if err := s.setNext(); err != nil {
		return nil, orrery.AsError(err)
	}
	refreshNextDue(rec)
	if found && rules.KeepsGenerations {
		if err := keepGeneration(v, lim, old, principal, loggedNowMicros); err != nil {
			return nil, err
		}
	}
	if found {
		reason := fmt.Sprintf("generation %d was replaced by generation %d", old.GetGeneration(), rec.GetGeneration())
		if err := dropBuffered(v, old, reason, loggedNowMicros); err != nil {
			return nil, err
		}
	}
	if err := storeZoneRules(v, adopt); err != nil {
		return nil, err
	}
	if err := referenceCalendars(v, old.GetDefinition(), def); err != nil {
		return nil, err
	}
	if err := save(v, lim, rec, oldDueAt, loggedNowMicros); err != nil {
		return nil, err
	}
	res := result(rec, nil)
	res.AlreadyDue, res.FirstAlreadyDueAtUnixMicros, res.LastAlreadyDueAtUnixMicros = alreadyDue(def.GetSpec(), loggedNowMicros)
	return res, nil
}

// deletedStaysTerminal is what the refusals of a deleted schedule's id say of it.
const deletedStaysTerminal = "its id cannot be configured again (a new schedule of its name takes the name's next id: ResolveName)"

// alreadyDue counts the instants of a new generation of spec that are due at or before the
// configure's logged time, with the first and the last (zero: none): the ones from an Every
// start or an At instant in the past. A cron generation starts at the configure and an After
// one after it, so neither has any.
func alreadyDue(spec *orreryv1.ScheduleSpec, loggedNowMicros int64) (count uint64, first, last int64) {
	switch {
	case spec.GetEvery() != nil:
		start, interval := spec.GetEvery().GetFirstDueAtUnixMicros(), spec.GetEvery().GetIntervalMicros()
		if interval <= 0 || start > loggedNowMicros {
			return 0, 0, 0
		}
		n := (loggedNowMicros-start)/interval + 1
		return uint64(n), start, start + (n-1)*interval
	case spec.GetAt() != nil:
		if at := spec.GetAt().GetDueAtUnixMicros(); at <= loggedNowMicros {
			return 1, at, at
		}
	}
	return 0, 0, 0
}
