package queue

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

// enqueueAs applies an Enqueue of id (lane key "k" of the test queue, the bundle's default
// payload, then edit) under idempotency, returning its result or error.
func (b *bundle) enqueueAs(idempotency Idempotency, id string, edit ...func(*orreryv1.Enqueue)) (*orreryv1.EnqueueResult, error) {
	b.t.Helper()
	m := &orreryv1.Enqueue{Lane: laneOf(testQueue, "k"), Id: id, PayloadJson: `{"id":"` + id + `"}`}
	for _, e := range edit {
		e(m)
	}
	return ApplyEnqueue(b.store, b.lim, m, b.now, idempotency)
}

// wantConflict fails unless err is an IdempotencyConflict on "id" that names id and every
// part of parts, and never the secret.
func wantConflict(t *testing.T, err error, id string, parts []string, secret string) {
	t.Helper()
	e := orrery.AsError(err)
	if !errors.Is(err, orrery.ErrIdempotencyConflict) || e.Field != "id" || !strings.Contains(e.Message, `"`+id+`"`) {
		t.Fatalf("got %v, want IdempotencyConflict on id naming %q", err, id)
	}
	start := strings.Index(e.Message, " in its ")
	end := strings.Index(e.Message, ": an enqueue")
	if start < 0 || end < start {
		t.Fatalf("%v does not say in what it differs", err)
	}
	if named := strings.Split(e.Message[start+len(" in its "):end], " and "); !slices.Equal(named, parts) {
		t.Fatalf("%v: names %v, want %v", err, named, parts)
	}
	if secret != "" && strings.Contains(err.Error(), secret) {
		t.Fatalf("%v echoes the payload %q", err, secret)
	}
}

// differing are enqueues of id "a" that differ from the bundle's default in one part each,
// and the part they differ in.
var differing = []struct {
	part string
	edit func(*orreryv1.Enqueue)
}{
	{"payload_json", func(m *orreryv1.Enqueue) { m.PayloadJson = `{"card":"4111-secret"}` }},
	{"headers_json", func(m *orreryv1.Enqueue) { m.HeadersJson = `{"trace":"x"}` }},
	{"ordering_key", func(m *orreryv1.Enqueue) { m.OrderingKey = "customer-1" }},
}

// TestCompareOrReturnLiveMessage: under CompareOrReturn an enqueue whose id a live message
// holds with another payload, headers or ordering key fails IdempotencyConflict on id, naming
// the part and not its value, and writes nothing; one that differs only in how it is delivered
// (delay, time to live, max deliveries) is the same message: created=false, nothing written.
func TestCompareOrReturnLiveMessage(t *testing.T) {
	for _, tc := range differing {
		t.Run(tc.part, func(t *testing.T) {
			b := setup(t)
			b.enqueue("a")
			before := b.store.Clone()
			res, err := b.enqueueAs(CompareOrReturn, "a", tc.edit)
			wantConflict(t, err, "a", []string{tc.part}, "4111-secret")
			if res != nil || !b.store.Equal(before) {
				t.Fatalf("a conflicting enqueue answered %v or wrote", res)
			}
		})
	}
	b := setup(t)
	b.enqueue("a")
	before := b.store.Clone()
	res, err := b.enqueueAs(CompareOrReturn, "a", func(m *orreryv1.Enqueue) {
		m.DelayMicros, m.TimeToLiveMicros, m.MaxDeliveries = input.Minute, input.Hour, 2
	})
	if err != nil || res.GetCreated() || res.GetId() != "a" || !b.store.Equal(before) {
		t.Fatalf("the same message again: %v %v (or it wrote), want created=false and no write", res, err)
	}
	// Several parts at once are all named.
	_, err = b.enqueueAs(CompareOrReturn, "a", differing[0].edit, differing[1].edit)
	wantConflict(t, err, "a", []string{"payload_json", "headers_json"}, "4111-secret")
}

// TestCompareOrReturnOrigin: a client's enqueue under the id of a message that has an origin
// (a saga's timeout) is another message, and a put of that timeout under a client's message
// is one too: their origins differ.
func TestCompareOrReturnOrigin(t *testing.T) {
	b := setup(t)
	timeout := &orreryv1.QueueMessage{
		Id: "saga-timeout-x", Lane: laneOf(testQueue, "k"), PayloadJson: `{"id":"saga-timeout-x"}`,
		EnqueuedAtUnixMicros: b.now, VisibleAtUnixMicros: b.now, MaxDeliveries: 3,
		Origin: &orreryv1.QueueMessage_SagaTimeout{SagaTimeout: &orreryv1.SagaTimeoutOrigin{SagaId: "s", WaitingRevision: 1}},
	}
	if created, err := PutAs(b.store, b.lim, timeout, CompareOrReturn); err != nil || !created {
		t.Fatalf("put the timeout: %v %v", created, err)
	}
	before := b.store.Clone()
	_, err := b.enqueueAs(CompareOrReturn, "saga-timeout-x")
	wantConflict(t, err, "saga-timeout-x", []string{"origin"}, "")
	b.enqueue("c")
	foreign := &orreryv1.QueueMessage{
		Id: "c", Lane: laneOf(testQueue, "k"), PayloadJson: `{"id":"c"}`, EnqueuedAtUnixMicros: b.now, VisibleAtUnixMicros: b.now, MaxDeliveries: 3,
		Origin: &orreryv1.QueueMessage_SagaTimeout{SagaTimeout: &orreryv1.SagaTimeoutOrigin{SagaId: "s", WaitingRevision: 2}},
	}
	before = b.store.Clone()
	if _, err := PutAs(b.store, b.lim, foreign, CompareOrReturn); !b.store.Equal(before) {
		t.Fatal("a conflicting put wrote")
	} else {
		wantConflict(t, err, "c", []string{"origin"}, "")
	}
	// The timeout put again (its retry) is the same message.
	again := &orreryv1.QueueMessage{Id: timeout.GetId(), Lane: timeout.GetLane(), PayloadJson: timeout.GetPayloadJson(), Origin: timeout.GetOrigin()}
	if created, err := PutAs(b.store, b.lim, again, CompareOrReturn); err != nil || created {
		t.Fatalf("the timeout again: %v %v, want created=false", created, err)
	}
}

// TestCompareOrReturnTombstone: the digest stored with a message stays on its tombstone once
// it is acked, so an enqueue under its id is still compared: another payload, headers or
// ordering key fails IdempotencyConflict (saying the message was acked), the same message is
// created=false, and neither writes.
func TestCompareOrReturnTombstone(t *testing.T) {
	for _, tc := range differing {
		t.Run(tc.part, func(t *testing.T) {
			b := setup(t)
			b.enqueue("a")
			msg := b.receive(testQueue, 1)[0]
			if _, _, err := ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: msg.GetLane(), Id: "a", LeaseToken: msg.GetLease().GetToken()}, b.now); err != nil {
				t.Fatal(err)
			}
			if ts, found := b.tombstone(msg.GetLane(), "a"); !found || ts.GetDigest().GetPayloadSha256() == nil {
				t.Fatalf("tombstone %v (found %v), want one with the message's digest", ts, found)
			}
			b.advance(input.Minute)
			before := b.store.Clone()
			_, err := b.enqueueAs(CompareOrReturn, "a", tc.edit)
			wantConflict(t, err, "a", []string{tc.part}, "4111-secret")
			if !strings.Contains(err.Error(), "acked") || !b.store.Equal(before) {
				t.Fatalf("%v: want it to say the message was acked, and no write", err)
			}
			if res, err := b.enqueueAs(CompareOrReturn, "a"); err != nil || res.GetCreated() || !b.store.Equal(before) {
				t.Fatalf("the same message after its ack: %v %v (or it wrote), want created=false", res, err)
			}
		})
	}
}

// TestCompareOrReturnBeforeDigests: a message stored before apply version 18 (SameByID: not
// marked compared) is still compared while it is live, field by field, but once removed its tombstone
// has no digest to compare, and any message under its id is taken for it (created=false, no
// write), as before.
func TestCompareOrReturnBeforeDigests(t *testing.T) {
	b := setup(t)
	if res, err := b.enqueueAs(SameByID, "a"); err != nil || !res.GetCreated() {
		t.Fatalf("enqueue before digests: %v %v", res, err)
	}
	if msg, _ := b.message(laneOf(testQueue, "k"), "a"); msg.GetCompared() {
		t.Fatal("SameByID marked the message compared")
	}
	_, err := b.enqueueAs(CompareOrReturn, "a", differing[0].edit)
	wantConflict(t, err, "a", []string{"payload_json"}, "4111-secret")
	msg := b.receive(testQueue, 1)[0]
	if _, _, err := ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: msg.GetLane(), Id: "a", LeaseToken: msg.GetLease().GetToken()}, b.now); err != nil {
		t.Fatal(err)
	}
	if ts, found := b.tombstone(msg.GetLane(), "a"); !found || ts.GetDigest() != nil {
		t.Fatalf("tombstone %v (found %v), want one without a digest", ts, found)
	}
	before := b.store.Clone()
	for _, tc := range differing {
		if res, err := b.enqueueAs(CompareOrReturn, "a", tc.edit); err != nil || res.GetCreated() || !b.store.Equal(before) {
			t.Fatalf("%s differing after a tombstone without digest: %v %v (or it wrote), want created=false", tc.part, res, err)
		}
	}
}

// TestSameByIDTakesAnyMessageUnderAHeldID: before apply version 18 an enqueue under a held
// id, live or tombstoned, is taken for the message there whatever it carries.
func TestSameByIDTakesAnyMessageUnderAHeldID(t *testing.T) {
	b := setup(t)
	b.enqueue("a")
	before := b.store.Clone()
	for _, tc := range differing {
		if res, err := b.enqueueAs(SameByID, "a", tc.edit); err != nil || res.GetCreated() || !b.store.Equal(before) {
			t.Fatalf("%s differing under SameByID: %v %v (or it wrote), want created=false", tc.part, res, err)
		}
	}
}

// TestDeadLetterKeepsTheDigest: a message moved to its dead-letter queue leaves its digest on
// the source lane's tombstone (so its id is still compared there) and stays marked compared
// in the dead-letter lane (so its tombstone there, or a redrive, keeps comparing).
func TestDeadLetterKeepsTheDigest(t *testing.T) {
	b := setup(t)
	b.enqueue("a", func(m *orreryv1.Enqueue) { m.MaxDeliveries = 1 })
	b.receive(testQueue, 1)
	b.advance(b.lim.DefaultLeaseMicros + input.Second)
	b.receive(testQueue, 1) // the lease ended after its one delivery: dead-lettered
	lane := laneOf(testQueue, "k")
	if _, live := b.message(DeadLetterLane(lane), "a"); !live {
		t.Fatal("not dead-lettered")
	}
	_, err := b.enqueueAs(CompareOrReturn, "a", differing[0].edit)
	wantConflict(t, err, "a", []string{"payload_json"}, "4111-secret")
	if dead, _ := b.message(DeadLetterLane(lane), "a"); !dead.GetCompared() {
		t.Fatalf("the dead letter is not marked compared: %v", dead)
	}
}
