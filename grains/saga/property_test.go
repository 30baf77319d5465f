package saga

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
)

// modelSaga is the reference model's view of one saga.
type modelSaga struct {
	id       string
	exists   bool
	revision uint64
	phase    orreryv1.SagaPhase
	deadline int64
	queue    string // the timeout's queue while there is a deadline
	ttl      int64
	// frozen is the stored record once terminal; it must never change again.
	frozen []byte
}

// sagaModel is a tiny reference model of two sagas sharing one lane key, whose timeouts go to
// queues that hold at most one message each (so a second timeout into a queue hits the quota).
type sagaModel struct {
	lim      input.Limits
	mem      *kv.Memory
	now      int64
	sagas    [2]*modelSaga
	queued   map[string]int // messages per timeout queue
	enqueued int            // successful expiries
}

// propLane is the lane both sagas live in.
func propLane() *orreryv1.Lane {
	return &orreryv1.Lane{Namespace: "orders", Queue: "sagas", Key: "shared"}
}

// TestSagaModel runs random CompareExchangeSaga, ExpireSaga and time-advance sequences against
// the reference model. Each mutation runs on its own buffer, committed only on success, as the
// batch layer does. Invariants: outcomes match the model, a failed mutation writes nothing (a
// quota failure only in the discarded buffer), revisions strictly increase, terminal sagas never
// change, the due index is exact, and there is at most one timeout message per Waiting
// revision, each under its derived id.
func TestSagaModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		lim := input.DefaultLimits()
		lim.MaxLaneMessages = 1
		m := &sagaModel{
			lim:    lim,
			mem:    kv.NewMemory(),
			now:    t0,
			sagas:  [2]*modelSaga{{id: sagaID}, {id: otherSagaID}},
			queued: map[string]int{},
		}
		rt.Repeat(map[string]func(*rapid.T){
			"advance": func(rt *rapid.T) {
				m.now += rapid.SampledFrom([]int64{1, input.Second / 2, input.Second, 3 * input.Second}).Draw(rt, "advance")
			},
			"cas":    m.compareExchange,
			"expire": m.expire,
			"":       m.check,
		})
	})
}

// expectedRevision draws a revision near s's current one, most often the current one (rapid
// favours the first choices).
func (s *modelSaga) expectedRevision(rt *rapid.T, label string) uint64 {
	return rapid.SampledFrom([]uint64{s.revision, s.revision + 1, max(s.revision, 1) - 1, 0}).Draw(rt, label)
}

func (m *sagaModel) compareExchange(rt *rapid.T) {
	s := m.sagas[rapid.IntRange(0, 1).Draw(rt, "saga")]
	phase := rapid.SampledFrom([]orreryv1.SagaPhase{waiting, completed, waiting, cancelled, waiting, timedOut, absent}).Draw(rt, "phase")
	deadline := rapid.SampledFrom([]int64{m.now + input.Second, m.now + 2*input.Second, m.now + 1, m.now, m.now - input.Second}).Draw(rt, "deadline")
	timeout := rapid.SampledFrom([]*orreryv1.SagaTimeout{
		{Queue: "tq1", Template: &orreryv1.MessageTemplate{PayloadJson: `{"a":1}`}},
		{Queue: "tq1", Template: &orreryv1.MessageTemplate{TimeToLiveMicros: input.Second}},
		{Queue: "tq2"},
	}).Draw(rt, "timeout")
	// Mostly coherent requests (both or neither), sometimes one without the other.
	switch rapid.IntRange(0, 9).Draw(rt, "shape") {
	case 0, 1, 2, 3:
		deadline, timeout = 0, nil
	case 4:
		deadline = 0
	case 5:
		timeout = nil
	}
	msg := &orreryv1.CompareExchangeSaga{
		Lane:               propLane(),
		SagaId:             s.id,
		ExpectedRevision:   s.expectedRevision(rt, "expected"),
		Phase:              phase,
		StateJson:          fmt.Sprintf(`{"at":%d}`, m.now),
		DeadlineUnixMicros: deadline,
		Timeout:            timeout,
	}

	// The model's verdict.
	var want orrery.Code
	hasTimeout := timeout != nil
	switch {
	case phase == absent:
		want = orrery.CodeValidation
	case (deadline != 0 || hasTimeout) && phase != waiting:
		want = orrery.CodeValidation
	case (deadline != 0) != hasTimeout:
		want = orrery.CodeValidation
	case deadline != 0 && deadline <= m.now:
		want = orrery.CodeValidation
	case msg.ExpectedRevision == 0 && s.exists:
		want = orrery.CodeRevisionConflict
	case msg.ExpectedRevision == 0 && phase != waiting:
		want = orrery.CodeValidation
	case msg.ExpectedRevision != 0 && !s.exists:
		want = orrery.CodeNotFound
	case msg.ExpectedRevision != 0 && msg.ExpectedRevision != s.revision:
		want = orrery.CodeRevisionConflict
	case msg.ExpectedRevision != 0 && s.phase != waiting:
		want = orrery.CodeRevisionConflict
	case phase == timedOut:
		want = orrery.CodeValidation
	}

	res := m.run(rt, want, func(v kv.View) (*orreryv1.SagaResult, error) {
		return ApplyCompareExchange(v, m.lim, creator, msg, m.now)
	})
	if res == nil {
		return
	}
	s.exists = true
	s.revision++
	s.phase = phase
	s.deadline, s.queue, s.ttl = deadline, timeout.GetQueue(), timeout.GetTemplate().GetTimeToLiveMicros()
	if res.GetRevision() != s.revision || res.GetPhase() != phase || res.GetTimeoutMessageId() != "" {
		rt.Fatalf("result %v, model revision %d phase %v", res, s.revision, phase)
	}
	m.freezeIfTerminal(rt, s)
}

func (m *sagaModel) expire(rt *rapid.T) {
	s := m.sagas[rapid.IntRange(0, 1).Draw(rt, "saga")]
	expected := s.expectedRevision(rt, "expected")
	if expected == 0 && rapid.IntRange(0, 9).Draw(rt, "keep zero") != 0 {
		expected = 1 // revision 0 is always refused; keep it rare
	}
	msg := &orreryv1.ExpireSaga{Lane: propLane(), SagaId: s.id, ExpectedRevision: expected}

	var want orrery.Code
	switch {
	case msg.ExpectedRevision == 0:
		want = orrery.CodeValidation
	case !s.exists:
		want = orrery.CodeNotFound
	case s.revision != msg.ExpectedRevision || s.phase != waiting:
		want = orrery.CodeRevisionConflict
	case s.deadline == 0 || s.deadline > m.now:
		want = orrery.CodeValidation
	case s.ttl != 0 && s.deadline+s.ttl <= m.now:
		want = orrery.CodeExpired
	case m.queued[s.queue] >= int(m.lim.MaxLaneMessages):
		want = orrery.CodeQuotaExceeded
	}

	res := m.run(rt, want, func(v kv.View) (*orreryv1.SagaResult, error) {
		return ApplyExpire(v, m.lim, msg, m.now, queue.CompareOrReturn)
	})
	if res == nil {
		return
	}
	waitingRevision := s.revision
	s.revision++
	s.phase = timedOut
	m.queued[s.queue]++
	m.enqueued++
	if want := TimeoutMessageID(s.id, waitingRevision); res.GetRevision() != s.revision || res.GetPhase() != timedOut || res.GetTimeoutMessageId() != want {
		rt.Fatalf("result %v, want revision %d TIMED_OUT %s", res, s.revision, want)
	}
	m.freezeIfTerminal(rt, s)
}

// run applies one mutation on a fresh buffer over the store, checks its outcome against the
// model's verdict (zero: success), commits on success and discards the buffer otherwise. It
// returns the result on success and nil otherwise.
func (m *sagaModel) run(rt *rapid.T, want orrery.Code, apply func(kv.View) (*orreryv1.SagaResult, error)) *orreryv1.SagaResult {
	buf := kv.NewBuffer(m.mem)
	res, err := apply(buf)
	if got := orrery.CodeOf(err); got != want {
		rt.Fatalf("outcome %v (%v), model says %v", got, err, want)
	}
	if err != nil {
		if want != orrery.CodeQuotaExceeded && buf.Len() != 0 {
			rt.Fatalf("%v left %d buffered writes", err, buf.Len())
		}
		return nil
	}
	if err := buf.Commit(); err != nil {
		rt.Fatalf("commit: %v", err)
	}
	return res
}

func (m *sagaModel) freezeIfTerminal(rt *rapid.T, s *modelSaga) {
	if !terminal(s.phase) {
		return
	}
	b, found, err := m.mem.Get(keys.SagaKey(propLane(), s.id))
	if err != nil || !found {
		rt.Fatalf("terminal saga %s not stored: %v", s.id, err)
	}
	s.frozen = b
}

// check compares the store with the model after every action.
func (m *sagaModel) check(rt *rapid.T) {
	var wantDue []*orreryv1.DueRef
	for _, s := range m.sagas {
		rec, found, err := Load(m.mem, propLane(), s.id)
		if err != nil || found != s.exists {
			rt.Fatalf("saga %s: found %v err %v, model exists %v", s.id, found, err, s.exists)
		}
		if !found {
			continue
		}
		if rec.GetRevision() != s.revision || rec.GetPhase() != s.phase || rec.GetDeadlineUnixMicros() != s.deadline {
			rt.Fatalf("saga %s stored %v, model revision %d phase %v deadline %d", s.id, rec, s.revision, s.phase, s.deadline)
		}
		if s.frozen != nil {
			b, _, _ := m.mem.Get(keys.SagaKey(propLane(), s.id))
			if !bytes.Equal(b, s.frozen) {
				rt.Fatalf("terminal saga %s changed: %v", s.id, rec)
			}
		}
		if s.phase == waiting && s.deadline != 0 {
			wantDue = append(wantDue, &orreryv1.DueRef{Kind: orreryv1.DueKind_DUE_KIND_SAGA, Lane: propLane(), Id: s.id, Token: s.revision, DueAtUnixMicros: s.deadline})
		}
	}

	var gotDue []*orreryv1.DueRef
	err := kv.ScanPrefix(m.mem, keys.Due, func(_, value []byte) (bool, error) {
		ref := &orreryv1.DueRef{}
		gotDue = append(gotDue, ref)
		return true, proto.Unmarshal(value, ref)
	})
	if err != nil {
		rt.Fatalf("scan due: %v", err)
	}
	if !sameRefs(gotDue, wantDue) {
		rt.Fatalf("due index %v, model %v", gotDue, wantDue)
	}

	seen := map[string]bool{}
	count := 0
	err = kv.ScanPrefix(m.mem, keys.Message, func(_, value []byte) (bool, error) {
		msg := &orreryv1.QueueMessage{}
		if err := proto.Unmarshal(value, msg); err != nil {
			return false, err
		}
		origin := msg.GetSagaTimeout()
		perRevision := fmt.Sprintf("%s/%d", origin.GetSagaId(), origin.GetWaitingRevision())
		if seen[perRevision] {
			rt.Fatalf("two timeout messages for saga %s", perRevision)
		}
		seen[perRevision] = true
		if want := TimeoutMessageID(origin.GetSagaId(), origin.GetWaitingRevision()); msg.GetId() != want {
			rt.Fatalf("timeout message id %q, want %q", msg.GetId(), want)
		}
		count++
		return true, nil
	})
	if err != nil {
		rt.Fatalf("scan messages: %v", err)
	}
	if count != m.enqueued {
		rt.Fatalf("%d timeout messages stored, model enqueued %d", count, m.enqueued)
	}
}

// sameRefs compares due refs as sets (the index orders by due time, the model by saga).
func sameRefs(got, want []*orreryv1.DueRef) bool {
	if len(got) != len(want) {
		return false
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			if proto.Equal(g, w) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
