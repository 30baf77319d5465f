package schedule

import (
	"fmt"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// defaultMaxPassedPerEmit applies when Limits.MaxPassedPerEmit is zero.
const defaultMaxPassedPerEmit = 1024

// maxPassedPerEmit is the most ordinals one command passes without a message.
func maxPassedPerEmit(lim input.Limits) uint32 {
	if lim.MaxPassedPerEmit == 0 {
		return defaultMaxPassedPerEmit
	}
	return lim.MaxPassedPerEmit
}

// ApplyEmit passes the ordinals of the expected generation that are due at logged time,
// applying the misfire and overlap policies, and advances the watermark in the same view as
// the messages and ledger records it writes. It enqueues at most m.Max messages (zero means
// 1) and passes at most Limits.MaxPassedPerEmit ordinals without a message, leaving the rest
// due. A stale generation fails TokenInvalidated; nothing due (or a cancelled, paused or
// suspended schedule) succeeds with the revision unchanged and writes nothing.
//
// Before passing anything it checks that the partition holds the rules of a cron generation's
// zone, and the clock anomaly guard: either failing suspends the schedule (a SUSPENDED ledger record,
// the reason in the record and the result, no due entry) and the emit succeeds with nothing
// enqueued. An occurrence whose TTL has already passed at the logged time is passed without a
// message and recorded EXPIRED with the reason: logged time never goes back, so it could never
// be enqueued, and leaving it due would stop the schedule for good.
//
// While ordinals a resume left to be passed PAUSED remain (see passPaused), an emit passes
// only those, at most Limits.MaxPassedPerEmit, and skips the clock anomaly guard: it
// enqueues nothing, so a jump of the clock cannot make it flood.
func ApplyEmit(v kv.View, lim input.Limits, m *orreryv1.EmitOccurrences, loggedNowMicros int64) (*orreryv1.ScheduleResult, error) {
	return ApplyEmitWithin(v, lim, m, loggedNowMicros, nil, Newest)
}

// Rules are the behaviours of the schedule state machine that depend on the partition's apply
// version (batch.Applier sets them from it).
type Rules struct {
	// ExpiredStops (apply version 7): an occurrence whose time to live passed before it could
	// be enqueued stops the series there, unless its definition's expired policy is SKIP (see
	// orreryv1.ExpiredPolicy); without it every expired occurrence is passed EXPIRED.
	ExpiredStops bool
	// KeepsGenerations (apply version 8): a replacement keeps the replaced generation's record
	// (ScheduleGeneration, the last KeptGenerations), and a delete removes them.
	KeepsGenerations bool
}

// Newest is every rule of the newest apply version.
var Newest = Rules{ExpiredStops: true, KeepsGenerations: true}

// EmitBudget is the budget the EmitOccurrences of one batch share (see
// Limits.MaxEmitBytesPerBatch). The zero value with its limits set is a fresh budget.
type EmitBudget struct {
	// Limit is the most payload and header bytes the batch's emits enqueue, once the first
	// occurrence has gone (0: no byte bound).
	Limit int
	// MaxOccurrences is the most occurrences the batch's emits enqueue (0: no bound).
	MaxOccurrences int
	used, count    int
}

// allows reports whether another occurrence fits.
func (b *EmitBudget) allows() bool {
	if b == nil {
		return true
	}
	return (b.Limit <= 0 || b.used == 0 || b.used < b.Limit) && (b.MaxOccurrences <= 0 || b.count < b.MaxOccurrences)
}

func (b *EmitBudget) spend(n int) {
	if b != nil {
		b.used += n
		b.count++
	}
}

// ApplyEmitWithin is ApplyEmit with the batch's byte budget (it stops, leaving the rest due,
// once the budget is spent; nil: no byte bound) and the partition's apply-version rules.
func ApplyEmitWithin(v kv.View, lim input.Limits, m *orreryv1.EmitOccurrences, loggedNowMicros int64, budget *EmitBudget, rules Rules) (*orreryv1.ScheduleResult, error) {
	maxEmit := m.GetMax()
	if maxEmit == 0 {
		maxEmit = 1
	}
	if maxEmit > lim.MaxEmitPerCommand {
		return nil, orrery.Invalid("max", "must be at most %d, got %d", lim.MaxEmitPerCommand, maxEmit)
	}
	rec, err := loadExisting(v, m.GetLane(), m.GetScheduleId())
	if err != nil {
		return nil, err
	}
	if rec.GetGeneration() != m.GetExpectedGeneration() {
		return nil, orrery.FieldErrorf(orrery.CodeTokenInvalidated, "expected_generation", "schedule is at generation %d, expected %d", rec.GetGeneration(), m.GetExpectedGeneration())
	}
	if !canEmit(rec) {
		return result(rec, nil), nil
	}
	e := &emitter{v: v, lim: lim, rec: rec, now: loggedNowMicros, maxEmit: maxEmit, maxPassed: maxPassedPerEmit(lim), budget: budget, rules: rules}
	seriesDue := !rec.GetSeriesEnded() && nextFireAt(rec) <= loggedNowMicros
	bufferedDue := false
	if rec.GetBuffered() != nil {
		if bufferedDue, err = e.slotFree(); err != nil {
			return nil, err
		}
	}
	if !seriesDue && !bufferedDue {
		return result(rec, nil), nil
	}
	oldDueAt := rec.GetNextDueAtUnixMicros()
	s, reason, err := evaluate(v, rec)
	if err != nil {
		return nil, err
	}
	e.series = s
	if e.exclusions, err = loadExclusions(v, rec.GetDefinition()); err != nil {
		return nil, err
	}
	if reason == "" && !pausedBacklog(rec) {
		reason = clockAnomaly(rec, loggedNowMicros)
	}
	if reason != "" {
		if e.passed, err = suspend(v, rec, reason, loggedNowMicros); err != nil {
			return nil, err
		}
		e.changed = true
	} else if err := e.run(); err != nil {
		return nil, err
	}
	if !e.changed && !(e.held && nextDue(rec) != oldDueAt) {
		return result(rec, nil), nil
	}
	// (A held series that changed nothing else still moves its due entry out of the due
	// index, or to its holder's expiry, so that it is not emitted again until then.)
	rec.Revision++
	refreshNextDue(rec)
	if err := save(v, lim, rec, oldDueAt, loggedNowMicros); err != nil {
		return nil, err
	}
	res := result(rec, e.enqueued)
	res.PassedWithoutMessage, res.EnqueuedNominalDueAtUnixMicros = e.passed, e.nominals
	return res, nil
}

// emitter is the state of one ApplyEmit.
type emitter struct {
	v         kv.View
	lim       input.Limits
	rec       *orreryv1.ScheduleRecord
	series    series
	now       int64
	maxEmit   uint32
	maxPassed uint32
	enqueued  []string
	nominals  []int64 // the nominal instant of each enqueued occurrence
	passed    uint32  // ordinals passed without a message
	changed   bool
	// held is set when the series stopped at an instant because its slot is taken (BUFFER_ALL)
	// or its catch-up pace's window is full.
	held bool
	// stopped is set when the series stopped at an expired occurrence after this emit had
	// already changed the record (see Rules.ExpiredStops): what it did is kept, and the
	// next emit fails at that occurrence.
	stopped bool
	budget  *EmitBudget // the batch's byte budget (nil: none)
	rules   Rules
	// exclusions are the calendars the definition references (nil: none).
	exclusions exclusions
}

// point is one nominal instant of the series.
type point struct {
	ordinal uint64
	nominal int64
}

// unit is what one step of the emit fires: an ordinal, and under COALESCE the earlier
// ordinals it stands for and those among them a calendar excludes.
type unit struct {
	point
	coalesced []point
	excluded  []excludedPoint
}

// excludedPoint is an instant a calendar excludes, and why.
type excludedPoint struct {
	point
	reason string
}

func (e *emitter) room() bool {
	return uint32(len(e.enqueued)) < e.maxEmit && e.passed < e.maxPassed && e.budget.allows()
}

// run passes the ordinals a resume left to be passed PAUSED, and nothing else while any
// remain; otherwise it flushes a buffered occurrence whose slot is free, then passes due
// ordinals.
func (e *emitter) run() error {
	s, err := e.series, error(nil)
	if pausedBacklog(e.rec) {
		var passed uint32
		passed, err = passPaused(e.v, e.rec, s, e.maxPassed, e.now)
		e.passed += passed
		e.changed = e.changed || passed > 0
		return err
	}
	if err := e.flushBuffered(); err != nil {
		return err
	}
	def := e.rec.GetDefinition()
	window := def.GetCatchUpWindowMicros()
	for e.room() {
		rec := e.rec
		if rec.GetSeriesEnded() || nextFireAt(rec) > e.now {
			return nil
		}
		current := point{rec.GetNextOrdinal(), rec.GetNextNominalUnixMicros()}
		if reason := e.exclusions.excludes(current.nominal); reason != "" {
			// Excluded: passed with its record, whatever the window and the policies say.
			if err := e.passWithout(current, orreryv1.LedgerOutcome_LEDGER_OUTCOME_EXCLUDED, reason); err != nil {
				return err
			}
			continue
		}
		if window > 0 && current.nominal < e.now-window {
			if err := e.passWithout(current, orreryv1.LedgerOutcome_LEDGER_OUTCOME_MISSED_CATCHUP_WINDOW, ""); err != nil {
				return err
			}
			continue
		}
		u := unit{point: current}
		switch def.GetMisfire() {
		case orreryv1.MisfirePolicy_MISFIRE_POLICY_SKIP:
			next, exists, err := e.nextIncluded(current)
			if err != nil {
				return err
			}
			if exists && fireAt(e.rec, next.ordinal, next.nominal) <= e.now {
				if err := e.passWithout(current, orreryv1.LedgerOutcome_LEDGER_OUTCOME_SKIPPED_MISFIRE, ""); err != nil {
					return err
				}
				continue
			}
		case orreryv1.MisfirePolicy_MISFIRE_POLICY_COALESCE:
			if u, err = e.coalesce(current); err != nil {
				return err
			}
		}
		if err := e.fire(u); err != nil {
			return err
		}
		if e.held || e.stopped {
			return nil
		}
	}
	return nil
}

// nextIncluded is the first instant after p that no calendar excludes, looking at most as far
// as the pass budget allows (exists is false past it, or at the series' end).
func (e *emitter) nextIncluded(p point) (point, bool, error) {
	for range max(1, int(e.maxPassed-e.passed)) {
		at, exists, err := e.series.after(p.ordinal+1, p.nominal)
		if err != nil || !exists {
			return point{}, false, err
		}
		p = point{p.ordinal + 1, at}
		if e.exclusions.excludes(at) == "" {
			return p, true, nil
		}
	}
	return point{}, false, nil
}

// coalesce gathers the due instants from first on, as many as the pass budget allows; the
// last one carries the others. The instants a calendar excludes among them are passed EXCLUDED
// with the unit, never carried; those after its last instant are left to the next step.
func (e *emitter) coalesce(first point) (unit, error) {
	members := []point{first}
	var excluded, pending []excludedPoint
	budget := int(e.maxPassed - e.passed)
	last := first
	for len(members)-1+len(excluded)+len(pending) < budget {
		next, exists, err := e.series.after(last.ordinal+1, last.nominal)
		if err != nil {
			return unit{}, err
		}
		if !exists || fireAt(e.rec, last.ordinal+1, next) > e.now {
			break
		}
		last = point{last.ordinal + 1, next}
		if reason := e.exclusions.excludes(next); reason != "" {
			pending = append(pending, excludedPoint{last, reason})
			continue
		}
		excluded, pending = append(excluded, pending...), nil
		members = append(members, last)
	}
	return unit{point: members[len(members)-1], coalesced: members[:len(members)-1], excluded: excluded}, nil
}

// passWithout passes one ordinal without a message, recording outcome (and reason, if any).
func (e *emitter) passWithout(p point, outcome orreryv1.LedgerOutcome, reason string) error {
	entry := ledgerEntry(e.rec, p.ordinal, p.nominal, outcome)
	entry.Reason = reason
	if err := writeFreshLedger(e.v, e.rec.GetDefinition().GetLane(), entry, e.now); err != nil {
		return err
	}
	e.passed++
	e.changed = true
	return e.series.pass(p.ordinal, p.nominal)
}

// origin is the provenance of the occurrence a unit fires.
func (e *emitter) origin(u unit) *orreryv1.OccurrenceOrigin {
	o := &orreryv1.OccurrenceOrigin{
		ScheduleId:             e.rec.GetDefinition().GetScheduleId(),
		Generation:             e.rec.GetGeneration(),
		Ordinal:                u.ordinal,
		NominalDueAtUnixMicros: u.nominal,
	}
	if e.rec.GetDefinition().GetMisfire() == orreryv1.MisfirePolicy_MISFIRE_POLICY_COALESCE {
		o.CoalescedCount = uint64(len(u.coalesced)) + 1
		o.FirstNominalDueAtUnixMicros = u.nominal
		if len(u.coalesced) > 0 {
			o.FirstNominalDueAtUnixMicros = u.coalesced[0].nominal
		}
		o.LastNominalDueAtUnixMicros = u.nominal
	}
	return o
}

// fire passes a unit through the overlap policy: enqueue it (or record it EXPIRED when its
// TTL has passed), buffer it or skip it, then record the instants it stands for and pass them
// all.
func (e *emitter) fire(u unit) error {
	origin := e.origin(u)
	id := OccurrenceID(origin.GetScheduleId(), origin.GetGeneration(), u.ordinal)
	if e.expiredStops() && occurrenceExpired(e.rec.GetDefinition(), fireAt(e.rec, u.ordinal, u.nominal), e.now) {
		// Checked first, so that nothing (a CANCEL_OTHER's cancel) happens for it.
		if e.changed {
			e.stopped = true
			return nil
		}
		return expiredStop(e.rec, u.point, e.now)
	}
	if !paceAllows(e.rec, e.now) {
		// The pace window is full: the series waits, due again when the window ends.
		e.held = true
		return nil
	}
	outcome := orreryv1.LedgerOutcome_LEDGER_OUTCOME_ENQUEUED
	reason := ""
	free := true
	if e.rec.GetDefinition().GetOverlap() != orreryv1.OverlapPolicy_OVERLAP_POLICY_UNSPECIFIED &&
		e.rec.GetDefinition().GetOverlap() != orreryv1.OverlapPolicy_OVERLAP_POLICY_ALLOW_ALL {
		var err error
		if free, err = e.slotFree(); err != nil {
			return err
		}
	}
	if !free && e.rec.GetDefinition().GetOverlap() == orreryv1.OverlapPolicy_OVERLAP_POLICY_CANCEL_OTHER {
		if err := e.cancelHolder(u.ordinal); err != nil {
			return err
		}
		free = true
	}
	switch {
	case !free && e.rec.GetDefinition().GetOverlap() == orreryv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ALL:
		// The series waits for the slot: nothing is passed, and the instants stay due.
		e.held = true
		return nil
	case free:
		if err := e.enqueue(origin); err != nil {
			if orrery.CodeOf(err) != orrery.CodeExpired {
				return err
			}
			outcome, id, reason = orreryv1.LedgerOutcome_LEDGER_OUTCOME_EXPIRED, "", expiredReason(e.rec, u.nominal, e.now)
			e.passed++
		}
	case e.rec.GetDefinition().GetOverlap() == orreryv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE && e.rec.GetBuffered() == nil:
		outcome = orreryv1.LedgerOutcome_LEDGER_OUTCOME_BUFFERED
		e.rec.Buffered = origin
		e.passed++
	default:
		outcome, id = orreryv1.LedgerOutcome_LEDGER_OUTCOME_SKIPPED_OVERLAP, ""
		e.passed++
	}
	e.changed = true
	lane := e.rec.GetDefinition().GetLane()
	entry := ledgerEntry(e.rec, u.ordinal, u.nominal, outcome)
	entry.MessageId, entry.Reason = id, reason
	// Every ordinal fire records is passed here for the first time.
	if err := writeFreshLedger(e.v, lane, entry, e.now); err != nil {
		return err
	}
	for _, c := range u.coalesced {
		member := ledgerEntry(e.rec, c.ordinal, c.nominal, orreryv1.LedgerOutcome_LEDGER_OUTCOME_COALESCED_INTO)
		member.CoalescedIntoOrdinal = u.ordinal
		member.MessageId = OccurrenceID(origin.GetScheduleId(), origin.GetGeneration(), u.ordinal)
		if outcome == orreryv1.LedgerOutcome_LEDGER_OUTCOME_EXPIRED {
			// The occurrence that stands for it expired, and so (being earlier) did it.
			member.Outcome, member.CoalescedIntoOrdinal, member.MessageId = outcome, 0, ""
			member.Reason = expiredReason(e.rec, c.nominal, e.now)
		}
		if err := writeFreshLedger(e.v, lane, member, e.now); err != nil {
			return err
		}
		e.passed++
	}
	for _, x := range u.excluded {
		entry := ledgerEntry(e.rec, x.ordinal, x.nominal, orreryv1.LedgerOutcome_LEDGER_OUTCOME_EXCLUDED)
		entry.Reason = x.reason
		if err := writeFreshLedger(e.v, lane, entry, e.now); err != nil {
			return err
		}
		e.passed++
	}
	return e.series.pass(u.ordinal, u.nominal)
}

// expiredReason says why the occurrence due at nominal was passed EXPIRED at logged time now.
func expiredReason(rec *orreryv1.ScheduleRecord, nominalMicros, loggedNowMicros int64) string {
	ttl := rec.GetDefinition().GetTemplate().GetTimeToLiveMicros()
	return fmt.Sprintf("time to live passed: due at %s with a time to live of %s, passed at logged time %s",
		instant(nominalMicros), duration(ttl), instant(loggedNowMicros))
}
