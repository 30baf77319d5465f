package batch

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/schedule"
)

// need is one capability a mutation needs, for a namespace and queue, and the access its
// documents need under that capability's field policies (grants.CheckFields).
type need struct {
	capability       grants.Capability
	namespace, queue string
	access           grants.Access
	docs             []grants.Document
}

// templateDocs are the documents of a message template.
func templateDocs(t *orreryv1.MessageTemplate) []grants.Document {
	return []grants.Document{{Root: grants.PayloadRoot, JSON: t.GetPayloadJson()}, {Root: grants.HeadersRoot, JSON: t.GetHeadersJson()}}
}

// scheduleNeeds are what writing a schedule in lane with template needs (access on the
// template's fields under QueuePublish: write for a caller configuring it, use for the creator
// whose template is emitted).
func scheduleNeeds(lane *orreryv1.Lane, template *orreryv1.MessageTemplate, access grants.Access) []need {
	return []need{{capability: grants.SchedulerManage, namespace: lane.GetNamespace(), queue: lane.GetQueue()},
		{capability: grants.QueuePublish, namespace: lane.GetNamespace(), queue: lane.GetQueue(), access: access, docs: templateDocs(template)}}
}

// authorize checks, before a mutation applies, that the caller (principal) may send it and
// that the creator of the schedule or saga it continues still holds what the record's work
// needs, both from the grants of this partition in the same view (docs/design.md §8).
func (a Applier) authorize(v kv.Reader, principal string, m *orreryv1.Mutation) error {
	if err := a.authorizeCaller(v, principal, m); err != nil {
		return err
	}
	return authorizeCreator(v, m)
}

// authorizeCaller checks the caller's own authority for m: the capabilities of its kind, or,
// for the internal commands, that the caller is one of Orrery's own principals. PutGrant and
// DeleteGrant check their authority themselves (grants.ApplyPut), against the grants they
// change.
func (a Applier) authorizeCaller(v kv.Reader, principal string, m *orreryv1.Mutation) error {
	var needs []need
	schedules := func(lane *orreryv1.Lane) { needs = scheduleNeeds(lane, nil, 0) }
	switch k := m.GetKind().(type) {
	case *orreryv1.Mutation_ConfigureSchedule:
		def := k.ConfigureSchedule.GetDefinition()
		needs = scheduleNeeds(def.GetLane(), def.GetTemplate(), grants.Write)
	case *orreryv1.Mutation_CancelSchedule:
		schedules(k.CancelSchedule.GetLane())
	case *orreryv1.Mutation_DeleteSchedule:
		schedules(k.DeleteSchedule.GetLane())
	case *orreryv1.Mutation_PauseSchedule:
		schedules(k.PauseSchedule.GetLane())
	case *orreryv1.Mutation_ResumeSchedule:
		schedules(k.ResumeSchedule.GetLane())
	case *orreryv1.Mutation_TriggerSchedule:
		schedules(k.TriggerSchedule.GetLane())
	case *orreryv1.Mutation_SkipExpired:
		schedules(k.SkipExpired.GetLane())
	case *orreryv1.Mutation_BackfillSchedule:
		schedules(k.BackfillSchedule.GetLane())
	case *orreryv1.Mutation_CompareExchangeSaga:
		needs = sagaNeeds(k.CompareExchangeSaga, grants.Write)
	case *orreryv1.Mutation_Enqueue:
		e := k.Enqueue
		needs = []need{{capability: grants.QueuePublish, namespace: e.GetLane().GetNamespace(), queue: e.GetLane().GetQueue(), access: grants.Write,
			docs: []grants.Document{{Root: grants.PayloadRoot, JSON: e.GetPayloadJson()}, {Root: grants.HeadersRoot, JSON: e.GetHeadersJson()}}}}
	case *orreryv1.Mutation_Receive:
		needs = []need{{capability: grants.QueueConsume, namespace: k.Receive.GetNamespace(), queue: k.Receive.GetQueue()}}
	case *orreryv1.Mutation_Ack, *orreryv1.Mutation_Release, *orreryv1.Mutation_ExtendLease:
		lane := laneOf(m)
		needs = []need{{capability: grants.QueueConsume, namespace: lane.GetNamespace(), queue: lane.GetQueue()}}
	case *orreryv1.Mutation_EmitOccurrences:
		// The due coordinator's; from ApplyVersionManualEmit also a caller's that may manage
		// the schedule (client.ProcessDue), as the creator's authority is checked either way.
		lane := k.EmitOccurrences.GetLane()
		if !a.takes(ApplyVersionManualEmit) || input.IsSystem(principal) {
			return grants.RequireSystem(principal, "emit_occurrences")
		}
		schedules(lane)
	case *orreryv1.Mutation_ExpireSaga:
		return grants.RequireSystem(principal, "expire_saga")
	case *orreryv1.Mutation_RedriveDeadLetters:
		// It takes messages out of the dead-letter queue and publishes them to the live one.
		lane := k.RedriveDeadLetters.GetLane()
		needs = queueAdminNeeds(lane.GetNamespace(), lane.GetQueue())
	case *orreryv1.Mutation_PauseQueue:
		needs = queueAdminNeeds(k.PauseQueue.GetNamespace(), k.PauseQueue.GetQueue())
	case *orreryv1.Mutation_ResumeQueue:
		needs = queueAdminNeeds(k.ResumeQueue.GetNamespace(), k.ResumeQueue.GetQueue())
	case *orreryv1.Mutation_SetQueueRetryPolicy:
		needs = queueAdminNeeds(k.SetQueueRetryPolicy.GetNamespace(), k.SetQueueRetryPolicy.GetQueue())
	case *orreryv1.Mutation_SetQueueShare:
		if input.IsSystem(principal) {
			return nil // a silo's rebalancer moving share units (its sets compare what they change)
		}
		needs = queueAdminNeeds(k.SetQueueShare.GetNamespace(), k.SetQueueShare.GetQueue())
	case *orreryv1.Mutation_CancelMessage:
		lane := k.CancelMessage.GetLane()
		needs = queueAdminNeeds(lane.GetNamespace(), lane.GetQueue())
	case *orreryv1.Mutation_PutCalendar:
		// A calendar is the namespace's, whatever the queue of the schedules that use it.
		needs = []need{{capability: grants.SchedulerManage, namespace: k.PutCalendar.GetCalendar().GetNamespace()}}
	case *orreryv1.Mutation_DeleteCalendar:
		needs = []need{{capability: grants.SchedulerManage, namespace: k.DeleteCalendar.GetNamespace()}}
	case *orreryv1.Mutation_Housekeep:
		return grants.RequireSystem(principal, "housekeep")
	case *orreryv1.Mutation_CheckConsistency:
		return grants.RequireSystem(principal, "check_consistency")
	case *orreryv1.Mutation_SetLimits:
		return grants.RequireSystem(principal, "set_limits")
	case *orreryv1.Mutation_RefreshZoneRules:
		return grants.RequireSystem(principal, "refresh_zone_rules")
	case *orreryv1.Mutation_SetApplyVersion:
		return grants.RequireSystem(principal, "set_apply_version")
	case *orreryv1.Mutation_PutGrant, *orreryv1.Mutation_DeleteGrant, nil: // a mutation without a kind fails in dispatch
		return nil
	default:
		return orrery.Errorf(orrery.CodeUnauthorized, "mutation %T has no authorization rule", k)
	}
	return require(v, grants.Caller(principal), principal, needs)
}

// queueAdminNeeds are what an operator's action on a queue needs, the actions that change what
// the queue's consumers get: QueueConsume and QueuePublish on it. A redrive (dead letters
// taken out and published again), a pause or resume, and a cancel of a message by id need
// them, and so does setting its retry policy (what becomes of its failed messages); no
// capability is a queue's own admin.
func queueAdminNeeds(namespace, queue string) []need {
	return []need{{capability: grants.QueueConsume, namespace: namespace, queue: queue},
		{capability: grants.QueuePublish, namespace: namespace, queue: queue}}
}

// laneOf returns the lane of a lease mutation.
func laneOf(m *orreryv1.Mutation) *orreryv1.Lane {
	switch k := m.GetKind().(type) {
	case *orreryv1.Mutation_Ack:
		return k.Ack.GetLane()
	case *orreryv1.Mutation_Release:
		return k.Release.GetLane()
	case *orreryv1.Mutation_ExtendLease:
		return k.ExtendLease.GetLane()
	}
	return nil
}

// sagaNeeds are what writing m's saga needs: SagaManage in its lane with access to the state's
// fields, and QueuePublish on its timeout's queue with access to the timeout template's fields
// when it has one (write for the exchange, use for the expiry that enqueues it).
func sagaNeeds(m *orreryv1.CompareExchangeSaga, access grants.Access) []need {
	lane := m.GetLane()
	needs := []need{{capability: grants.SagaManage, namespace: lane.GetNamespace(), queue: lane.GetQueue(), access: access,
		docs: []grants.Document{{Root: grants.StateRoot, JSON: m.GetStateJson()}}}}
	if t := m.GetTimeout(); t != nil {
		needs = append(needs, need{capability: grants.QueuePublish, namespace: lane.GetNamespace(), queue: t.GetQueue(), access: access, docs: templateDocs(t.GetTemplate())})
	}
	return needs
}

// authorizeCreator re-checks the current authority of the creator of the record a mutation
// continues with the creator's templates or state: an emit, a trigger and a replacement of a
// schedule (SchedulerManage and QueuePublish in its lane), an update of a saga (SagaManage,
// QueuePublish on the new timeout's queue) and its expiry (SagaManage, QueuePublish on the
// stored timeout's queue). It runs after the checks of the record's token (the expected
// generation or revision, the saga's Waiting phase) would pass: a stale token, a missing
// record or a terminal saga is left to the mutation to report. Cancel, pause, resume and
// delete only stop work and need no creator authority.
func authorizeCreator(v kv.Reader, m *orreryv1.Mutation) error {
	switch k := m.GetKind().(type) {
	case *orreryv1.Mutation_EmitOccurrences:
		e := k.EmitOccurrences
		return scheduleCreator(v, e.GetLane(), e.GetScheduleId(), nil, func(rec *orreryv1.ScheduleRecord) bool {
			return rec.GetGeneration() == e.GetExpectedGeneration()
		})
	case *orreryv1.Mutation_TriggerSchedule:
		t := k.TriggerSchedule
		return scheduleCreator(v, t.GetLane(), t.GetScheduleId(), nil, func(*orreryv1.ScheduleRecord) bool { return true })
	case *orreryv1.Mutation_ConfigureSchedule:
		c := k.ConfigureSchedule
		if c.GetExpectedRevision() == 0 { // a creation: the caller becomes the creator
			return nil
		}
		def := c.GetDefinition()
		return scheduleCreator(v, def.GetLane(), def.GetScheduleId(), def.GetTemplate(), func(rec *orreryv1.ScheduleRecord) bool {
			return rec.GetRevision() == c.GetExpectedRevision()
		})
	case *orreryv1.Mutation_CompareExchangeSaga:
		x := k.CompareExchangeSaga
		if x.GetExpectedRevision() == 0 {
			return nil
		}
		rec, err := waitingSaga(v, x.GetLane(), x.GetSagaId(), x.GetExpectedRevision())
		if rec == nil || err != nil {
			return err
		}
		return require(v, creatorOfSaga, rec.GetCreator(), sagaNeeds(x, grants.Write))
	case *orreryv1.Mutation_ExpireSaga:
		x := k.ExpireSaga
		rec, err := waitingSaga(v, x.GetLane(), x.GetSagaId(), x.GetExpectedRevision())
		if rec == nil || err != nil {
			return err
		}
		return require(v, creatorOfSaga, rec.GetCreator(), sagaNeeds(&orreryv1.CompareExchangeSaga{Lane: rec.GetLane(), Timeout: rec.GetTimeout()}, grants.Use))
	}
	return nil
}

// scheduleCreator checks the creator of the schedule at lane and id, when it exists and
// current accepts it, for SchedulerManage and QueuePublish in its lane: with write on the
// fields of replacement, the template a replacement sets, or else with use on the fields of
// the stored template its occurrences carry.
func scheduleCreator(v kv.Reader, lane *orreryv1.Lane, id string, replacement *orreryv1.MessageTemplate, current func(*orreryv1.ScheduleRecord) bool) error {
	rec, found, err := schedule.Load(v, lane, id)
	if err != nil || !found || !current(rec) {
		return err
	}
	lane = rec.GetDefinition().GetLane()
	needs := scheduleNeeds(lane, rec.GetDefinition().GetTemplate(), grants.Use)
	if replacement != nil {
		needs = scheduleNeeds(lane, replacement, grants.Write)
	}
	return require(v, "the creator of the schedule", rec.GetCreator(), needs)
}

// waitingSaga returns the saga at lane and id when it is Waiting at exactly revision, or nil.
func waitingSaga(v kv.Reader, lane *orreryv1.Lane, id string, revision uint64) (*orreryv1.SagaRecord, error) {
	rec := &orreryv1.SagaRecord{}
	found, err := record.Load(v, keys.SagaKey(lane, id), rec)
	if err != nil || !found || rec.GetRevision() != revision || rec.GetPhase() != orreryv1.SagaPhase_SAGA_PHASE_WAITING {
		return nil, err
	}
	return rec, nil
}

// creatorOfSaga is the subject of a saga creator's denials; no reply names a creator.
const creatorOfSaga = "the creator of the saga"

// require checks that principal holds every need; subject is who a denial names
// (grants.Require).
func require(v kv.Reader, subject, principal string, needs []need) error {
	grant, err := grants.Load(v, principal)
	if err != nil {
		return err
	}
	for _, n := range needs {
		if err := grants.RequireOf(grant, subject, n.capability, n.namespace, n.queue); err != nil {
			return err
		}
	}
	for _, n := range needs {
		if err := grants.CheckFields(grant, subject, n.capability, n.namespace, n.queue, n.access, n.docs...); err != nil {
			return err
		}
	}
	return nil
}
