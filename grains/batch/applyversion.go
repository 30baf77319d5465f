package batch

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/schedule"
)

// KnownApplyVersion is the newest apply version this binary knows: it applies the entries of a
// partition at any version up to it, with that version's behaviour, and stops (Internal)
// before an entry of a partition at a higher one. Version 1 is the behaviour of every release
// before apply versions existed. A release that changes what apply does (a new command form,
// a field the state machine acts on, another result) raises it and gates the change, so that
// a partition takes the change only once every replica can: a part of the command wire in
// wireGates (a command that carries it earlier is refused, Validation, by every replica
// alike), a behaviour with Applier.takes. The
// versions and what each adds:
//
//  1. everything before apply versions;
//  2. a schedule's bounds (ScheduleDefinition start_at, end_at, max_occurrences:
//     ApplyVersionScheduleBounds);
//  3. an occurrence that used up its deliveries is ledgered DEAD_LETTERED, and pauses its
//     schedule when the definition sets pause_on_failure (ApplyVersionPauseOnFailure);
//  4. the overlap policy BUFFER_ALL, and a dead-lettered occurrence frees its schedule's
//     overlap slot at once (ApplyVersionBufferAll);
//  5. the overlap policy CANCEL_OTHER (ApplyVersionCancelOther);
//  6. a schedule's jitter (ScheduleDefinition jitter_micros, jitter_allow_early:
//     ApplyVersionJitter);
//  7. an expired occurrence stops its series (ScheduleDefinition expired, SkipExpired:
//     ApplyVersionExpiredStops);
//  8. a replaced generation is kept for inspection (ScheduleGeneration:
//     ApplyVersionGenerationHistory);
//  9. BackfillSchedule (ApplyVersionBackfill);
//  10. a schedule definition's labels (ApplyVersionLabels);
//  11. a schedule definition's catch-up pace (ApplyVersionPace);
//  12. a saga's labels (ApplyVersionSagaLabels);
//  13. PauseQueue and ResumeQueue (ApplyVersionQueuePause);
//  14. CancelMessage (ApplyVersionCancelMessage);
//  15. an EmitOccurrences from a caller that may manage the schedule, not only from the due
//     coordinator (ApplyVersionManualEmit);
//  16. the audit log bounded: a repeated denial counted on its window's record, the log
//     capped at audit.MaxRecords (ApplyVersionAuditBound);
//  17. exclusion calendars: PutCalendar, DeleteCalendar and ScheduleDefinition.calendars, an
//     excluded instant ledgered EXCLUDED (ApplyVersionCalendars);
//  18. compare-or-return: an enqueue, a saga timeout or a backfill occurrence under an id its
//     lane holds for another message fails IdempotencyConflict (ApplyVersionCompareOrReturn);
//  19. retry policies: SetQueueRetryPolicy, Enqueue.retry, MessageTemplate.retry and a failed
//     Release (error, backoff, retry): backoff computed in the partition, dead-letter or drop
//     once the attempts are used up (ApplyVersionRetryPolicies).
//  20. priorities: Enqueue.priority, MessageTemplate.priority and
//     PartitionLimits.priority_step_micros, a receive leasing by visible time minus priority ×
//     step (ApplyVersionPriority).
//  21. unique jobs: Enqueue.unique, an enqueue skipped as a duplicate of the message holding
//     its unique key in the lane (ApplyVersionUnique).
//  22. cluster-wide concurrency caps and rate limits per queue: SetQueueShare, and receives
//     that lease at most what the queue's share admits (ApplyVersionQueueShare).
//  23. long-poll receives carried in an entry (PartitionCommand.waiting) and applied after its
//     batch, so that a message is leased in the entry that makes it visible
//     (ApplyVersionWaitingInEntry).
const KnownApplyVersion uint32 = 23

// ApplyVersionScheduleBounds is the apply version that takes a schedule definition's bounds:
// before it a definition that sets one is refused (Validation), since a replica of an older
// release would ignore them and fire past them.
const ApplyVersionScheduleBounds uint32 = 2

// ApplyVersionPauseOnFailure is the apply version that ledgers a dead-lettered occurrence and
// takes a definition's pause_on_failure: before it a receive dead-letters without either, and
// a definition that sets it is refused (Validation).
const ApplyVersionPauseOnFailure uint32 = 3

// ApplyVersionBufferAll is the apply version that takes the overlap policy BUFFER_ALL and frees
// an overlap slot when its occurrence is dead-lettered (before it, the next emit notices).
const ApplyVersionBufferAll uint32 = 4

// ApplyVersionCancelOther is the apply version that takes the overlap policy CANCEL_OTHER.
const ApplyVersionCancelOther uint32 = 5

// ApplyVersionJitter is the apply version that takes a schedule definition's jitter: before it
// a definition that sets one is refused (Validation), since a replica of an older release
// would fire its occurrences at their nominal instants.
const ApplyVersionJitter uint32 = 6

// ApplyVersionExpiredStops is the apply version from which an occurrence whose time to live
// passed before it was enqueued stops its series (the emit fails Expired) unless the
// definition's expired policy is SKIP, and SkipExpired passes such occurrences. Before it every
// expired occurrence is passed EXPIRED, and a definition that sets an expired policy, or a
// SkipExpired, is refused (Validation).
const ApplyVersionExpiredStops uint32 = 7

// ApplyVersionGenerationHistory is the apply version from which a replacement keeps the
// replaced generation's record and a delete removes the kept ones (schedule.KeptGenerations).
const ApplyVersionGenerationHistory uint32 = 8

// ApplyVersionBackfill is the apply version that takes BackfillSchedule (before it: Validation).
const ApplyVersionBackfill uint32 = 9

// ApplyVersionLabels is the apply version that takes a schedule definition's labels (before it:
// Validation), so that no replica of an older release stores the definition without them.
const ApplyVersionLabels uint32 = 10

// ApplyVersionPace is the apply version that takes a definition's catch_up_pace (before it:
// Validation).
const ApplyVersionPace uint32 = 11

// ApplyVersionSagaLabels is the apply version that takes CompareExchangeSaga.labels (before
// it: Validation).
const ApplyVersionSagaLabels uint32 = 12

// ApplyVersionQueuePause is the apply version that takes PauseQueue and ResumeQueue (wire
// gates: before it a command carrying one is refused), so that no replica of an older release
// leases from a queue the others hold paused.
const ApplyVersionQueuePause uint32 = 13

// ApplyVersionCancelMessage is the apply version that takes CancelMessage (a wire gate), so
// that no replica of an older release acks a message the others hold cancelled.
const ApplyVersionCancelMessage uint32 = 14

// ApplyVersionPriority is the apply version that takes message priorities (wire gates on
// Enqueue.priority, MessageTemplate.priority and PartitionLimits.priority_step_micros): before
// it a command carrying one is refused, so no replica of an older release stores a message
// without the priority the others lease it by. A partition's leader proposes its priority step
// (SetLimits) only from it on; until then the partition holds the default step.
const ApplyVersionPriority uint32 = 20

// scheduleRules are the schedule state machine's rules at a's apply version.
func (a Applier) scheduleRules() schedule.Rules {
	return schedule.Rules{
		ExpiredStops:     a.version() >= ApplyVersionExpiredStops,
		KeepsGenerations: a.version() >= ApplyVersionGenerationHistory,
	}
}

// LoadApplyVersion returns the apply version the partition's state holds (keys.ApplyVersion,
// written by SetApplyVersion), 1 while it holds none.
func LoadApplyVersion(r kv.Reader) (uint32, error) {
	held := &orreryv1.PartitionApplyVersion{}
	found, err := record.Load(r, keys.ApplyVersion, held)
	if err != nil || !found || held.GetVersion() == 0 {
		return 1, err
	}
	return held.GetVersion(), nil
}

// version is the apply version a applies under (1 when unset).
func (a Applier) version() uint32 { return max(a.ApplyVersion, 1) }

// KnownApplyVersionOrDefault is the newest apply version a's binary knows: KnownApplyVersion,
// unless a.KnownApplyVersion stands for another binary's.
func (a Applier) KnownApplyVersionOrDefault() uint32 { return a.known() }

// known is the newest apply version a's binary knows (KnownApplyVersion unless a test says).
func (a Applier) known() uint32 {
	if a.KnownApplyVersion != 0 {
		return a.KnownApplyVersion
	}
	return KnownApplyVersion
}

// checkKnown fails an apply under a version this binary does not know (Internal: the replica
// stops applying rather than apply the entry otherwise than the replicas that know it).
func (a Applier) checkKnown() error {
	if v := a.version(); v > a.known() {
		return orrery.Errorf(orrery.CodeInternal,
			"the partition applies under apply version %d, and this binary knows versions up to %d: run a release that knows version %d", v, a.known(), v)
	}
	return nil
}

// ApplyVersionManualEmit is the apply version from which a caller holding SchedulerManage and
// QueuePublish on a schedule's lane may send its EmitOccurrences (client.ProcessDue); before
// it only Orrery's own principals may, and a replica of an older release refuses it.
const ApplyVersionManualEmit uint32 = 15

// ApplyVersionAuditBound is the apply version from which the audit log is bounded by size as
// well as age (audit.Trail.Write's bounded): a denial repeated within audit.DenialWindowMicros
// is counted on its first record, and a write past audit.MaxRecords removes the oldest.
const ApplyVersionAuditBound uint32 = 16

// ApplyVersionCalendars is the apply version that takes PutCalendar, DeleteCalendar and a
// schedule definition's calendars (wire gates: before it a command carrying one is refused),
// so that no replica of an older release fires an instant the others exclude.
const ApplyVersionCalendars uint32 = 17

// ApplyVersionCompareOrReturn is the apply version from which a message put under an id its
// lane already holds (live, or a tombstone) is taken for the one there only when it is the
// same message — payload_json, headers_json, ordering_key and origin — and fails
// IdempotencyConflict ("id") otherwise (queue.CompareOrReturn); the messages it stores are
// marked compared, and their tombstones keep the digest that comparison reads. Before it any message under a held
// id is taken for the one there (queue.SameByID).
const ApplyVersionCompareOrReturn uint32 = 18

// ApplyVersionUnique is the apply version that takes Enqueue.unique (a wire gate: before it
// an enqueue carrying one is refused), so that no replica of an older release stores a message
// the others skip as a duplicate.
const ApplyVersionUnique uint32 = 21

// ApplyVersionRetryPolicies is the apply version that takes retry policies (wire gates:
// SetQueueRetryPolicy, Enqueue.retry, MessageTemplate.retry, Release.error, backoff and retry;
// before it a command carrying one is refused), so that no replica of an older release
// releases a failed message after another delay, or keeps it, where the others dead-letter it.
const ApplyVersionRetryPolicies uint32 = 19

// idempotency is how the queue's puts treat a held id at a's apply version.
func (a Applier) idempotency() queue.Idempotency {
	if a.takes(ApplyVersionCompareOrReturn) {
		return queue.CompareOrReturn
	}
	return queue.SameByID
}

// takes reports whether the partition applies under version needed or a later one: whether a
// behaviour introduced by needed is on. Every replica reads the version from the state, so all
// behave alike until the partition's leader raises it (SetApplyVersion), which it does once
// every voter of the group runs a release that knows it.
func (a Applier) takes(needed uint32) bool { return a.version() >= needed }

// applySetApplyVersion raises the partition's apply version. A version this binary does not
// know is Internal (the replica stops: it cannot apply what follows as the others will), one
// below the partition's is Validation (versions never go back), and the partition's own is a
// no-op.
func (a Applier) applySetApplyVersion(v kv.View, m *orreryv1.SetApplyVersion) error {
	want := m.GetVersion()
	switch {
	case want == 0:
		return orrery.Invalid("version", "must be positive")
	case want > a.known():
		return orrery.Errorf(orrery.CodeInternal, "apply version %d: this binary knows versions up to %d: run a release that knows version %d", want, a.known(), want)
	case want < a.version():
		return orrery.Invalid("version", "is %d, below the partition's apply version %d: apply versions never go back", want, a.version())
	case want == a.version():
		return nil
	}
	_, err := record.Store(v, keys.ApplyVersion, &orreryv1.PartitionApplyVersion{Version: want})
	return err
}

// ApplyVersionQueueShare is the apply version that takes SetQueueShare (a wire gate: before it a
// command carrying one is refused), so that no replica of an older release leases past a share
// the others hold. Receives change only where a share is set, which needs this version.
const ApplyVersionQueueShare uint32 = 22

// ApplyVersionWaitingInEntry is the apply version from which an entry's waiting receives
// (PartitionCommand.waiting) apply after its batch. Below it they are ignored, as a replica
// of an older release, which does not know the field, ignores them; a leader carries them
// only from this version.
const ApplyVersionWaitingInEntry uint32 = 23

// TakesWaitingInEntry reports whether a applies an entry's waiting receives
// (ApplyVersionWaitingInEntry).
func (a Applier) TakesWaitingInEntry() bool { return a.takes(ApplyVersionWaitingInEntry) }
