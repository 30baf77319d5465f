package queue

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

func delay(micros int64) func(*orreryv1.Enqueue) {
	return func(m *orreryv1.Enqueue) { m.DelayMicros = micros }
}

func TestReceiveOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		delays  map[string]int64 // id → delay; enqueued in order of enqueue
		enqueue []string
		advance int64
		max     uint32
		want    []string
	}{
		{"FIFO within one instant", nil, []string{"c", "a", "b"}, 0, 10, []string{"c", "a", "b"}},
		{"visible time across instants", map[string]int64{"x": 3 * input.Second, "y": input.Second, "z": 2 * input.Second}, []string{"x", "y", "z"}, 3 * input.Second, 10, []string{"y", "z", "x"}},
		{"only what is visible", map[string]int64{"late": 2 * input.Second}, []string{"late", "now"}, input.Second, 10, []string{"now"}},
		{"at most max", nil, []string{"a", "b", "c"}, 0, 2, []string{"a", "b"}},
		{"max zero means one", nil, []string{"a", "b"}, 0, 0, []string{"a"}},
		{"visible exactly at its instant", map[string]int64{"d": input.Second}, []string{"d"}, input.Second, 1, []string{"d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			for _, id := range tc.enqueue {
				b.enqueue(id, delay(tc.delays[id]))
			}
			b.advance(tc.advance)
			if got := ids(b.receive(testQueue, tc.max)); !slices.Equal(got, tc.want) {
				t.Fatalf("received %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReceiveLeases(t *testing.T) {
	b := setup(t)
	b.enqueue("a")
	b.enqueue("other-queue", func(m *orreryv1.Enqueue) { m.Lane = laneOf("mail", "k") })
	b.enqueue("other-namespace", func(m *orreryv1.Enqueue) { m.Lane.Namespace = "ns2" })
	got := b.receive(testQueue, 10)
	if !slices.Equal(ids(got), []string{"a"}) {
		t.Fatalf("received %v, want only a", ids(got))
	}
	msg := got[0]
	lease := msg.GetLease()
	wantToken := LeaseToken(msg.GetLane(), "a", 1, b.now)
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(lease.GetToken()) || lease.GetToken() != wantToken {
		t.Fatalf("token %q, want %q", lease.GetToken(), wantToken)
	}
	if lease.GetOwner() != "worker-1" || lease.GetUntilUnixMicros() != b.now+b.lim.DefaultLeaseMicros || msg.GetDeliveryCount() != 1 {
		t.Fatalf("lease %v, delivery count %d", lease, msg.GetDeliveryCount())
	}
	stored, _ := b.message(msg.GetLane(), "a")
	if stored.String() != msg.String() {
		t.Fatalf("result %v differs from stored %v", msg, stored)
	}
	if at, found, err := NextVisibleAt(b.store, testNamespace, testQueue); err != nil || !found || at != lease.GetUntilUnixMicros() {
		t.Fatalf("next visible %d %v %v, want the lease end", at, found, err)
	}
	// An explicit lease duration.
	b.enqueue("b")
	res, err := ApplyReceive(b.store, b.lim, &orreryv1.Receive{Namespace: testNamespace, Queue: testQueue, LeaseDurationMicros: input.Minute}, b.now)
	if err != nil || len(res.GetMessages()) != 1 || res.GetMessages()[0].GetLease().GetUntilUnixMicros() != b.now+input.Minute {
		t.Fatalf("receive %v %v", res, err)
	}
	b.check()
}

func TestReceiveLeaseExpiryRedelivers(t *testing.T) {
	b := setup(t)
	b.enqueue("a")
	first := b.receive(testQueue, 1)[0]
	b.advance(b.lim.DefaultLeaseMicros - 1)
	if got := b.receive(testQueue, 1); len(got) != 0 {
		t.Fatalf("redelivered %v before the lease ended", ids(got))
	}
	b.advance(1)
	second := b.receive(testQueue, 1)
	if len(second) != 1 || second[0].GetDeliveryCount() != 2 || second[0].GetLease().GetToken() == first.GetLease().GetToken() {
		t.Fatalf("redelivery %v after %v", second, first)
	}
	before := b.store.Clone()
	_, _, err := ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: first.GetLane(), Id: "a", LeaseToken: first.GetLease().GetToken()}, b.now)
	wantCode(t, err, orrery.CodeTokenInvalidated, "lease_token")
	if !b.store.Equal(before) {
		t.Fatal("stale ack wrote")
	}
	if _, _, err := ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: first.GetLane(), Id: "a", LeaseToken: second[0].GetLease().GetToken()}, b.now); err != nil {
		t.Fatal(err)
	}
	b.check()
}

func TestReceiveExpiresByTTL(t *testing.T) {
	b := setup(t)
	b.enqueue("a", func(m *orreryv1.Enqueue) { m.DelayMicros = input.Second; m.TimeToLiveMicros = 5 * input.Second })
	b.enqueue("b")
	b.advance(input.Second)
	got := b.receive(testQueue, 10) // a is visible and not yet expired
	if !slices.Equal(ids(got), []string{"b", "a"}) {
		t.Fatalf("received %v", ids(got))
	}
	b.advance(b.lim.DefaultLeaseMicros) // both leases end; a's TTL (6 s after start) passed
	got = b.receive(testQueue, 10)
	if !slices.Equal(ids(got), []string{"b"}) {
		t.Fatalf("received %v, want b only", ids(got))
	}
	lane := laneOf(testQueue, "k")
	if _, found := b.message(lane, "a"); found {
		t.Fatal("expired message still live")
	}
	if ts, found := b.tombstone(lane, "a"); !found || !ts.GetExpired() || ts.GetRemovedAtUnixMicros() != b.now {
		t.Fatalf("tombstone %v %v", ts, found)
	}
	if n, _ := b.counters(lane); n != 1 {
		t.Fatalf("lane counts %d messages, want 1", n)
	}
	if res := b.enqueue("a"); res.GetCreated() {
		t.Fatal("expired id was enqueued again")
	}
}

func TestReceiveDeadLetters(t *testing.T) {
	b := setup(t)
	b.lim.MaxLaneMessages = 1 // the dead-letter lane will hold more: the move bypasses quota
	source := laneOf(testQueue, "k")
	dead := laneOf(deadQueue, "k")
	for _, id := range []string{"a", "b"} {
		b.enqueue(id, func(m *orreryv1.Enqueue) { m.MaxDeliveries = 2; m.HeadersJson = `{"x":1}` })
		for range 2 {
			if got := b.receive(testQueue, 5); !slices.Equal(ids(got), []string{id}) {
				t.Fatalf("received %v, want %s", ids(got), id)
			}
			b.advance(b.lim.DefaultLeaseMicros)
		}
		if got := b.receive(testQueue, 5); len(got) != 0 {
			t.Fatalf("delivered %v past max deliveries", ids(got))
		}
		if _, found := b.message(source, id); found {
			t.Fatalf("%s is still in the source queue", id)
		}
		if _, found := b.tombstone(source, id); !found {
			t.Fatalf("%s left no tombstone in the source lane", id)
		}
		msg, found := b.message(dead, id)
		if !found || msg.GetDeadLetteredFrom() != testQueue || msg.GetDeliveryCount() != 0 || msg.GetLease() != nil || msg.GetVisibleAtUnixMicros() != b.now || msg.GetPayloadJson() != `{"id":"`+id+`"}` {
			t.Fatalf("dead-lettered %v %v", msg, found)
		}
	}
	if n, size := b.counters(dead); n != 2 || size != 2*uint64(len(`{"id":"a"}{"x":1}`)) {
		t.Fatalf("dead-letter counters %d/%d", n, size)
	}
	if n, _ := b.counters(source); n != 0 {
		t.Fatalf("source counts %d", n)
	}
	// A dead-lettered message is redelivered from the dead-letter queue, never dead-lettered
	// again, however often its lease ends.
	for i := range 4 {
		got := b.receive(deadQueue, 5)
		if len(got) != 2 || got[0].GetDeliveryCount() != uint32(i+1) {
			t.Fatalf("dead-letter delivery %d: %v", i, got)
		}
		b.advance(b.lim.DefaultLeaseMicros)
	}
	got := b.receive(deadQueue, 1)
	if _, _, err := ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: dead, Id: got[0].GetId(), LeaseToken: got[0].GetLease().GetToken()}, b.now); err != nil {
		t.Fatal(err)
	}
	b.check()
}

func TestReleasedDeliveryCountsTowardDeadLetter(t *testing.T) {
	b := setup(t)
	b.enqueue("a", func(m *orreryv1.Enqueue) { m.MaxDeliveries = 1 })
	msg := b.receive(testQueue, 1)[0]
	if _, err := ApplyRelease(b.store, b.lim, &orreryv1.Release{Lane: msg.GetLane(), Id: "a", LeaseToken: msg.GetLease().GetToken()}, b.now); err != nil {
		t.Fatal(err)
	}
	if got := b.receive(testQueue, 1); len(got) != 0 {
		t.Fatalf("delivered %v past max deliveries", ids(got))
	}
	if got := b.receive(deadQueue, 1); !slices.Equal(ids(got), []string{"a"}) {
		t.Fatalf("dead-letter queue gave %v", ids(got))
	}
}

func TestDeadLetterDoesNotDuplicateAnID(t *testing.T) {
	b := setup(t)
	b.enqueue("a", func(m *orreryv1.Enqueue) { m.MaxDeliveries = 1 })
	msg := b.receive(testQueue, 1)[0]
	b.advance(b.lim.DefaultLeaseMicros)
	b.receive(testQueue, 1) // moves a to the dead-letter queue
	// Simulate a pruned source tombstone: the id comes back and fails again.
	if err := b.store.Delete(tombstoneKey(msg.GetLane(), "a")); err != nil {
		t.Fatal(err)
	}
	b.enqueue("a", func(m *orreryv1.Enqueue) { m.MaxDeliveries = 1; m.PayloadJson = `"second"` })
	b.receive(testQueue, 1)
	b.advance(b.lim.DefaultLeaseMicros)
	b.receive(testQueue, 1)
	dead, _ := b.message(laneOf(deadQueue, "k"), "a")
	if dead.GetPayloadJson() != `{"id":"a"}` {
		t.Fatalf("dead-letter copy replaced by %v", dead)
	}
	if n, _ := b.counters(laneOf(deadQueue, "k")); n != 1 {
		t.Fatalf("dead-letter lane counts %d", n)
	}
}

// TestReceiveSweepBudget checks that a backlog of expired messages is removed in bounded
// steps and that the messages behind it are still reached.
func TestReceiveSweepBudget(t *testing.T) {
	b := setup(t)
	for i := range SweepBudget + 10 {
		m := &orreryv1.Enqueue{Lane: laneOf(testQueue, "k"), Id: idOf(i), TimeToLiveMicros: 1}
		if _, err := ApplyEnqueue(b.store, b.lim, m, b.now, CompareOrReturn); err != nil {
			t.Fatal(err)
		}
	}
	b.enqueue("live", delay(1))
	b.advance(1)
	if got := b.receive(testQueue, 5); len(got) != 0 {
		t.Fatalf("received %v inside the sweep budget", ids(got))
	}
	if n, _ := b.counters(laneOf(testQueue, "k")); n != 11 {
		t.Fatalf("%d messages left after one sweep, want 11", n)
	}
	if got := b.receive(testQueue, 5); !slices.Equal(ids(got), []string{"live"}) {
		t.Fatalf("second receive gave %v", ids(got))
	}
}

// TestReceiveByteBudget: a receive stops once the payload and header bytes it leased reach
// Limits.MaxReceiveBytesPerCommand (the first message always goes, however large), and the
// messages behind it come with the next receives, in order.
func TestReceiveByteBudget(t *testing.T) {
	b := setup(t)
	b.lim.MaxReceiveBytesPerCommand = 100
	payload := func(n int) func(*orreryv1.Enqueue) {
		return func(m *orreryv1.Enqueue) { m.PayloadJson = `"` + strings.Repeat("x", n-2) + `"` }
	}
	b.enqueue("huge", payload(500))
	b.enqueue("a", payload(40))
	b.enqueue("b", payload(40))
	b.enqueue("c", payload(40))
	b.enqueue("d", payload(10))
	for _, want := range [][]string{{"huge"}, {"a", "b", "c"}, {"d"}} {
		if got := b.receive(testQueue, 10); !slices.Equal(ids(got), want) {
			t.Fatalf("received %v, want %v", ids(got), want)
		}
	}
}

// TestApplyThroughBuffer runs the same commands on a Memory and through a kv.Buffer (how
// the batch layer applies) and requires identical stores.
func TestApplyThroughBuffer(t *testing.T) {
	direct, buffered := setup(t), setup(t)
	run := func(b *bundle, v kv.View) {
		lim := b.lim
		for i := range 6 {
			if _, err := ApplyEnqueue(v, lim, &orreryv1.Enqueue{Lane: laneOf(testQueue, "k"), Id: idOf(i), MaxDeliveries: 1, TimeToLiveMicros: int64(i+1) * input.Minute}, startMicros, CompareOrReturn); err != nil {
				t.Fatal(err)
			}
		}
		for step := range 4 {
			now := startMicros + int64(step)*input.Minute
			if _, err := ApplyReceive(v, lim, &orreryv1.Receive{Namespace: testNamespace, Queue: testQueue, Max: 2}, now); err != nil {
				t.Fatal(err)
			}
			if _, err := ApplyReceive(v, lim, &orreryv1.Receive{Namespace: testNamespace, Queue: deadQueue, Max: 1}, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	run(direct, direct.store)
	buf := kv.NewBuffer(buffered.store)
	run(buffered, buf)
	if err := buf.Commit(); err != nil {
		t.Fatal(err)
	}
	if !direct.store.Equal(buffered.store) {
		t.Fatal("applying through a buffer gave another store")
	}
	direct.check()
}

// TestReceiveSaysWhetherVisibleMessagesRemain: more is set exactly when the max or the byte
// budget left visible messages behind; a message not yet visible does not count.
func TestReceiveSaysWhetherVisibleMessagesRemain(t *testing.T) {
	b := setup(t)
	b.lim.MaxReceiveBytesPerCommand = 100
	receive := func(maxMessages uint32) (ids []string, more bool) {
		t.Helper()
		res, err := ApplyReceive(b.store, b.lim, &orreryv1.Receive{Namespace: testNamespace, Queue: testQueue, Max: maxMessages, Owner: "worker-1"}, b.now)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res.GetMessages() {
			ids = append(ids, m.GetId())
		}
		return ids, res.GetMore()
	}
	b.enqueue("a")
	b.enqueue("b")
	b.enqueue("c")
	b.enqueue("later", func(m *orreryv1.Enqueue) { m.DelayMicros = input.Minute })
	if got, more := receive(2); !slices.Equal(got, []string{"a", "b"}) || !more {
		t.Fatalf("receive of 2 of 3 visible: %v more=%v, want [a b] more=true", got, more)
	}
	if got, more := receive(5); !slices.Equal(got, []string{"c"}) || more {
		t.Fatalf("receive of the last visible: %v more=%v, want [c] more=false", got, more)
	}
	big := func(m *orreryv1.Enqueue) { m.PayloadJson = `"` + strings.Repeat("x", 98) + `"` }
	b.enqueue("big1", big)
	b.enqueue("big2", big)
	if got, more := receive(5); !slices.Equal(got, []string{"big1"}) || !more {
		t.Fatalf("receive stopped by the byte budget: %v more=%v, want [big1] more=true", got, more)
	}
}
