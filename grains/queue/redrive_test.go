package queue

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// deadLetters enqueues ids in lane key "k" with one delivery each, and lets each delivery's
// lease run out, so the next receive moves them all to the dead-letter queue.
func (b *bundle) deadLetters(ids ...string) {
	b.t.Helper()
	for _, id := range ids {
		b.enqueue(id, func(m *orreryv1.Enqueue) { m.MaxDeliveries = 1; m.HeadersJson = `{"h":"` + id + `"}` })
	}
	if got := b.receive(testQueue, uint32(len(ids))); len(got) != len(ids) {
		b.t.Fatalf("received %d of %d", len(got), len(ids))
	}
	b.advance(b.lim.DefaultLeaseMicros)
	if got := b.receive(testQueue, uint32(len(ids))); len(got) != 0 {
		b.t.Fatalf("received %v instead of dead-lettering them", ids)
	}
}

func (b *bundle) redrive(maxMessages uint32) *orreryv1.RedriveResult {
	b.t.Helper()
	res, err := ApplyRedrive(b.store, b.lim, &orreryv1.RedriveDeadLetters{Lane: laneOf(testQueue, "k"), Max: maxMessages}, b.now)
	if err != nil {
		b.t.Fatalf("redrive: %v", err)
	}
	b.check()
	return res
}

// tombstoneAges counts the tombstone age index entries.
func (b *bundle) tombstoneAges() int {
	b.t.Helper()
	n := 0
	if err := kv.ScanPrefix(b.store, keys.TombstoneAge, func(_, _ []byte) (bool, error) { n++; return true, nil }); err != nil {
		b.t.Fatal(err)
	}
	return n
}

func TestRedriveMovesDeadLettersBack(t *testing.T) {
	b := setup(t)
	b.deadLetters("a", "b")
	live, dead := laneOf(testQueue, "k"), laneOf(deadQueue, "k")
	before := map[string]*orreryv1.QueueMessage{}
	for _, id := range []string{"a", "b"} {
		msg, found := b.message(dead, id)
		if !found {
			t.Fatalf("%s is not dead-lettered", id)
		}
		before[id] = msg
	}
	if b.tombstoneAges() != 2 {
		t.Fatalf("%d tombstones after dead-lettering, want 2", b.tombstoneAges())
	}
	b.advance(7)
	res := b.redrive(0)
	if !slices.Equal(res.GetRedrivenIds(), []string{"a", "b"}) || res.GetSkipped() != 0 || res.GetMore() {
		t.Fatalf("redrive = %v", res)
	}
	for _, id := range []string{"a", "b"} {
		got, found := b.message(live, id)
		if !found {
			t.Fatalf("%s is not back in its lane", id)
		}
		want := proto.CloneOf(before[id])
		want.Lane, want.DeadLetteredFrom, want.DeliveryCount, want.Lease = live, "", 0, nil
		want.VisibleAtUnixMicros, want.Sequence = b.now, got.GetSequence()
		if !proto.Equal(got, want) {
			t.Fatalf("%s back as %v, want %v", id, got, want)
		}
		if got.GetSequence() <= before[id].GetSequence() {
			t.Fatalf("%s keeps sequence %d, want a new one after %d", id, got.GetSequence(), before[id].GetSequence())
		}
		if _, dlq := b.message(dead, id); dlq {
			t.Fatalf("%s still in the dead-letter queue", id)
		}
		if _, tomb := b.tombstone(live, id); tomb {
			t.Fatalf("%s keeps its tombstone in the lane", id)
		}
		if _, tomb := b.tombstone(dead, id); tomb {
			t.Fatalf("%s left a tombstone in the dead-letter lane", id)
		}
	}
	if b.tombstoneAges() != 0 {
		t.Fatalf("%d tombstone age entries left", b.tombstoneAges())
	}
	if n, _ := b.counters(dead); n != 0 {
		t.Fatalf("dead-letter lane counts %d", n)
	}
	if n, size := b.counters(live); n != 2 || size != MessageBytes(before["a"])+MessageBytes(before["b"]) {
		t.Fatalf("lane counts %d messages, %d bytes", n, size)
	}
	// Nothing is left to move, and the messages are delivered and can die again.
	if again := b.redrive(0); len(again.GetRedrivenIds()) != 0 || again.GetMore() {
		t.Fatalf("second redrive = %v", again)
	}
	got := b.receive(testQueue, 5)
	if !slices.Equal(ids(got), []string{"a", "b"}) || got[0].GetDeliveryCount() != 1 {
		t.Fatalf("received %v", got)
	}
	b.advance(b.lim.DefaultLeaseMicros)
	b.receive(testQueue, 5)
	if _, found := b.message(dead, "a"); !found {
		t.Fatal("a redriven message is not dead-lettered again")
	}
}

func TestRedriveSkipsLeasedAndLiveIDs(t *testing.T) {
	b := setup(t)
	b.deadLetters("a", "b", "c")
	leased := b.receive(deadQueue, 1) // a, leased from the dead-letter queue
	if !slices.Equal(ids(leased), []string{"a"}) {
		t.Fatalf("received %v from the dead-letter queue", ids(leased))
	}
	// b's tombstone is pruned and its id enqueued again: the live copy wins.
	if err := b.store.Delete(tombstoneKey(laneOf(testQueue, "k"), "b")); err != nil {
		t.Fatal(err)
	}
	b.enqueue("b")
	res := b.redrive(0)
	if !slices.Equal(res.GetRedrivenIds(), []string{"c"}) || res.GetSkipped() != 2 || res.GetMore() {
		t.Fatalf("redrive = %v", res)
	}
	// Once a's lease ends it goes too; b stays where it is.
	b.advance(b.lim.DefaultLeaseMicros)
	res = b.redrive(0)
	if !slices.Equal(res.GetRedrivenIds(), []string{"a"}) || res.GetSkipped() != 1 {
		t.Fatalf("redrive after the lease = %v", res)
	}
	if msg, _ := b.message(laneOf(testQueue, "k"), "b"); msg.GetPayloadJson() != `{"id":"b"}` || msg.GetDeadLetteredFrom() != "" {
		t.Fatalf("live b replaced by %v", msg)
	}
}

func TestRedriveMaxLeavesTheRest(t *testing.T) {
	b := setup(t)
	b.deadLetters("a", "b", "c")
	if res := b.redrive(2); !slices.Equal(res.GetRedrivenIds(), []string{"a", "b"}) || !res.GetMore() {
		t.Fatalf("first redrive = %v", res)
	}
	if res := b.redrive(2); !slices.Equal(res.GetRedrivenIds(), []string{"c"}) || res.GetMore() {
		t.Fatalf("second redrive = %v", res)
	}
}

func TestRedriveByteBudget(t *testing.T) {
	b := setup(t)
	b.deadLetters("a", "b")
	b.lim.MaxReceiveBytesPerCommand = 1 // the first message always goes
	if res := b.redrive(0); !slices.Equal(res.GetRedrivenIds(), []string{"a"}) || !res.GetMore() {
		t.Fatalf("redrive = %v", res)
	}
}

func TestRedriveQuota(t *testing.T) {
	b := setup(t)
	b.deadLetters("a", "b")
	b.enqueue("c")
	b.lim.MaxLaneMessages = 2
	_, err := ApplyRedrive(kv.NewBuffer(b.store), b.lim, &orreryv1.RedriveDeadLetters{Lane: laneOf(testQueue, "k")}, b.now)
	wantCode(t, err, orrery.CodeQuotaExceeded, "lane")
}

func TestRedriveValidation(t *testing.T) {
	b := setup(t)
	for _, tc := range []struct {
		m     *orreryv1.RedriveDeadLetters
		field string
	}{
		{nil, ""},
		{&orreryv1.RedriveDeadLetters{}, "lane"},
		{&orreryv1.RedriveDeadLetters{Lane: laneOf(deadQueue, "k")}, "lane.queue"},
		{&orreryv1.RedriveDeadLetters{Lane: laneOf(testQueue, "k"), Max: b.lim.MaxReceivePerCommand + 1}, "max"},
	} {
		_, err := ApplyRedrive(b.store, b.lim, tc.m, b.now)
		wantCode(t, err, orrery.CodeValidation, tc.field)
	}
}
