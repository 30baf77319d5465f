package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/schedule"
)

// The schedule policies and states, named in Go so that a caller of Schedules needs no wire
// package. Each is the wire enum's value; the zero value of a policy means the silo's default
// (catch up; allow all overlap).
const (
	MisfireCatchUp  = orreryv1.MisfirePolicy_MISFIRE_POLICY_CATCH_UP
	MisfireSkip     = orreryv1.MisfirePolicy_MISFIRE_POLICY_SKIP
	MisfireCoalesce = orreryv1.MisfirePolicy_MISFIRE_POLICY_COALESCE

	OverlapAllowAll  = orreryv1.OverlapPolicy_OVERLAP_POLICY_ALLOW_ALL
	OverlapSkip      = orreryv1.OverlapPolicy_OVERLAP_POLICY_SKIP
	OverlapBufferOne = orreryv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE
	// OverlapBufferAll fires every instant, one at a time: the series waits while an
	// occurrence is in flight (apply version 4).
	OverlapBufferAll = orreryv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ALL
	// OverlapCancelOther replaces the occurrence in flight with the new one: its lease is
	// revoked, and its worker cancels its handler's context at its next lease extension
	// (apply version 5).
	OverlapCancelOther = orreryv1.OverlapPolicy_OVERLAP_POLICY_CANCEL_OTHER

	// ExpiredFail (the default from apply version 7) stops the schedule at an occurrence whose
	// TimeToLive passed before it could be enqueued: nothing is lost, the watchdog reports the
	// schedule failing (Describe's Liveness), and SkipExpired or an Update resolves it.
	ExpiredFail = orreryv1.ExpiredPolicy_EXPIRED_POLICY_FAIL
	// ExpiredSkip passes such an occurrence with an "expired" ledger record and goes on.
	ExpiredSkip = orreryv1.ExpiredPolicy_EXPIRED_POLICY_SKIP

	ScheduleActive    = orreryv1.ScheduleState_SCHEDULE_STATE_ACTIVE
	SchedulePaused    = orreryv1.ScheduleState_SCHEDULE_STATE_PAUSED
	ScheduleSuspended = orreryv1.ScheduleState_SCHEDULE_STATE_SUSPENDED
	ScheduleCancelled = orreryv1.ScheduleState_SCHEDULE_STATE_CANCELLED
	ScheduleCompleted = orreryv1.ScheduleState_SCHEDULE_STATE_COMPLETED
)

// The refusals of a schedule's state, for errors.Is: an action the schedule's state does not
// allow (Trigger or Pause of a paused schedule; Trigger, Pause or Resume of a cancelled one;
// Trigger of a suspended one) fails with code Suspended, whose field names the state that
// refused it, and matches exactly one of these (and orrery.ErrSuspended, as every error of the
// code does). A paused schedule needs a Resume; a cancelled or suspended one a new definition
// (Update, Upsert).
var (
	ErrSchedulePaused    = &orrery.Error{Code: orrery.CodeSuspended, Field: "paused"}
	ErrScheduleCancelled = &orrery.Error{Code: orrery.CodeSuspended, Field: "cancelled"}
	ErrScheduleSuspended = &orrery.Error{Code: orrery.CodeSuspended, Field: "suspended"}
)

// ExpiredPolicy says what a schedule does with an occurrence whose TimeToLive passed before it
// could be enqueued (ExpiredFail, ExpiredSkip).
type ExpiredPolicy = orreryv1.ExpiredPolicy

// MisfirePolicy says what a schedule does with instants that passed while nothing could emit
// them (MisfireCatchUp, MisfireSkip, MisfireCoalesce).
type MisfirePolicy = orreryv1.MisfirePolicy

// OverlapPolicy says what a schedule does with an instant while its previous occurrence is
// still in flight (OverlapAllowAll, OverlapSkip, OverlapBufferOne, OverlapBufferAll,
// OverlapCancelOther).
type OverlapPolicy = orreryv1.OverlapPolicy

// ScheduleState is the state a schedule is listed under (ScheduleActive, SchedulePaused,
// ScheduleSuspended, ScheduleCancelled, ScheduleCompleted).
type ScheduleState = orreryv1.ScheduleState

// updateAttempts bounds the compare-and-set attempts of ScheduleHandle.Update: every emitted
// occurrence bumps a schedule's revision, so a busy schedule may move between the read and
// the write a few times, but not forever.
const updateAttempts = 10

// ScheduleOptions is what a schedule does, in Go types: when (Spec), where its occurrences
// land (Queue, and Key, which with the namespace decides its partition) and what they carry.
type ScheduleOptions struct {
	// Queue receives the occurrences (required).
	Queue string
	// Key is the lane key: the schedule, its queue's messages and every record of the
	// namespace with the same key share a partition. Default: the schedule's name, which
	// spreads a namespace's schedules over the partitions.
	Key string
	// Spec is when the schedule is due (required): Every, Cron, At or After.
	Spec *orreryv1.ScheduleSpec
	// PayloadJSON and HeadersJSON are each occurrence's payload and headers, JSON ("" for none).
	PayloadJSON, HeadersJSON string
	// Payload, when not nil, is each occurrence's payload as a Go value: it is marshalled to
	// JSON (encoding/json) and replaces PayloadJSON, so a worker's client.Handle[T] decodes it
	// back. A value that does not marshal is a Validation error on payload; nothing is sent.
	// Describe returns the payload as PayloadJSON.
	Payload any
	// OrderingKey, when set, delivers the queue's messages with the same key one at a time.
	OrderingKey string
	// TimeToLive, when positive, expires an occurrence not received in time.
	TimeToLive time.Duration
	// MaxDeliveries, when positive, dead-letters an occurrence after that many deliveries.
	MaxDeliveries int
	// Priority, 0 (the default) to 9, is each occurrence's priority (EnqueueOptions.Priority;
	// apply version 20).
	Priority int
	// Retry, when set, is each occurrence's retry policy (see MessageRetry; apply version 19):
	// a PauseOnFailure schedule pauses when an occurrence uses up its MaxAttempts, whether it
	// is dead-lettered or dropped.
	Retry *MessageRetry
	// Misfire and Overlap are the schedule's policies (zero: the silo's defaults).
	Misfire MisfirePolicy
	Overlap OverlapPolicy
	// CatchUpWindow, when positive, bounds how far back a catch-up or a resume reaches.
	CatchUpWindow time.Duration
	// AnomalyWindow, when positive, is how late an emission may be before it is reported.
	AnomalyWindow time.Duration
	// StartAt (cron only; an Every starts at its first instant) delays a cron schedule's first
	// instant to StartAt or after. EndAt ends the series at its first instant after EndAt.
	// MaxOccurrences ends it after that many instants of a definition (fired or passed:
	// skipped, missed, paused; triggers are not counted); an Update or Upsert that changes the
	// definition starts counting again. A schedule ended by a bound is ScheduleCompleted, and
	// its description says which bound (EndedBecause). Zero: none. They need a cluster whose
	// silos all run a release that knows them (apply version 2); before that the partition
	// refuses them (Validation).
	StartAt, EndAt time.Time
	MaxOccurrences int
	// PauseOnFailure pauses the schedule when one of its occurrences uses up its deliveries
	// (MaxDeliveries) and is dead-lettered, in the same transaction, so that a failing job
	// stops firing until someone resumes it; PausedReason says which message. Needs apply
	// version 3 (see StartAt).
	PauseOnFailure bool
	// Jitter, when positive (1 ms to 7 days), fires each occurrence up to Jitter after its
	// nominal instant — or up to Jitter either side with JitterEarly — at an offset derived
	// from the occurrence's id, so retries and replicas agree on it and a fleet of schedules
	// on the same instant spreads out. The nominal instant stays the occurrence's identity
	// (its id and its ledger record's NominalDue). Needs apply version 6 (see StartAt).
	Jitter      time.Duration
	JitterEarly bool
	// Expired says what an occurrence whose TimeToLive passed before it could be enqueued does
	// (zero: ExpiredFail from apply version 7, skipped before). Setting it needs apply
	// version 7 (see StartAt).
	Expired ExpiredPolicy
	// Labels are key/value pairs that List selects schedules by (ListSchedules.Labels): at
	// most 16, keys of 1..63 letters, digits, '.', '_', '-' and '/'. Needs apply version 10.
	Labels map[string]string
	// PacePerWindow and PaceWindow, when set, pace the schedule: at most PacePerWindow
	// (1..1000) occurrences per PaceWindow (1 s..24 h), so a backlog drains oldest first at that
	// pace; it bounds every occurrence, so set it above the schedule's own rate. Describe's
	// Backlog counts what is left. Needs apply version 11.
	PacePerWindow int
	PaceWindow    time.Duration
	// Calendars names at most 8 exclusion calendars of the namespace (Client.PutCalendar),
	// which must exist when the schedule is written: an instant any of them excludes is not
	// enqueued but ledgered "excluded" (naming the calendar), and the series goes on; Describe's
	// next fire times leave such instants out. Needs apply version 17.
	Calendars []string
}

// marshalled is o with Payload marshalled into PayloadJSON; a negative MaxOccurrences, which
// the wire cannot carry, is a Validation error.
func (o ScheduleOptions) marshalled() (ScheduleOptions, error) {
	if o.MaxOccurrences < 0 {
		return o, orrery.Invalid("max_occurrences", "must not be negative, got %d", o.MaxOccurrences)
	}
	if o.Payload == nil {
		return o, nil
	}
	payload, err := json.Marshal(o.Payload)
	if err != nil {
		return o, orrery.Invalid("payload", "cannot marshal %T: %v", o.Payload, err)
	}
	o.PayloadJSON, o.Payload = string(payload), nil
	return o, nil
}

// definition is the wire definition of the schedule id named name in namespace.
func (o ScheduleOptions) definition(namespace, name, id string) *orreryv1.ScheduleDefinition {
	def := &orreryv1.ScheduleDefinition{
		Lane:       &orreryv1.Lane{Namespace: namespace, Queue: o.Queue, Key: cmp.Or(o.Key, name)},
		ScheduleId: id, Name: name, Spec: o.Spec,
		Misfire: o.Misfire, Overlap: o.Overlap,
		CatchUpWindowMicros: o.CatchUpWindow.Microseconds(), AnomalyWindowMicros: o.AnomalyWindow.Microseconds(),
		StartAtUnixMicros: unixMicrosOf(o.StartAt), EndAtUnixMicros: unixMicrosOf(o.EndAt), MaxOccurrences: uint64(max(o.MaxOccurrences, 0)),
		PauseOnFailure: o.PauseOnFailure, JitterMicros: o.Jitter.Microseconds(), JitterAllowEarly: o.JitterEarly,
		Expired: o.Expired, Labels: o.Labels, Calendars: o.Calendars,
	}
	if o.PacePerWindow != 0 || o.PaceWindow != 0 {
		def.CatchUpPace = &orreryv1.CatchUpPace{MaxPerWindow: uint32(min(max(o.PacePerWindow, 0), 1<<31)), WindowMicros: o.PaceWindow.Microseconds()}
	}
	t := &orreryv1.MessageTemplate{PayloadJson: o.PayloadJSON, HeadersJson: o.HeadersJSON, OrderingKey: o.OrderingKey,
		TimeToLiveMicros: o.TimeToLive.Microseconds(), MaxDeliveries: int32(min(o.MaxDeliveries, 1<<31-1)), Priority: priorityOf(o.Priority), Retry: o.Retry.Proto()}
	if proto.Size(t) > 0 {
		def.Template = t
	}
	return def
}

// checkBacklog refuses options that would flood their queue the moment they are written: an
// Every spec whose first instant is more than one interval in the past, with the default
// misfire policy (catch up) and no catch-up window, enqueues every instant since then at once
// (a start 72 h ago every minute: 4,321 messages). The caller says what it wants instead: a
// CatchUpWindow, MisfireSkip or MisfireCoalesce, or a later start. now is the client's clock;
// the partition's logged time is close to it.
func (o ScheduleOptions) checkBacklog(now time.Time) error {
	every := o.Spec.GetEvery()
	if every == nil || every.GetIntervalMicros() <= 0 || o.CatchUpWindow > 0 ||
		(o.Misfire != MisfireCatchUp && o.Misfire != orreryv1.MisfirePolicy_MISFIRE_POLICY_UNSPECIFIED) {
		return nil
	}
	first, interval := micros(every.GetFirstDueAtUnixMicros()), microDuration(every.GetIntervalMicros())
	if !first.Before(now.Add(-interval)) {
		return nil
	}
	due := now.Sub(first)/interval + 1
	return orrery.Invalid("spec.every.first_due_at_unix_micros",
		"starts at %s, so %d instants (every %s) are already due, and catching up without a window enqueues them all at once: set CatchUpWindow (how far back to catch up), Misfire MisfireSkip (only the latest) or MisfireCoalesce (one occurrence carrying the count), or a later start",
		first.Format(time.RFC3339), due, interval)
}

// scheduleOptionsOf is the options a stored definition holds.
func scheduleOptionsOf(def *orreryv1.ScheduleDefinition) ScheduleOptions {
	t := def.GetTemplate()
	return ScheduleOptions{
		Queue: def.GetLane().GetQueue(), Key: def.GetLane().GetKey(), Spec: def.GetSpec(),
		PayloadJSON: t.GetPayloadJson(), HeadersJSON: t.GetHeadersJson(), OrderingKey: t.GetOrderingKey(),
		TimeToLive: microDuration(t.GetTimeToLiveMicros()), MaxDeliveries: int(t.GetMaxDeliveries()), Priority: int(t.GetPriority()), Retry: MessageRetryOf(t.GetRetry()),
		Misfire: def.GetMisfire(), Overlap: def.GetOverlap(),
		CatchUpWindow: microDuration(def.GetCatchUpWindowMicros()), AnomalyWindow: microDuration(def.GetAnomalyWindowMicros()),
		StartAt: instant(def.GetStartAtUnixMicros()), EndAt: instant(def.GetEndAtUnixMicros()), MaxOccurrences: int(min(def.GetMaxOccurrences(), 1<<62)),
		PauseOnFailure: def.GetPauseOnFailure(), Jitter: microDuration(def.GetJitterMicros()), JitterEarly: def.GetJitterAllowEarly(),
		Expired: def.GetExpired(), Labels: def.GetLabels(), Calendars: def.GetCalendars(),
		PacePerWindow: int(def.GetCatchUpPace().GetMaxPerWindow()), PaceWindow: microDuration(def.GetCatchUpPace().GetWindowMicros()),
	}
}

// unixMicrosOf is t in µs since the epoch, 0 for the zero time.
func unixMicrosOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// Schedules is one namespace's schedules, addressed by name: c.Schedules("acme"). Its calls
// and its handles' take and return Go types; the wire calls (ConfigureSchedule and the rest)
// stay for batches and for what these do not cover.
type Schedules struct {
	c         *Client
	namespace string
}

// Schedules is namespace's schedules.
func (c *Client) Schedules(namespace string) *Schedules {
	return &Schedules{c: c, namespace: namespace}
}

// Handle addresses the schedule named name in queue and key ("": the name, as
// ScheduleOptions.Key defaults) without a call: a schedule is found by its lane (namespace,
// queue, key) and its name. The handle's first call that finds a schedule of the name binds
// it to that schedule's identity (ScheduleHandle.ID), which it keeps.
func (s *Schedules) Handle(queue, key, name string) *ScheduleHandle {
	return &ScheduleHandle{c: s.c, lane: &orreryv1.Lane{Namespace: s.namespace, Queue: queue, Key: cmp.Or(key, name)}, name: name}
}

// Create creates the schedule named name and returns its handle. A live schedule of that name
// in that lane is a RevisionConflict. A deleted one is not: its identity stays terminal, and
// the new schedule takes the name's next identity (ScheduleIDOf), a new id whose occurrences
// and ledger are its own.
func (s *Schedules) Create(ctx context.Context, name string, o ScheduleOptions, opts ...CallOption) (*ScheduleHandle, error) {
	o, err := o.marshalled()
	if err != nil {
		return nil, err
	}
	if err := errors.Join(checkName(name), o.checkBacklog(s.c.clock.Now())); err != nil {
		return nil, err
	}
	h := s.Handle(o.Queue, o.Key, name)
	for range updateAttempts {
		var id string
		if _, id, err = h.readName(ctx); err != nil {
			return nil, err
		}
		var res *orreryv1.ScheduleResult
		res, err = s.c.ConfigureSchedule(ctx, o.definition(s.namespace, name, id), 0, opts...)
		if err == nil {
			h.bind(id)
			h.written.Store(res)
			return h, nil
		}
		if !deletedMeanwhile(err) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("schedule %q: its identity was deleted under each of %d attempts: %w", name, updateAttempts, err)
}

// Upsert makes the schedule named name do what o says, for an application that declares its
// schedules at every start: it creates the schedule when there is none (a deleted one's name
// included: see Create), leaves it alone (no new generation, no call beyond the read) when its
// definition is o already, and otherwise replaces the definition at its current revision,
// which starts a new generation at ordinal 0. A write that meets a revision moved meanwhile
// (an occurrence emitted, another Upsert's creation) or a schedule deleted meanwhile reads
// the name again and retries, a few times, so Upserts racing to declare one name create one
// schedule.
func (s *Schedules) Upsert(ctx context.Context, name string, o ScheduleOptions) (*ScheduleHandle, error) {
	o, err := o.marshalled()
	if err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	h := s.Handle(o.Queue, o.Key, name)
	err = h.casLoop(ctx, true, func(rec *orreryv1.ScheduleRecord, id string) (*orreryv1.ScheduleDefinition, error) {
		want := o.definition(s.namespace, name, id)
		if rec != nil && proto.Equal(rec.GetDefinition(), want) {
			return nil, nil // as declared already: nothing to write, nothing to refuse
		}
		return want, o.checkBacklog(s.c.clock.Now())
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// ScheduleIDOf is the identity the schedule name addresses in lane now: the id of the live
// schedule of that name, or, when there is none, the id its next creation takes (the name's
// first, input.ScheduleIDFromName, until a schedule of it is deleted; then the next, so a
// deleted schedule's id, which stays terminal, never burns its name). The partition decides
// it from its state (an InspectSchedule by name); against a silo of a version that cannot, it
// is the name's first id (ScheduleID).
func (c *Client) ScheduleIDOf(ctx context.Context, lane *orreryv1.Lane, name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	_, id, err := (&ScheduleHandle{c: c, lane: lane, name: name}).readName(ctx)
	return id, err
}

// ListSchedules filters Schedules.List: the zero value lists every schedule of the namespace.
type ListSchedules struct {
	// Queue, when set, lists only that queue's schedules.
	Queue string
	// State, when set, lists only the schedules in that state.
	State ScheduleState
	// PageSize is how many schedules each call fetches (0: DefaultListMax; at most MaxListMax).
	PageSize int
	// Labels, when set, lists only the schedules carrying every one of these labels with the
	// value given (an empty value: the label with any value); NamePrefix only those whose name
	// begins with it.
	Labels     map[string]string
	NamePrefix string
}

// List yields the namespace's schedules in (queue, key, id) order, fetching a page at a time
// as the loop goes on; a failed fetch is yielded as the error of a last pair. A listed
// schedule's description holds its record; NextFireTimes, LastOutcomes and Liveness, which
// only Describe computes, are empty.
func (s *Schedules) List(ctx context.Context, f ListSchedules) iter.Seq2[*ScheduleDescription, error] {
	return pages(func(after []byte) ([]ListedSchedule, []byte, error) {
		return s.c.ListSchedules(ctx, ListSchedulesRequest{Namespace: s.namespace, Queue: f.Queue, State: f.State, MaxRecords: f.PageSize, After: after,
			Labels: f.Labels, NamePrefix: f.NamePrefix})
	}, func(l ListedSchedule) *ScheduleDescription {
		d := describeRecord(l.Record)
		d.Partition = l.Partition
		return d
	})
}

// pages iterates over every page fetch returns, from the first (after nil) to the one whose
// continuation is nil, yielding each item as describe makes it; a failed fetch is yielded as
// the error of a last pair.
func pages[R, T any](fetch func(after []byte) (page []R, next []byte, err error), describe func(R) T) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var after []byte
		for {
			page, next, err := fetch(after)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, r := range page {
				if !yield(describe(r), nil) {
					return
				}
			}
			if next == nil {
				return
			}
			after = next
		}
	}
}

// ScheduleHandle is one schedule, addressed by its lane and name; Schedules.Handle, Create and
// Upsert return one. Its calls act at whatever revision the schedule is (Update compares and
// sets).
//
// A handle addresses one identity of its name. Create and Upsert bind the handle they return
// to the schedule they wrote; a handle from Schedules.Handle binds to the schedule its first
// call finds under the name (until then each call looks the name up). A deleted schedule's
// identity stays terminal, and a handle bound to it keeps addressing it: its calls fail
// NotFound saying the schedule was deleted, and never act on a schedule created under the name
// since (which has a new id). Take a new handle (Schedules.Handle, Create, Upsert) for that one.
type ScheduleHandle struct {
	c    *Client
	lane *orreryv1.Lane
	name string
	// id is the identity the handle is bound to ("" until bound), under mu.
	mu sync.Mutex
	id string
	// written is the result of the last definition this handle wrote (Create, Upsert, Update).
	written atomic.Pointer[orreryv1.ScheduleResult]
}

// ScheduleWrite is what a definition written through a handle (Create, Upsert, Update) did.
type ScheduleWrite struct {
	// Revision and Generation are the schedule's after the write.
	Revision, Generation uint64
	// AlreadyDue counts the new generation's instants that were already due when it was
	// written (an Every start or an At instant in the past), from FirstAlreadyDue to
	// LastAlreadyDue: a catch-up enqueues them at once, within the catch-up window and the
	// misfire policy.
	AlreadyDue                      uint64
	FirstAlreadyDue, LastAlreadyDue time.Time
}

// LastWrite is what the last definition this handle wrote did, and false when it wrote none
// (a handle from Handle, or an Upsert or Update that found the definition as it was).
func (h *ScheduleHandle) LastWrite() (ScheduleWrite, bool) {
	res := h.written.Load()
	if res == nil {
		return ScheduleWrite{}, false
	}
	return ScheduleWrite{Revision: res.GetRevision(), Generation: res.GetGeneration(), AlreadyDue: res.GetAlreadyDue(),
		FirstAlreadyDue: instant(res.GetFirstAlreadyDueAtUnixMicros()), LastAlreadyDue: instant(res.GetLastAlreadyDueAtUnixMicros())}, true
}

// Name is the schedule's name.
func (h *ScheduleHandle) Name() string { return h.name }

// ID is the id of the schedule the handle is bound to, "" while it is bound to none (a handle
// from Schedules.Handle before a call found a schedule of its name). A name's first schedule
// has the id ScheduleID derives; a schedule created under the name after its predecessor was
// deleted has another (ScheduleIDOf).
func (h *ScheduleHandle) ID() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.id
}

// bind binds the handle to id, unless it is bound already (the first binding stays).
func (h *ScheduleHandle) bind(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.id == "" {
		h.id = id
	}
}

// inspect reads the schedule id of the handle's lane, or, with id "", the one its name
// resolves to now: the live schedule of the name, else the id its next creation takes. The
// reply's schedule_id says which id it read. A silo of a version that cannot read by name
// refuses the empty schedule_id; the name's first id (ScheduleID) is then read instead, as
// such a version derived it.
func (h *ScheduleHandle) inspect(ctx context.Context, id string) (*orreryv1.InspectReply, error) {
	target := &orreryv1.InspectSchedule{Lane: h.lane, ScheduleId: id}
	if id == "" {
		target.Name = h.name
	}
	reply, err := h.c.inspectLane(ctx, h.lane, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Schedule{Schedule: target}})
	if oe := orrery.AsError(err); id == "" && errors.Is(err, orrery.ErrValidation) && oe != nil && oe.Field == "schedule_id" {
		target.ScheduleId, target.Name = ScheduleID(h.lane.GetNamespace(), h.name), ""
		reply, err = h.c.inspectLane(ctx, h.lane, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Schedule{Schedule: target}})
	}
	if err != nil {
		return nil, err
	}
	if reply.GetScheduleId() == "" { // a silo of a version that does not say
		reply.ScheduleId = target.GetScheduleId()
	}
	return reply, nil
}

// readName reads the schedule of the handle's name as the partition resolves it now: its
// record (nil when none lives under the name) and its id (that of the next creation of the
// name when none lives). It binds nothing.
func (h *ScheduleHandle) readName(ctx context.Context) (*orreryv1.ScheduleRecord, string, error) {
	reply, err := h.inspect(ctx, "")
	if err != nil {
		return nil, "", err
	}
	if !reply.GetFound() {
		return nil, reply.GetScheduleId(), nil
	}
	return reply.GetSchedule(), reply.GetScheduleId(), nil
}

// read reads the schedule the handle addresses: the one it is bound to, or else the one its
// name resolves to, binding the handle to it when it lives. The reply's found is false when
// there is none; a bound identity that was deleted is a NotFound error saying so.
func (h *ScheduleHandle) read(ctx context.Context) (*orreryv1.InspectReply, error) {
	id := h.ID()
	reply, err := h.inspect(ctx, id)
	if err != nil {
		return nil, err
	}
	switch {
	case reply.GetFound():
		h.bind(reply.GetScheduleId())
	case reply.GetDeleted() && id != "":
		return nil, h.deletedError(id)
	}
	return reply, nil
}

// deletedError is the NotFound of a call through a handle bound to a deleted schedule.
func (h *ScheduleHandle) deletedError(id string) error {
	return orrery.FieldErrorf(orrery.CodeNotFound, "schedule_id",
		"schedule %q (id %s) in lane %s was deleted, and a deleted schedule's identity stays terminal; this handle addresses it (a new schedule of the name has another id: Schedules.Handle, Create or Upsert)",
		h.name, id, laneName(h.lane))
}

// resolve is the id the handle's actions address: the one it is bound to, or the live
// schedule its name resolves to (binding the handle to it). NotFound when there is none.
func (h *ScheduleHandle) resolve(ctx context.Context) (string, error) {
	if id := h.ID(); id != "" {
		return id, nil
	}
	reply, err := h.read(ctx)
	if err != nil {
		return "", err
	}
	if !reply.GetFound() {
		return "", orrery.FieldErrorf(orrery.CodeNotFound, "name", "no schedule named %q in lane %s", h.name, laneName(h.lane))
	}
	return reply.GetScheduleId(), nil
}

// Queue is the queue its occurrences land in.
func (h *ScheduleHandle) Queue() string { return h.lane.GetQueue() }

// Key is its lane key.
func (h *ScheduleHandle) Key() string { return h.lane.GetKey() }

// Describe reads the schedule: its definition, state and counters, its next fire times, its
// last outcomes and whether its due work is on time. NotFound when there is none.
func (h *ScheduleHandle) Describe(ctx context.Context) (*ScheduleDescription, error) {
	reply, err := h.read(ctx)
	if err != nil {
		return nil, err
	}
	in := reply.GetInspection()
	if !reply.GetFound() || in == nil {
		return nil, orrery.FieldErrorf(orrery.CodeNotFound, "name", "no schedule named %q in lane %s", h.name, laneName(h.lane))
	}
	d := describeRecord(in.GetRecord())
	d.Partition = h.c.PartitionOf(h.lane)
	for _, at := range in.GetNextFireTimesUnixMicros() {
		d.NextFireTimes = append(d.NextFireTimes, instant(at))
	}
	for _, o := range in.GetLastOutcomes() {
		d.LastOutcomes = append(d.LastOutcomes, ScheduleOutcome{
			Generation: o.GetGeneration(), Ordinal: o.GetOrdinal(), Manual: o.GetManual(),
			NominalDue: instant(o.GetNominalDueAtUnixMicros()), RecordedAt: instant(o.GetRecordedAtUnixMicros()),
			Outcome: enumWord(o.GetOutcome().String(), "LEDGER_OUTCOME_"), MessageID: o.GetMessageId(), Reason: o.GetReason(),
		})
	}
	if in.GetSuspendedReason() != "" {
		d.SuspendedReason = in.GetSuspendedReason()
	}
	if l := in.GetLiveness(); l != nil {
		d.Liveness = Liveness{State: l.GetState(), Reason: l.GetReason(), DueAt: instant(l.GetDueAtUnixMicros()), Since: instant(l.GetSinceUnixMicros())}
	}
	d.Backlog, d.BacklogCapped = int(in.GetBacklog()), in.GetBacklogCapped()
	for _, g := range in.GetGenerations() {
		rec := g.GetRecord()
		d.Generations = append(d.Generations, ScheduleGeneration{Generation: rec.GetGeneration(), Options: scheduleOptionsOf(rec.GetDefinition()),
			Revision: rec.GetRevision(), NextOrdinal: rec.GetNextOrdinal(), ReplacedAt: instant(g.GetReplacedAtUnixMicros()), ReplacedBy: g.GetReplacedBy()})
	}
	return d, nil
}

// Pause stops the schedule's emission durably; the instants that pass while it is paused are
// ledgered PAUSED. A schedule already paused fails ErrSchedulePaused, a cancelled one
// ErrScheduleCancelled.
func (h *ScheduleHandle) Pause(ctx context.Context, opts ...CallOption) error {
	id, err := h.resolve(ctx)
	if err != nil {
		return err
	}
	_, err = h.c.PauseSchedule(ctx, &orreryv1.PauseSchedule{Lane: h.lane, ScheduleId: id, AnyRevision: true}, opts...)
	return err
}

// Resume restarts a paused schedule from the first instant after now (minus its catch-up
// window). A schedule that is not paused is Suspended (on schedule_id), a cancelled one
// ErrScheduleCancelled.
func (h *ScheduleHandle) Resume(ctx context.Context, opts ...CallOption) error {
	id, err := h.resolve(ctx)
	if err != nil {
		return err
	}
	_, err = h.c.ResumeSchedule(ctx, &orreryv1.ResumeSchedule{Lane: h.lane, ScheduleId: id, AnyRevision: true}, opts...)
	return err
}

// Trigger enqueues one manual occurrence now and returns its message id. A paused schedule
// refuses it with ErrSchedulePaused (resume it first), a cancelled one with
// ErrScheduleCancelled, a suspended one with ErrScheduleSuspended.
func (h *ScheduleHandle) Trigger(ctx context.Context, opts ...CallOption) (messageID string, err error) {
	id, err := h.resolve(ctx)
	if err != nil {
		return "", err
	}
	res, err := h.c.TriggerSchedule(ctx, &orreryv1.TriggerSchedule{Lane: h.lane, ScheduleId: id}, opts...)
	if err != nil {
		return "", err
	}
	if ids := res.GetEnqueuedIds(); len(ids) > 0 {
		return ids[0], nil
	}
	return "", nil
}

// Backfill runs the schedule's instants from from to to (both included; to not after now) now:
// each is enqueued as its own occurrence (an id of its own, ledgered "backfilled"), without
// moving the schedule, and neither waits for nor takes its overlap slot. An instant backfilled
// before is not enqueued again, so a Backfill repeated over the same range enqueues nothing
// more. It returns how many it enqueued. Needs apply version 9.
func (h *ScheduleHandle) Backfill(ctx context.Context, from, to time.Time, opts ...CallOption) (int, error) {
	id, err := h.resolve(ctx)
	if err != nil {
		return 0, err
	}
	m := &orreryv1.BackfillSchedule{Lane: h.lane, ScheduleId: id, FromUnixMicros: from.UnixMicro(), ToUnixMicros: to.UnixMicro()}
	total := 0
	for {
		res, err := h.c.BackfillSchedule(ctx, m, opts...)
		if err != nil {
			return total, err
		}
		total += len(res.GetEnqueuedIds())
		if m.FromUnixMicros = res.GetBackfillResumeFromUnixMicros(); m.FromUnixMicros == 0 {
			return total, nil
		}
	}
}

// SkipExpired passes the occurrences the schedule stopped at because their TimeToLive had
// passed (ExpiredFail): each is recorded "expired" in its ledger, with the caller in the
// reason, and the schedule goes on from the first one still alive. It returns how many it
// passed (0: none had expired). Needs apply version 7.
func (h *ScheduleHandle) SkipExpired(ctx context.Context, opts ...CallOption) (int, error) {
	id, err := h.resolve(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	for {
		res, err := h.c.SkipExpired(ctx, &orreryv1.SkipExpired{Lane: h.lane, ScheduleId: id}, opts...)
		if err != nil {
			return total, err
		}
		n := int(res.GetPassedWithoutMessage())
		total += n
		if n == 0 {
			return total, nil
		}
	}
}

// Update changes the schedule's definition: it reads the current one, lets change edit its
// options (the queue and key name the schedule and cannot change) and replaces it at the
// revision it read, which starts a new generation; when the revision moved meanwhile it reads
// again and calls change again, a few times. A change that leaves the options as they were
// writes nothing. NotFound when there is no schedule.
func (h *ScheduleHandle) Update(ctx context.Context, change func(*ScheduleOptions)) error {
	return h.casLoop(ctx, false, func(rec *orreryv1.ScheduleRecord, id string) (*orreryv1.ScheduleDefinition, error) {
		if rec == nil {
			return nil, orrery.FieldErrorf(orrery.CodeNotFound, "schedule_id", "no schedule %q in lane %s", h.name, laneName(h.lane))
		}
		o := scheduleOptionsOf(rec.GetDefinition())
		change(&o)
		o, err := o.marshalled()
		if err != nil {
			return nil, err
		}
		if o.Queue != h.lane.GetQueue() || cmp.Or(o.Key, h.name) != h.lane.GetKey() {
			return nil, orrery.Invalid("queue", "a schedule's queue and key name it and cannot change (%s/%s to %s/%s); create another schedule",
				h.lane.GetQueue(), h.lane.GetKey(), o.Queue, o.Key)
		}
		want := o.definition(h.lane.GetNamespace(), h.name, id)
		if proto.Equal(rec.GetDefinition(), want) {
			return nil, nil
		}
		if err := o.checkBacklog(h.c.clock.Now()); err != nil {
			return nil, err
		}
		return want, nil
	})
}

// Cancel stops the schedule for good; only a new definition (Update, Upsert) revives it.
func (h *ScheduleHandle) Cancel(ctx context.Context, opts ...CallOption) error {
	id, err := h.resolve(ctx)
	if err != nil {
		return err
	}
	_, err = h.c.CancelSchedule(ctx, &orreryv1.CancelSchedule{Lane: h.lane, ScheduleId: id, AnyRevision: true}, opts...)
	return err
}

// Delete removes the schedule. Its identity stays terminal: this handle's calls fail NotFound
// from then on, and the name is free for a new schedule, which takes a new id.
func (h *ScheduleHandle) Delete(ctx context.Context, opts ...CallOption) error {
	id, err := h.resolve(ctx)
	if err != nil {
		return err
	}
	_, err = h.c.DeleteSchedule(ctx, &orreryv1.DeleteSchedule{Lane: h.lane, ScheduleId: id, AnyRevision: true}, opts...)
	return err
}

// casLoop reads the schedule (nil when there is none) and its id, asks decide for the
// definition to write (nil: nothing to write) and writes it at the revision read, reading
// again when the revision moved, up to updateAttempts times; the handle is then bound to the
// schedule written. byName reads the name's current identity every time (Upsert): a schedule
// deleted between the read and the write is then read again too, and the write creates the
// name's next one. Otherwise it reads the schedule the handle addresses (Update), and a deleted
// one fails.
func (h *ScheduleHandle) casLoop(ctx context.Context, byName bool, decide func(rec *orreryv1.ScheduleRecord, id string) (*orreryv1.ScheduleDefinition, error)) error {
	var err error
	for range updateAttempts {
		var rec *orreryv1.ScheduleRecord
		var id string
		if byName {
			rec, id, err = h.readName(ctx)
		} else {
			var reply *orreryv1.InspectReply
			if reply, err = h.read(ctx); err == nil {
				rec, id = reply.GetSchedule(), reply.GetScheduleId()
			}
		}
		if err != nil {
			return err
		}
		def, decideErr := decide(rec, id)
		if decideErr != nil || def == nil {
			if decideErr == nil && rec != nil {
				h.bind(id)
			}
			return decideErr
		}
		var res *orreryv1.ScheduleResult
		res, err = h.c.ConfigureSchedule(ctx, def, rec.GetRevision())
		if err == nil {
			h.bind(id)
			h.written.Store(res)
			return nil
		}
		if !movedMeanwhile(err) && !(byName && deletedMeanwhile(err)) {
			return err
		}
	}
	return fmt.Errorf("schedule %q: the schedule moved under each of %d attempts: %w", h.name, updateAttempts, err)
}

// movedMeanwhile reports whether a configure failed because the schedule's revision moved
// (or it appeared) since it was read: a RevisionConflict on the expected revision, which a
// new read answers. The conflict of a deleted id (on definition.schedule_id) does not pass.
func movedMeanwhile(err error) bool {
	var oe *orrery.Error
	return errors.Is(err, orrery.ErrRevisionConflict) && errors.As(err, &oe) && strings.HasSuffix(oe.Field, "expected_revision")
}

// deletedMeanwhile reports whether a configure failed because its id is a deleted schedule's
// (the RevisionConflict on definition.schedule_id): for a write by name, the schedule read was
// deleted before the write, and a new read of the name finds its next identity.
func deletedMeanwhile(err error) bool {
	var oe *orrery.Error
	return errors.Is(err, orrery.ErrRevisionConflict) && errors.As(err, &oe) && strings.HasSuffix(oe.Field, "definition.schedule_id")
}

// checkName refuses an empty schedule name: a schedule is found by it.
func checkName(name string) error {
	if name == "" {
		return orrery.Invalid("name", "a schedule needs a name")
	}
	return nil
}

// ScheduleDescription is a schedule as Describe or List reads it, in Go types. Zero times mean
// none.
type ScheduleDescription struct {
	// Name and ID are the schedule's name and id; Namespace, with Options.Queue and
	// Options.Key, its lane; Partition the partition it lives in.
	Name, ID, Namespace string
	Partition           int
	// Options is its definition.
	Options ScheduleOptions
	// State is the state it is listed under.
	State ScheduleState
	// Revision moves with every change and every emission; Generation with every replaced
	// definition; NextOrdinal is the ordinal of the generation's next occurrence.
	Revision, Generation, NextOrdinal uint64
	// NextDue is when it is next due.
	NextDue time.Time
	// NextFireTimes are its next instants (Describe only).
	NextFireTimes []time.Time
	// Creator is the principal that created it.
	Creator string
	// PausedAt is when it was paused (while paused), and PausedReason why, when it paused
	// itself (PauseOnFailure) rather than by a Pause.
	PausedAt     time.Time
	PausedReason string
	// SuspendedReason says why it is suspended.
	SuspendedReason string
	// EndedBecause says which bound ended its series ("max_occurrences 3 reached", "end_at ...
	// passed"); empty while it runs, or when its series ended otherwise (a one-shot fired).
	EndedBecause string
	// LastOutcomes are its latest ledger records, newest first (Describe only).
	LastOutcomes []ScheduleOutcome
	// Liveness says whether its due work is on time (Describe only).
	Liveness Liveness
	// Backlog is how many of its instants are due and not yet enqueued or passed (Describe
	// only; at most 10,000, BacklogCapped when more).
	Backlog       int
	BacklogCapped bool
	// Generations are the definitions its Updates and Upserts replaced, newest first: the last
	// ten (Describe only; kept from apply version 8).
	Generations []ScheduleGeneration
}

// ScheduleGeneration is a replaced generation of a schedule: its definition and where it
// stood when replaced.
type ScheduleGeneration struct {
	// Generation is its number; Options its definition.
	Generation uint64
	Options    ScheduleOptions
	// Revision is the schedule's revision when it was replaced, and NextOrdinal how many of
	// its instants it had passed.
	Revision, NextOrdinal uint64
	// ReplacedAt is when it was replaced, and ReplacedBy by whom.
	ReplacedAt time.Time
	ReplacedBy string
}

// ScheduleOutcome is one ledger record: what became of one instant of a schedule.
type ScheduleOutcome struct {
	Generation, Ordinal uint64
	// Manual is set for a triggered occurrence.
	Manual bool
	// NominalDue is the instant; RecordedAt when the outcome was recorded.
	NominalDue, RecordedAt time.Time
	// Outcome is the ledger outcome in lower case: "enqueued", "skipped_overlap",
	// "missed_catchup_window", "coalesced_into", "manual", "suspended", "skipped_misfire",
	// "buffered", "dropped", "expired", "paused", "ended", "dead_lettered", "cancelled",
	// "backfilled" or "excluded" (a calendar of the definition excluded the instant).
	Outcome string
	// MessageID is the occurrence's message, when one was enqueued.
	MessageID string
	// Reason explains a non-enqueued outcome.
	Reason string
}

// Liveness is whether a schedule's due work is on time, as its partition's watchdog sees it.
type Liveness struct {
	// State is the watchdog's verdict ("ok", "late", ...) and Reason its explanation.
	State, Reason string
	// DueAt is the instant watched; Since when the verdict began.
	DueAt, Since time.Time
}

// describeRecord is the description a stored record gives.
func describeRecord(rec *orreryv1.ScheduleRecord) *ScheduleDescription {
	def := rec.GetDefinition()
	return &ScheduleDescription{
		Name: def.GetName(), ID: def.GetScheduleId(), Namespace: def.GetLane().GetNamespace(),
		Options: scheduleOptionsOf(def), State: schedule.StateOf(rec),
		Revision: rec.GetRevision(), Generation: rec.GetGeneration(), NextOrdinal: rec.GetNextOrdinal(),
		NextDue: instant(rec.GetNextDueAtUnixMicros()), Creator: rec.GetCreator(),
		PausedAt: instant(rec.GetPausedAtUnixMicros()), SuspendedReason: rec.GetSuspendedReason(),
		EndedBecause: rec.GetSeriesEndReason(), PausedReason: rec.GetPausedReason(),
	}
}

// instant is the time (UTC) of a wire instant in µs since the epoch; 0 is the zero time.
func instant(unixMicros int64) time.Time {
	if unixMicros == 0 {
		return time.Time{}
	}
	return micros(unixMicros)
}

// microDuration is the duration of a wire duration in µs.
func microDuration(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// enumWord is an enum value's name without its prefix, in lower case.
func enumWord(name, prefix string) string { return strings.ToLower(strings.TrimPrefix(name, prefix)) }
