package saga

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
)

// Fixtures shared by the tests.
const (
	sagaID       = "0f8fad5b-d9cb-469f-a165-70867728950e"
	otherSagaID  = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	creator      = "alice"
	otherCaller  = "bob"
	timeoutQueue = "saga-timeouts"
	// t0 is the logged time the tests start at: 2023-11-14T22:13:20Z.
	t0 int64 = 1_700_000_000_000_000
)

// sagaLane is where the test saga lives.
func sagaLane() *orreryv1.Lane {
	return &orreryv1.Lane{Namespace: "orders", Queue: "sagas", Key: "order-17"}
}

// destLane is where the test saga's timeout lands.
func destLane() *orreryv1.Lane {
	return &orreryv1.Lane{Namespace: "orders", Queue: timeoutQueue, Key: "order-17"}
}

// timeoutWith is a timeout into timeoutQueue with the given TTL.
func timeoutWith(ttlMicros int64) *orreryv1.SagaTimeout {
	return &orreryv1.SagaTimeout{
		Queue: timeoutQueue,
		Template: &orreryv1.MessageTemplate{
			PayloadJson:      `{"order":17,"event":"timeout"}`,
			HeadersJson:      `{"trace":"abc"}`,
			OrderingKey:      "order-17",
			TimeToLiveMicros: ttlMicros,
		},
	}
}

// create is a CompareExchangeSaga creating the test saga Waiting, with a deadline when
// deadline is non-zero.
func create(deadline int64) *orreryv1.CompareExchangeSaga {
	m := &orreryv1.CompareExchangeSaga{
		Lane:      sagaLane(),
		SagaId:    sagaID,
		Phase:     waiting,
		StateJson: `{"step":1}`,
	}
	if deadline != 0 {
		m.DeadlineUnixMicros = deadline
		m.Timeout = timeoutWith(0)
	}
	return m
}

// exchange is a CompareExchangeSaga moving the test saga at expected to phase, with a deadline
// when deadline is non-zero.
func exchange(expected uint64, phase orreryv1.SagaPhase, deadline int64) *orreryv1.CompareExchangeSaga {
	m := create(deadline)
	m.ExpectedRevision = expected
	m.Phase = phase
	m.StateJson = `{"step":2}`
	return m
}

// expire is an ExpireSaga of the test saga at expected.
func expire(expected uint64) *orreryv1.ExpireSaga {
	return &orreryv1.ExpireSaga{Lane: sagaLane(), SagaId: sagaID, ExpectedRevision: expected}
}

// step is one mutation applied while preparing a test; it must succeed.
type step struct {
	principal string
	cas       *orreryv1.CompareExchangeSaga
	expire    *orreryv1.ExpireSaga
	now       int64
}

func casStep(m *orreryv1.CompareExchangeSaga, now int64) step {
	return step{principal: creator, cas: m, now: now}
}

func expireStep(m *orreryv1.ExpireSaga, now int64) step { return step{expire: m, now: now} }

// apply runs one step on v.
func (s step) apply(v kv.View, lim input.Limits) (*orreryv1.SagaResult, error) {
	if s.expire != nil {
		return ApplyExpire(v, lim, proto.CloneOf(s.expire), s.now, queue.CompareOrReturn)
	}
	principal := s.principal
	if principal == "" {
		principal = creator
	}
	return ApplyCompareExchange(v, lim, principal, proto.CloneOf(s.cas), s.now)
}

// prepare applies steps to a fresh store, failing the test if one fails.
func prepare(t *testing.T, lim input.Limits, steps ...step) *kv.Memory {
	t.Helper()
	mem := kv.NewMemory()
	for i, s := range steps {
		if _, err := s.apply(mem, lim); err != nil {
			t.Fatalf("prepare step %d: %v", i, err)
		}
	}
	return mem
}

// wantError fails unless err is an *orrery.Error with the code and field.
func wantError(t *testing.T, err error, code orrery.Code, field string) {
	t.Helper()
	var oe *orrery.Error
	if !errors.As(err, &oe) {
		t.Fatalf("error = %v, want an *orrery.Error with code %v", err, code)
	}
	if oe.Code != code || oe.Field != field {
		t.Fatalf("error = %v (code %v, field %q), want code %v, field %q", err, oe.Code, oe.Field, code, field)
	}
}

// mustLoad reads the test saga, failing if it is absent.
func mustLoad(t *testing.T, r kv.Reader) *orreryv1.SagaRecord {
	t.Helper()
	rec, found, err := Load(r, sagaLane(), sagaID)
	if err != nil || !found {
		t.Fatalf("Load = found %v, err %v; want the saga", found, err)
	}
	return rec
}

// dueEntries decodes the whole due index ("d/"), in key order.
func dueEntries(t *testing.T, r kv.Reader) []*orreryv1.DueRef {
	t.Helper()
	var refs []*orreryv1.DueRef
	err := kv.ScanPrefix(r, keys.Due, func(key, value []byte) (bool, error) {
		ref := &orreryv1.DueRef{}
		if err := proto.Unmarshal(value, ref); err != nil {
			return false, err
		}
		if want := keys.DueKey(ref.GetDueAtUnixMicros(), ref.GetKind(), ref.GetLane(), ref.GetId()); string(want) != string(key) {
			t.Errorf("due entry under %q holds a ref for key %q", key, want)
		}
		refs = append(refs, ref)
		return true, nil
	})
	if err != nil {
		t.Fatalf("scan due index: %v", err)
	}
	return refs
}

// wantDue fails unless the due index holds exactly the test saga's entry at dueAt with token
// (or nothing when dueAt is zero).
func wantDue(t *testing.T, r kv.Reader, dueAt int64, token uint64) {
	t.Helper()
	got := dueEntries(t, r)
	if dueAt == 0 {
		if len(got) != 0 {
			t.Fatalf("due index = %v, want empty", got)
		}
		return
	}
	want := &orreryv1.DueRef{Kind: orreryv1.DueKind_DUE_KIND_SAGA, Lane: sagaLane(), Id: sagaID, Token: token, DueAtUnixMicros: dueAt}
	if len(got) != 1 || !proto.Equal(got[0], want) {
		t.Fatalf("due index = %v, want exactly [%v]", got, want)
	}
}

// messages decodes every live queue message ("m/"), in key order.
func messages(t *testing.T, r kv.Reader) []*orreryv1.QueueMessage {
	t.Helper()
	var msgs []*orreryv1.QueueMessage
	err := kv.ScanPrefix(r, keys.Message, func(_, value []byte) (bool, error) {
		msg := &orreryv1.QueueMessage{}
		if err := proto.Unmarshal(value, msg); err != nil {
			return false, err
		}
		msgs = append(msgs, msg)
		return true, nil
	})
	if err != nil {
		t.Fatalf("scan messages: %v", err)
	}
	return msgs
}
