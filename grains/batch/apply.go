package batch

import (
	"crypto/sha256"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/audit"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/route"
	"github.com/orreryhq/orrery/grains/saga"
	"github.com/orreryhq/orrery/grains/schedule"
)

// Applier applies commands under a set of limits. Every replica of a partition must use the
// same limits for apply to stay deterministic: the partition's (LoadLimits), never a silo's.
type Applier struct {
	Limits input.Limits
	// Partitions and Partition, when Partitions is positive, make every mutation whose lane
	// routes to another partition fail Validation on its lane: a batch is atomic only within
	// one partition, so a misrouted lane must never be written here.
	Partitions int
	Partition  int
	// ZoneRules are the zone rules the entry being applied carries (PartitionCommand.zone_rules,
	// schedule.ZoneRulesFor): set them per entry. A ConfigureSchedule evaluates its cron zone
	// with them or with the rules the partition holds, never with a zone database.
	ZoneRules []*orreryv1.ZoneRules
	// ApplyVersion is the apply version the partition applies under (LoadApplyVersion; 0 is 1),
	// which every replica reads from the state as it reads Limits.
	ApplyVersion uint32
	// KnownApplyVersion, when positive, stands for KnownApplyVersion: a test's older or newer
	// binary.
	KnownApplyVersion uint32
}

// AsLeader returns a copy of a that carries what a leader proposing b would carry with it
// (its binary's zone rules, schedule.ZoneRulesFor): for a twin that proposes and applies at
// once. A replica applying a logged entry sets ZoneRules from the entry instead.
func (a Applier) AsLeader(b *orreryv1.Batch) Applier {
	a.ZoneRules = schedule.ZoneRulesFor(b.GetMutations())
	return a
}

// Outcome is the result of ApplyBatch: the receipt, its deterministic encoding (what is
// stored and sent), and whether it was replayed from the inbox.
type Outcome struct {
	Receipt      *orreryv1.Receipt
	ReceiptBytes []byte
	Replayed     bool
}

// ApplyBatch applies a command at loggedNow. Business outcomes are in the receipt; the error
// return is for a bad command envelope (Validation: no receipt is stored), a command id
// reused with a different request (IdempotencyConflict), or a platform failure of the view,
// after which the caller must discard everything written to v.
func (a Applier) ApplyBatch(v kv.View, principal string, b *orreryv1.Batch, loggedNowMicros int64) (*Outcome, error) {
	if err := a.checkKnown(); err != nil {
		return nil, err
	}
	if err := checkEnvelope(principal, b, loggedNowMicros); err != nil {
		return nil, err
	}
	if err := a.checkWire(b); err != nil {
		return nil, err
	}
	hash, err := RequestHash(b)
	if err != nil {
		return nil, err
	}
	inboxKey := keys.InboxKey(principal, b.GetCommandId())
	if replay, err := a.replay(v, inboxKey, hash); replay != nil || err != nil {
		if err == nil {
			err = a.reauthorize(v, principal, b)
		}
		if err == nil {
			err = reproject(v, principal, b, replay)
		}
		if err != nil {
			return nil, err
		}
		return replay, nil
	}

	receipt, err := a.apply(v, principal, b, loggedNowMicros, false)
	if err != nil {
		return nil, err
	}
	encoded, err := record.Marshal(receipt)
	if err != nil {
		return nil, err
	}
	if err := a.storeReceipt(v, principal, b.GetCommandId(), hash, encoded, loggedNowMicros); err != nil {
		return nil, err
	}
	return &Outcome{Receipt: receipt, ReceiptBytes: encoded}, nil
}

// DueBatchOccurrences bounds the occurrences one due command enqueues (its emits share it,
// oldest due first), so that its writes stay well inside one transaction whatever its refs'
// backlogs; what it leaves stays due for the next one.
const DueBatchOccurrences = 512

// ApplyDue applies a due coordinator's command (a PartitionCommand with due set): the
// EmitOccurrences and ExpireSaga mutations of refs of the due index, with their CAS tokens. It
// stores no inbox entry or receipt (the tokens make it idempotent), each mutation stands alone
// (one that fails, QuotaExceeded included, fails alone and leaves the others applied), and its
// emits enqueue at most DueBatchOccurrences in all. The receipt it returns goes to the
// coordinator only.
func (a Applier) ApplyDue(v kv.View, principal string, b *orreryv1.Batch, loggedNowMicros int64) (*orreryv1.Receipt, error) {
	if err := a.checkKnown(); err != nil {
		return nil, err
	}
	if err := checkEnvelope(principal, b, loggedNowMicros); err != nil {
		return nil, err
	}
	if err := a.checkWire(b); err != nil {
		return nil, err
	}
	if b.GetAllOrNothing() {
		return nil, orrery.Invalid("all_or_nothing", "must be false in a due command")
	}
	for i, m := range b.GetMutations() {
		if m.GetEmitOccurrences() == nil && m.GetExpireSaga() == nil {
			return nil, orrery.Invalid(fmt.Sprintf("mutations[%d]", i), "a due command holds only emit_occurrences and expire_saga")
		}
	}
	return a.apply(v, principal, b, loggedNowMicros, true)
}

// CheckWaiting returns the error a batch whose only mutation is a Receive would get from
// ApplyBatch at loggedNow for a bad envelope, an invalid receive or a caller without
// QueueConsume on its queue (the receive's error named by its field in the batch, as in a
// receipt), or nil. It reads only the caller's grant from r and writes nothing: a long-poll
// receive is checked before it waits, since waiting never applies it, and whether a queue
// holds a visible message is for its consumers only.
func (a Applier) CheckWaiting(r kv.Reader, principal string, b *orreryv1.Batch, loggedNowMicros int64) error {
	if err := checkEnvelope(principal, b, loggedNowMicros); err != nil {
		return err
	}
	if len(b.GetMutations()) != 1 || b.GetMutations()[0].GetReceive() == nil {
		return orrery.Invalid("mutations", "a waiting command holds exactly one receive")
	}
	if err := a.authorizeCaller(r, principal, b.GetMutations()[0]); err != nil {
		return orrery.AsError(err).InField("mutations[0].receive")
	}
	if err := queue.CheckReceive(a.Limits, b.GetMutations()[0].GetReceive(), loggedNowMicros); err != nil {
		return orrery.AsError(err).InField("mutations[0].receive")
	}
	return nil
}

// checkEnvelope validates what every batch carries besides its mutations.
func checkEnvelope(principal string, b *orreryv1.Batch, loggedNowMicros int64) error {
	if err := input.Name("principal", principal, input.MaxIDBytes); err != nil {
		return err
	}
	if err := input.Name("command_id", b.GetCommandId(), input.MaxIDBytes); err != nil {
		return err
	}
	return input.Instant("logged_time", loggedNowMicros)
}

// apply applies the mutations of b over v and returns the receipt. Unless independent, a
// rollback (QuotaExceeded, or any failure under all_or_nothing) leaves v untouched but for the
// audit records of its denials, and the receipt carries the batch's error. The audit records
// (grant changes applied, mutations denied Unauthorized) go straight to v, outside the
// buffers a rollback discards.
func (a Applier) apply(v kv.View, principal string, b *orreryv1.Batch, loggedNowMicros int64, independent bool) (*orreryv1.Receipt, error) {
	receipt := &orreryv1.Receipt{CommandId: b.GetCommandId(), LoggedTimeUnixMicros: loggedNowMicros}
	trail := &audit.Trail{}
	if independent { // nothing rolls the whole batch back: mutations write straight to v
		if _, err := a.applyMutations(v, principal, b, loggedNowMicros, receipt, trail, true); err != nil {
			return receipt, err
		}
		return receipt, trail.Write(v, principal, b.GetCommandId(), loggedNowMicros, true, a.takes(ApplyVersionAuditBound))
	}
	batchWrites := kv.NewBuffer(v)
	rollback, err := a.applyMutations(batchWrites, principal, b, loggedNowMicros, receipt, trail, false)
	if err != nil {
		return nil, err
	}
	if rollback == nil {
		if err := batchWrites.Commit(); err != nil {
			return nil, err
		}
	} else {
		receipt.Results = nil
		receipt.Error = rollback.Proto()
	}
	if err := trail.Write(v, principal, b.GetCommandId(), loggedNowMicros, rollback == nil, a.takes(ApplyVersionAuditBound)); err != nil {
		return nil, err
	}
	return receipt, nil
}

// applyMutations runs each mutation on its own buffer over batchWrites, adding its grant
// changes and denials to trail. It returns the error that rolls the whole batch back, if any
// (never when independent).
func (a Applier) applyMutations(batchWrites kv.View, principal string, b *orreryv1.Batch, loggedNowMicros int64, receipt *orreryv1.Receipt, trail *audit.Trail, independent bool) (*orrery.Error, error) {
	if len(b.GetMutations()) == 0 {
		return orrery.Invalid("mutations", "must not be empty"), nil
	}
	if err := checkCount(a.Limits, len(b.GetMutations())); err != nil {
		return err, nil
	}
	budget := &schedule.EmitBudget{Limit: a.Limits.MaxEmitBytesPerBatch}
	if independent {
		budget.MaxOccurrences = DueBatchOccurrences
	}
	for i, m := range b.GetMutations() {
		writes := kv.NewBuffer(batchWrites)
		res, err := a.routed(m)
		if err == nil {
			err = MutationSizes(a.Limits, m)
		}
		if err == nil {
			res, err = a.dispatch(writes, principal, m, loggedNowMicros, budget, func(old *orreryv1.GrantRecord) {
				trail.GrantChanged(i, kindName(m), m, old)
			})
		}
		if err != nil {
			e := orrery.AsError(err)
			if platform(e) {
				return nil, err
			}
			trail.Denied(i, kindName(m), m, e)
			e = e.InField(mutationField(i, m))
			if !independent && (e.Code == orrery.CodeQuotaExceeded || b.GetAllOrNothing()) {
				return e, nil
			}
			receipt.Results = append(receipt.Results, &orreryv1.MutationResult{Error: e.Proto()})
			continue
		}
		if err := writes.Commit(); err != nil {
			return nil, err
		}
		receipt.Results = append(receipt.Results, res)
	}
	return nil, nil
}

// routed fails a mutation whose lane belongs to another partition.
func (a Applier) routed(m *orreryv1.Mutation) (*orreryv1.MutationResult, error) {
	if a.Partitions <= 0 {
		return nil, nil
	}
	lane := route.MutationLane(m)
	if lane == nil {
		return nil, nil
	}
	if n := route.Partition(lane, a.Partitions); n != a.Partition {
		field := "lane"
		if m.GetConfigureSchedule() != nil {
			field = "definition.lane"
		}
		return nil, orrery.Invalid(field, "routes to partition %d, not to partition %d that received it", n, a.Partition)
	}
	return nil, nil
}

// replay returns the stored outcome of a command id, IdempotencyConflict if the id was used
// for a different request, or nil if the id is new.
func (a Applier) replay(v kv.Reader, inboxKey, hash []byte) (*Outcome, error) {
	entry := &orreryv1.InboxEntry{}
	found, err := record.Load(v, inboxKey, entry)
	if err != nil || !found {
		return nil, err
	}
	if string(entry.GetRequestHash()) != string(hash) {
		return nil, orrery.FieldErrorf(orrery.CodeIdempotencyConflict, "command_id", "command id was already used for a different request")
	}
	receipt := &orreryv1.Receipt{}
	if err := proto.Unmarshal(entry.GetReceipt(), receipt); err != nil {
		return nil, orrery.Wrap(orrery.CodeInternal, err, "decode stored receipt")
	}
	return &Outcome{Receipt: receipt, ReceiptBytes: entry.GetReceipt(), Replayed: true}, nil
}

// reauthorize checks the caller's current authority for every mutation of a command whose
// receipt is replayed: a receipt (a receive's messages, a schedule's revision) goes only to a
// caller that may still send the command. A denial is the command's error, with no receipt;
// nothing is applied again either way.
func (a Applier) reauthorize(v kv.Reader, principal string, b *orreryv1.Batch) error {
	for i, m := range b.GetMutations() {
		if err := a.authorizeCaller(v, principal, m); err != nil {
			return orrery.AsError(err).InField(mutationField(i, m))
		}
	}
	return nil
}

// RequestHash is the SHA-256 of the batch's deterministic encoding.
func RequestHash(b *orreryv1.Batch) ([]byte, error) {
	encoded, err := record.Marshal(b)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(encoded)
	return sum[:], nil
}

// platform reports whether an error is a platform failure that aborts the whole apply rather
// than a business outcome recorded in the receipt.
func platform(e *orrery.Error) bool {
	switch e.Code {
	case orrery.CodeInternal, orrery.CodeUnavailable, orrery.CodeDeadlineExceeded:
		return true
	}
	return false
}

// dispatch applies one mutation to its buffer; a grant change that applies calls changed with
// the target's old grant.
func (a Applier) dispatch(v kv.View, principal string, m *orreryv1.Mutation, now int64, budget *schedule.EmitBudget, changed func(old *orreryv1.GrantRecord)) (*orreryv1.MutationResult, error) {
	lim := a.Limits
	if err := a.authorize(v, principal, m); err != nil {
		return nil, err
	}
	switch k := m.GetKind().(type) {
	case *orreryv1.Mutation_ConfigureSchedule:
		return scheduleResult(schedule.ApplyConfigure(v, lim, principal, k.ConfigureSchedule, a.ZoneRules, now, a.scheduleRules()))
	case *orreryv1.Mutation_EmitOccurrences:
		return scheduleResult(schedule.ApplyEmitWithin(v, lim, k.EmitOccurrences, now, budget,
			a.scheduleRules()))
	case *orreryv1.Mutation_BackfillSchedule:
		return scheduleResult(schedule.ApplyBackfill(v, lim, k.BackfillSchedule, now, a.idempotency()))
	case *orreryv1.Mutation_SkipExpired:
		return scheduleResult(schedule.ApplySkipExpired(v, lim, principal, k.SkipExpired, now))
	case *orreryv1.Mutation_CancelSchedule:
		return scheduleResult(schedule.ApplyCancel(v, lim, k.CancelSchedule))
	case *orreryv1.Mutation_DeleteSchedule:
		return scheduleResult(schedule.ApplyDelete(v, k.DeleteSchedule, now, a.scheduleRules()))
	case *orreryv1.Mutation_PauseSchedule:
		return scheduleResult(schedule.ApplyPause(v, lim, k.PauseSchedule, now))
	case *orreryv1.Mutation_ResumeSchedule:
		return scheduleResult(schedule.ApplyResume(v, lim, k.ResumeSchedule, now))
	case *orreryv1.Mutation_TriggerSchedule:
		return scheduleResult(schedule.ApplyTrigger(v, lim, k.TriggerSchedule, now))
	case *orreryv1.Mutation_CompareExchangeSaga:
		return sagaResult(saga.ApplyCompareExchange(v, lim, principal, k.CompareExchangeSaga, now))
	case *orreryv1.Mutation_ExpireSaga:
		return sagaResult(saga.ApplyExpire(v, lim, k.ExpireSaga, now, a.idempotency()))
	case *orreryv1.Mutation_Enqueue:
		r, err := queue.ApplyEnqueue(v, lim, k.Enqueue, now, a.idempotency())
		return wrap(err, func() *orreryv1.MutationResult {
			return &orreryv1.MutationResult{Result: &orreryv1.MutationResult_Enqueue{Enqueue: r}}
		})
	case *orreryv1.Mutation_Receive:
		r, err := queue.ApplyReceiveNoting(v, lim, k.Receive, now, a.exhausted(v, now))
		if err == nil {
			err = projectReceive(v, principal, r)
		}
		return wrap(err, func() *orreryv1.MutationResult {
			return &orreryv1.MutationResult{Result: &orreryv1.MutationResult_Receive{Receive: r}}
		})
	case *orreryv1.Mutation_Ack:
		// The ack that ends an occurrence frees its schedule's overlap slot in the same view.
		r, acked, err := queue.ApplyAck(v, lim, k.Ack, now)
		if err == nil {
			err = schedule.ReleaseSlot(v, lim, acked)
		}
		return leaseResult(r, err)
	case *orreryv1.Mutation_Release:
		return leaseResult(queue.ApplyReleaseNoting(v, lim, k.Release, now, a.exhausted(v, now)))
	case *orreryv1.Mutation_ExtendLease:
		return leaseResult(queue.ApplyExtendLease(v, lim, k.ExtendLease, now))
	case *orreryv1.Mutation_PauseQueue:
		return queuePauseResult(queue.ApplyPause(v, principal, k.PauseQueue, now))
	case *orreryv1.Mutation_ResumeQueue:
		return queuePauseResult(queue.ApplyResume(v, k.ResumeQueue))
	case *orreryv1.Mutation_SetQueueShare:
		r, err := queue.ApplySetShare(v, lim, principal, k.SetQueueShare, now)
		return wrap(err, func() *orreryv1.MutationResult {
			return &orreryv1.MutationResult{Result: &orreryv1.MutationResult_QueueShare{QueueShare: r}}
		})
	case *orreryv1.Mutation_CancelMessage:
		r, cancelled, err := queue.ApplyCancel(v, principal, k.CancelMessage, now)
		if err == nil && cancelled != nil {
			// A cancelled occurrence is ledgered and frees its schedule's overlap slot now.
			err = schedule.MessageCancelled(v, lim, cancelled, principal, k.CancelMessage.GetReason(), now)
		}
		return wrap(err, func() *orreryv1.MutationResult {
			return &orreryv1.MutationResult{Result: &orreryv1.MutationResult_CancelMessage{CancelMessage: r}}
		})
	case *orreryv1.Mutation_SetQueueRetryPolicy:
		r, err := queue.ApplySetRetryPolicy(v, lim, principal, k.SetQueueRetryPolicy, now)
		return wrap(err, func() *orreryv1.MutationResult {
			return &orreryv1.MutationResult{Result: &orreryv1.MutationResult_QueueRetryPolicy{QueueRetryPolicy: r}}
		})
	case *orreryv1.Mutation_PutCalendar:
		return calendarResult(schedule.ApplyPutCalendar(v, principal, k.PutCalendar, a.ZoneRules, now))
	case *orreryv1.Mutation_DeleteCalendar:
		return calendarResult(schedule.ApplyDeleteCalendar(v, k.DeleteCalendar))
	case *orreryv1.Mutation_RedriveDeadLetters:
		r, err := queue.ApplyRedrive(v, lim, k.RedriveDeadLetters, now)
		return wrap(err, func() *orreryv1.MutationResult {
			return &orreryv1.MutationResult{Result: &orreryv1.MutationResult_Redrive{Redrive: r}}
		})
	case *orreryv1.Mutation_Housekeep:
		r, err := a.housekeep(v, k.Housekeep, now)
		return wrap(err, func() *orreryv1.MutationResult {
			return &orreryv1.MutationResult{Result: &orreryv1.MutationResult_Housekeep{Housekeep: r}}
		})
	case *orreryv1.Mutation_CheckConsistency:
		// Changes nothing: each replica's state machine hashes its state as of the entry.
		return &orreryv1.MutationResult{}, nil
	case *orreryv1.Mutation_SetLimits:
		// The state machine applies later entries under them (see LoadLimits).
		return wrap(applySetLimits(v, k.SetLimits), func() *orreryv1.MutationResult { return &orreryv1.MutationResult{} })
	case *orreryv1.Mutation_SetApplyVersion:
		// The state machine applies later entries under it (see LoadApplyVersion).
		return wrap(a.applySetApplyVersion(v, k.SetApplyVersion), func() *orreryv1.MutationResult { return &orreryv1.MutationResult{} })
	case *orreryv1.Mutation_RefreshZoneRules:
		// The zones' cron schedules follow the new rules from their next instant on.
		_, err := schedule.ApplyRefreshZoneRules(v, k.RefreshZoneRules, a.ZoneRules)
		return wrap(err, func() *orreryv1.MutationResult { return &orreryv1.MutationResult{} })
	case *orreryv1.Mutation_PutGrant, *orreryv1.Mutation_DeleteGrant:
		return a.changeGrant(v, principal, m, changed)
	default:
		return nil, orrery.Invalid("", "has no kind")
	}
}

// changeGrant applies a PutGrant or DeleteGrant and, when it applies, calls changed with the
// target's old grant.
func (a Applier) changeGrant(v kv.View, principal string, m *orreryv1.Mutation, changed func(old *orreryv1.GrantRecord)) (*orreryv1.MutationResult, error) {
	target := m.GetPutGrant().GetPrincipal()
	if m.GetDeleteGrant() != nil {
		target = m.GetDeleteGrant().GetPrincipal()
	}
	var old *orreryv1.GrantRecord
	if input.Name("principal", target, input.MaxIDBytes) == nil { // else the mutation fails on it
		var err error
		if old, err = grants.Load(v, target); err != nil {
			return nil, err
		}
	}
	var err error
	if put := m.GetPutGrant(); put != nil {
		err = grants.ApplyPut(v, principal, put)
	} else {
		err = grants.ApplyDelete(v, principal, m.GetDeleteGrant())
	}
	if err != nil {
		return nil, err
	}
	if !sameRules(old.GetRules(), m.GetPutGrant().GetRules()) { // a put or delete that leaves the grant as it was changed nothing
		changed(old)
	}
	return &orreryv1.MutationResult{}, nil
}

// sameRules reports whether two grants' rules are equal, in order (a delete's are none).
func sameRules(a, b []*orreryv1.GrantRule) bool {
	return slices.EqualFunc(a, b, func(x, y *orreryv1.GrantRule) bool { return proto.Equal(x, y) })
}

func wrap(err error, build func() *orreryv1.MutationResult) (*orreryv1.MutationResult, error) {
	if err != nil {
		return nil, err
	}
	return build(), nil
}

func scheduleResult(r *orreryv1.ScheduleResult, err error) (*orreryv1.MutationResult, error) {
	return wrap(err, func() *orreryv1.MutationResult {
		return &orreryv1.MutationResult{Result: &orreryv1.MutationResult_Schedule{Schedule: r}}
	})
}

func sagaResult(r *orreryv1.SagaResult, err error) (*orreryv1.MutationResult, error) {
	return wrap(err, func() *orreryv1.MutationResult {
		return &orreryv1.MutationResult{Result: &orreryv1.MutationResult_Saga{Saga: r}}
	})
}

func queuePauseResult(r *orreryv1.QueuePauseResult, err error) (*orreryv1.MutationResult, error) {
	return wrap(err, func() *orreryv1.MutationResult {
		return &orreryv1.MutationResult{Result: &orreryv1.MutationResult_QueuePause{QueuePause: r}}
	})
}

func calendarResult(r *orreryv1.CalendarResult, err error) (*orreryv1.MutationResult, error) {
	return wrap(err, func() *orreryv1.MutationResult {
		return &orreryv1.MutationResult{Result: &orreryv1.MutationResult_Calendar{Calendar: r}}
	})
}

func leaseResult(r *orreryv1.LeaseResult, err error) (*orreryv1.MutationResult, error) {
	return wrap(err, func() *orreryv1.MutationResult {
		return &orreryv1.MutationResult{Result: &orreryv1.MutationResult_Lease{Lease: r}}
	})
}

// kindName is the proto field name of a mutation's kind, for error field paths.
func kindName(m *orreryv1.Mutation) string {
	oneof := m.ProtoReflect().Descriptor().Oneofs().ByName("kind")
	if f := m.ProtoReflect().WhichOneof(oneof); f != nil {
		return string(f.Name())
	}
	return ""
}

// exhausted is what a receive or a failed release calls with each message it takes out of its
// lane for good (queue.Noting): from ApplyVersionPauseOnFailure an occurrence is ledgered
// DEAD_LETTERED — a dropped one too, its reason saying so — and may pause its schedule, and from
// ApplyVersionBufferAll it frees its schedule's overlap slot at once.
func (a Applier) exhausted(v kv.View, now int64) queue.Noting {
	if !a.takes(ApplyVersionPauseOnFailure) {
		return nil
	}
	lim, releases := a.Limits, a.takes(ApplyVersionBufferAll)
	return func(msg *orreryv1.QueueMessage, how queue.Exhaustion) error {
		if err := schedule.DeadLettered(v, lim, msg, how == queue.Dropped, now); err != nil || !releases {
			return err
		}
		// A dead-lettered or dropped occurrence no longer holds its schedule's overlap slot.
		return schedule.ReleaseSlot(v, lim, msg)
	}
}
