package client

import (
	"cmp"
	"context"
	"iter"
	"sync/atomic"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

// The saga phases, named in Go (see SagaPhase).
const (
	SagaWaiting   = orreryv1.SagaPhase_SAGA_PHASE_WAITING
	SagaCompleted = orreryv1.SagaPhase_SAGA_PHASE_COMPLETED
	SagaCancelled = orreryv1.SagaPhase_SAGA_PHASE_CANCELLED
	SagaTimedOut  = orreryv1.SagaPhase_SAGA_PHASE_TIMED_OUT
)

// SagaPhase is a saga's phase: SagaWaiting (for its caller, or for its deadline), then
// SagaCompleted or SagaCancelled by its caller, or SagaTimedOut when the deadline passed first,
// which enqueued its timeout message in the same transaction.
type SagaPhase = orreryv1.SagaPhase

// SagaID is the id of the saga named name in namespace: a UUIDv5 derived from both
// (input.SagaIDFromName), the same in every process, so a saga can be addressed by a name of
// the application's (an order number).
func SagaID(namespace, name string) string { return input.SagaIDFromName(namespace, name) }

// SagaWait is what a waiting saga holds: its state and, optionally, a deadline with the
// message enqueued if the deadline passes first.
type SagaWait struct {
	// StateJSON is the saga's state, JSON ("" for none).
	StateJSON string
	// Deadline, when set, times the saga out: the partition then enqueues the timeout message
	// (TimeoutQueue, TimeoutPayloadJSON) and moves the saga to SagaTimedOut in one transaction.
	Deadline time.Time
	// TimeoutQueue receives the timeout message (required with a deadline).
	TimeoutQueue string
	// TimeoutPayloadJSON is the timeout message's payload ("" for none).
	TimeoutPayloadJSON string
	// TimeoutRetry, when set, is the timeout message's retry policy (see MessageRetry; apply
	// version 19).
	TimeoutRetry *MessageRetry
	// Labels, when set, replace the saga's labels (List selects by them); unset, it keeps its
	// own. Needs apply version 12.
	Labels map[string]string
}

// exchange is the compare-and-set that moves h's saga from revision to phase with w.
func (w SagaWait) exchange(h *SagaHandle, revision uint64, phase SagaPhase) *orreryv1.CompareExchangeSaga {
	m := &orreryv1.CompareExchangeSaga{Lane: h.lane, SagaId: h.id, ExpectedRevision: revision, Phase: phase, StateJson: w.StateJSON, Labels: w.Labels}
	if !w.Deadline.IsZero() {
		m.DeadlineUnixMicros = w.Deadline.UnixMicro()
		m.Timeout = Timeout(w.TimeoutQueue, w.TimeoutPayloadJSON)
		m.Timeout.Template.Retry = w.TimeoutRetry.Proto()
	}
	return m
}

// Sagas is one namespace's sagas, addressed by name: c.Sagas("acme"). Its calls and its
// handles' take and return Go types; CompareExchangeSaga stays for batches.
type Sagas struct {
	c         *Client
	namespace string
}

// Sagas is namespace's sagas.
func (c *Client) Sagas(namespace string) *Sagas { return &Sagas{c: c, namespace: namespace} }

// Handle addresses the saga named name in queue and key ("": the name) without a call. A saga
// lives in the lane (namespace, queue, key) under the id SagaID derives from its name; the
// queue is its lane's, not its timeout's. The handle knows no revision until Describe or a
// change reads one.
func (s *Sagas) Handle(queue, key, name string) *SagaHandle {
	return &SagaHandle{c: s.c, lane: &orreryv1.Lane{Namespace: s.namespace, Queue: queue, Key: cmp.Or(key, name)},
		name: name, id: SagaID(s.namespace, name)}
}

// Start creates the saga named name in queue and key ("": the name), waiting with w. A saga of
// that name already there is a RevisionConflict.
func (s *Sagas) Start(ctx context.Context, queue, key, name string, w SagaWait, opts ...CallOption) (*SagaHandle, error) {
	if name == "" {
		return nil, orrery.Invalid("name", "a saga needs a name")
	}
	h := s.Handle(queue, key, name)
	if err := h.exchange(ctx, w.exchange(h, 0, SagaWaiting), opts); err != nil {
		return nil, err
	}
	return h, nil
}

// ListSagas filters Sagas.List: the zero value lists every saga of the namespace.
type ListSagas struct {
	// Queue, when set, lists only that queue's sagas.
	Queue string
	// Phase, when set, lists only the sagas in that phase.
	Phase SagaPhase
	// PageSize is how many sagas each call fetches (0: DefaultListMax; at most MaxListMax).
	PageSize int
	// Labels, when set, lists only the sagas carrying every one of these labels with the value
	// given (an empty value: the label with any value).
	Labels map[string]string
}

// List yields the namespace's sagas in (queue, key, id) order, a page at a time as the loop
// goes on; a failed fetch is yielded as the error of a last pair. A listed saga's Name is
// empty: the record keeps the id only.
func (s *Sagas) List(ctx context.Context, f ListSagas) iter.Seq2[*SagaDescription, error] {
	return pages(func(after []byte) ([]ListedSaga, []byte, error) {
		return s.c.ListSagas(ctx, ListSagasRequest{Namespace: s.namespace, Queue: f.Queue, Phase: f.Phase, MaxRecords: f.PageSize, After: after, Labels: f.Labels})
	}, func(l ListedSaga) *SagaDescription {
		d := describeSaga(l.Record)
		d.Partition = l.Partition
		return d
	})
}

// SagaHandle is one saga, addressed by its lane and name, with the revision it last read or
// wrote: each change compares and sets that revision, so a change that meets another one (or
// the timeout) fails with RevisionConflict instead of overwriting it; Describe then reads the
// saga and its revision again. It is safe for concurrent use.
type SagaHandle struct {
	c        *Client
	lane     *orreryv1.Lane
	name, id string
	revision atomic.Uint64
}

// Name is the saga's name.
func (h *SagaHandle) Name() string { return h.name }

// ID is the saga's id (SagaID).
func (h *SagaHandle) ID() string { return h.id }

// Revision is the revision the handle last read or wrote (0: none yet).
func (h *SagaHandle) Revision() uint64 { return h.revision.Load() }

// Describe reads the saga and takes its revision. NotFound when there is none.
func (h *SagaHandle) Describe(ctx context.Context) (*SagaDescription, error) {
	rec, err := h.c.InspectSaga(ctx, h.lane, h.id)
	if err != nil {
		return nil, err
	}
	h.revision.Store(rec.GetRevision())
	d := describeSaga(rec)
	d.Name, d.Partition = h.name, h.c.PartitionOf(h.lane)
	return d, nil
}

// Wait keeps the saga waiting with w: a new state, deadline or timeout message.
func (h *SagaHandle) Wait(ctx context.Context, w SagaWait, opts ...CallOption) error {
	return h.exchange(ctx, w.exchange(h, h.Revision(), SagaWaiting), opts)
}

// Complete ends the saga with stateJSON ("" for none): its deadline no longer applies. A saga
// that timed out meanwhile is a RevisionConflict (its timeout message is enqueued).
func (h *SagaHandle) Complete(ctx context.Context, stateJSON string, opts ...CallOption) error {
	return h.exchange(ctx, SagaWait{StateJSON: stateJSON}.exchange(h, h.Revision(), SagaCompleted), opts)
}

// Cancel ends the saga as cancelled, keeping stateJSON ("" for none).
func (h *SagaHandle) Cancel(ctx context.Context, stateJSON string, opts ...CallOption) error {
	return h.exchange(ctx, SagaWait{StateJSON: stateJSON}.exchange(h, h.Revision(), SagaCancelled), opts)
}

// exchange sends m and takes the revision it wrote.
func (h *SagaHandle) exchange(ctx context.Context, m *orreryv1.CompareExchangeSaga, opts []CallOption) error {
	res, err := h.c.CompareExchangeSaga(ctx, m, opts...)
	if err != nil {
		return err
	}
	h.revision.Store(res.GetRevision())
	return nil
}

// SagaDescription is a saga as Describe or List reads it, in Go types. Zero times mean none.
type SagaDescription struct {
	// Name is the saga's name (empty from List); ID its id; Namespace, Queue and Key its
	// lane; Partition the partition it lives in.
	Name, ID, Namespace, Queue, Key string
	Partition                       int
	// Revision moves with every change; Phase is where the saga stands.
	Revision uint64
	Phase    SagaPhase
	// StateJSON is its state.
	StateJSON string
	// Deadline is when it times out while waiting.
	Deadline time.Time
	// TimeoutQueue and TimeoutPayloadJSON are the message its timeout enqueues;
	// TimeoutMessageID the message a timeout enqueued.
	TimeoutQueue, TimeoutPayloadJSON, TimeoutMessageID string
	// Creator is the principal that started it.
	Creator string
	// Labels are its labels.
	Labels map[string]string
}

// describeSaga is the description a stored record gives.
func describeSaga(rec *orreryv1.SagaRecord) *SagaDescription {
	return &SagaDescription{
		ID: rec.GetSagaId(), Namespace: rec.GetLane().GetNamespace(), Queue: rec.GetLane().GetQueue(), Key: rec.GetLane().GetKey(),
		Revision: rec.GetRevision(), Phase: rec.GetPhase(), StateJSON: rec.GetStateJson(), Deadline: instant(rec.GetDeadlineUnixMicros()),
		TimeoutQueue: rec.GetTimeout().GetQueue(), TimeoutPayloadJSON: rec.GetTimeout().GetTemplate().GetPayloadJson(),
		TimeoutMessageID: rec.GetTimeoutMessageId(), Creator: rec.GetCreator(), Labels: rec.GetLabels(),
	}
}
