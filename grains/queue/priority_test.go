package queue

import (
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// withPriority sets an enqueue's priority.
func withPriority(p int32) func(*orreryv1.Enqueue) {
	return func(m *orreryv1.Enqueue) { m.Priority = p }
}

// receiveIDs receives up to maxMessages of the test queue and returns their ids and More.
func (b *bundle) receiveIDs(maxMessages uint32) ([]string, bool) {
	b.t.Helper()
	res, err := ApplyReceive(b.store, b.lim, &orreryv1.Receive{Namespace: testNamespace, Queue: testQueue, Max: maxMessages}, b.now)
	if err != nil {
		b.t.Fatalf("receive: %v", err)
	}
	b.check()
	return ids(res.GetMessages()), res.GetMore()
}

// TestReceiveLeasesHigherPrioritiesFirstAndFIFOWithinOne: among messages visible at once, a
// receive leases the highest priority first and, within a priority, in enqueue order, whether
// it takes them in one receive or one at a time.
func TestReceiveLeasesHigherPrioritiesFirstAndFIFOWithinOne(t *testing.T) {
	want := []string{"d9", "b5", "c5", "f5", "a0", "e0"}
	for _, perReceive := range []uint32{uint32(len(want)), 1} {
		b := setup(t)
		for _, m := range []struct {
			id       string
			priority int32
		}{{"a0", 0}, {"b5", 5}, {"c5", 5}, {"d9", 9}, {"e0", 0}, {"f5", 5}} {
			b.enqueue(m.id, withPriority(m.priority))
		}
		var got []string
		for len(got) < len(want) {
			leased, _ := b.receiveIDs(perReceive)
			if len(leased) == 0 {
				break
			}
			got = append(got, leased...)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%d per receive: leased %v, want %v", perReceive, got, want)
		}
		if leased, more := b.receiveIDs(10); len(leased) != 0 || more {
			t.Fatalf("after all: %v more=%v, want nothing", leased, more)
		}
	}
}

// TestPriorityAgingBoundIsExact: a message of priority p visible at t is leased before one of
// priority q > p that became visible after t + (q-p) × step, and after one that became visible
// before; at exactly that instant the two tie and enqueue order decides (the earlier one, p).
func TestPriorityAgingBoundIsExact(t *testing.T) {
	for _, c := range []struct {
		name       string
		low, high  int32
		afterMicro int64 // when the high one becomes visible, after the low one, past the bound
		want       string
	}{
		{"one priority apart, 1 µs inside the bound", 0, 1, -1, "high"},
		{"one priority apart, at the bound", 0, 1, 0, "low"},
		{"one priority apart, 1 µs past the bound", 0, 1, 1, "low"},
		{"nine apart, 1 µs inside the bound", 0, 9, -1, "high"},
		{"nine apart, at the bound", 0, 9, 0, "low"},
		{"from 3 to 7, at the bound", 3, 7, 0, "low"},
		{"from 3 to 7, 1 µs inside", 3, 7, -1, "high"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t)
			step := b.lim.PriorityStepMicros
			bound := int64(c.high-c.low) * step
			b.enqueue("low", withPriority(c.low))
			b.advance(bound + c.afterMicro)
			b.enqueue("high", withPriority(c.high))
			if got, more := b.receiveIDs(1); !slices.Equal(got, []string{c.want}) || !more {
				t.Fatalf("leased %v (more %v), want [%s] and more", got, more, c.want)
			}
		})
	}
}

// TestStrictPriorityWhenTheStepIsZero: with a step of 0 a higher priority goes first however
// long a lower one has waited (strict priority may starve the lower one).
func TestStrictPriorityWhenTheStepIsZero(t *testing.T) {
	b := setup(t)
	b.lim.PriorityStepMicros = 0
	b.enqueue("old-low")
	b.advance(300 * input.Day)
	b.enqueue("new-high", withPriority(1))
	if got, _ := b.receiveIDs(1); !slices.Equal(got, []string{"new-high"}) {
		t.Fatalf("leased %v, want [new-high]", got)
	}
	b.lim.PriorityStepMicros = input.Day
	b.enqueue("newer-high", withPriority(1))
	if got, _ := b.receiveIDs(1); !slices.Equal(got, []string{"old-low"}) {
		t.Fatalf("with a step of a day: leased %v, want [old-low]", got)
	}
}

// TestADelayedHighPriorityMessageIsNotLeasedEarly: priority orders visible messages only; a
// delayed one waits for its visible time whatever its priority.
func TestADelayedHighPriorityMessageIsNotLeasedEarly(t *testing.T) {
	b := setup(t)
	b.enqueue("later", withPriority(9), func(m *orreryv1.Enqueue) { m.DelayMicros = 10 * input.Second })
	b.enqueue("now")
	if got, more := b.receiveIDs(5); !slices.Equal(got, []string{"now"}) || more {
		t.Fatalf("leased %v (more %v), want [now] and no more", got, more)
	}
	b.advance(10*input.Second - 1)
	if got, _ := b.receiveIDs(5); len(got) != 0 {
		t.Fatalf("1 µs before its visible time: leased %v", got)
	}
	b.advance(1)
	if got, _ := b.receiveIDs(5); !slices.Equal(got, []string{"later"}) {
		t.Fatalf("at its visible time: leased %v, want [later]", got)
	}
}

// TestPriorityMessagesLeaveNoBandBehind: a banded message keeps its band through a lease that
// ends (it is visible again there), a release, an ack and a cancel; its queue's band directory
// counts it (checkInvariants, after every step) and goes once the queue holds none.
func TestPriorityMessagesLeaveNoBandBehind(t *testing.T) {
	b := setup(t)
	lane := laneOf(testQueue, "k")
	b.enqueue("m1", withPriority(4))
	b.enqueue("m2", withPriority(4))
	b.enqueue("m3", withPriority(2))
	leased := b.receive(testQueue, 1)
	if len(leased) != 1 || leased[0].GetId() != "m1" || leased[0].GetPriority() != 4 {
		t.Fatalf("leased %v, want m1 of priority 4", leased)
	}
	b.advance(b.lim.DefaultLeaseMicros)
	// m1 is visible again since its lease end, m2 since its enqueue: m2 first.
	again := b.receive(testQueue, 2)
	if !slices.Equal(ids(again), []string{"m2", "m1"}) {
		t.Fatalf("after the lease ended: leased %v, want [m2 m1]", ids(again))
	}
	if _, _, err := ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: lane, Id: "m1", LeaseToken: again[1].GetLease().GetToken()}, b.now); err != nil {
		t.Fatal(err)
	}
	b.check()
	if _, err := ApplyRelease(b.store, b.lim, &orreryv1.Release{Lane: lane, Id: "m2", LeaseToken: again[0].GetLease().GetToken()}, b.now); err != nil {
		t.Fatal(err)
	}
	b.check()
	if _, _, err := ApplyCancel(b.store, "alice", &orreryv1.CancelMessage{Lane: lane, Id: "m2"}, b.now); err != nil {
		t.Fatal(err)
	}
	b.check()
	if _, _, err := ApplyCancel(b.store, "alice", &orreryv1.CancelMessage{Lane: lane, Id: "m3"}, b.now); err != nil {
		t.Fatal(err)
	}
	b.check()
	if _, found, _ := b.store.Get(keys.PriorityBandsKey(testNamespace, testQueue)); found {
		t.Fatal("the band directory outlived the queue's last banded message")
	}
}

// TestPriorityIsKeptThroughDeadLetterAndRedrive: a dead-lettered message keeps its priority in
// the dead-letter queue, whose receives order by it too, and a redrive brings it back with it.
func TestPriorityIsKeptThroughDeadLetterAndRedrive(t *testing.T) {
	b := setup(t)
	once := func(m *orreryv1.Enqueue) { m.MaxDeliveries = 1 }
	b.enqueue("low", once)
	b.enqueue("high", withPriority(6), once)
	b.receive(testQueue, 2)
	b.advance(b.lim.DefaultLeaseMicros)
	if got := b.receive(testQueue, 2); len(got) != 0 {
		t.Fatalf("leased %v, want both dead-lettered", ids(got))
	}
	dead := b.receive(deadQueue, 2)
	if !slices.Equal(ids(dead), []string{"high", "low"}) || dead[0].GetPriority() != 6 {
		t.Fatalf("dead-letter queue leased %v, want high (priority 6) then low", dead)
	}
	b.advance(b.lim.DefaultLeaseMicros)
	if _, err := ApplyRedrive(b.store, b.lim, &orreryv1.RedriveDeadLetters{Lane: laneOf(testQueue, "k")}, b.now); err != nil {
		t.Fatal(err)
	}
	b.check()
	back, found := b.message(laneOf(testQueue, "k"), "high")
	if !found || back.GetPriority() != 6 {
		t.Fatalf("redriven: %v, want priority 6", back)
	}
}

// TestReadersOfTheIndexSeeBands: a queue whose messages are all in priority bands has visible
// messages (VisibleAt), a next visible instant (NextVisibleAt, NextVisibleBefore: the band's
// earliest), is counted (Stats: visible, delayed, leased, the oldest visible) and is listed
// (ListQueueStats).
func TestReadersOfTheIndexSeeBands(t *testing.T) {
	b := setup(t)
	b.enqueue("delayed", withPriority(9), func(m *orreryv1.Enqueue) { m.DelayMicros = 5 * input.Second })
	if visible, err := VisibleAt(b.store, testNamespace, testQueue, b.now); err != nil || visible {
		t.Fatalf("VisibleAt with only a delayed message: %v, %v", visible, err)
	}
	if at, found, err := NextVisibleAt(b.store, testNamespace, testQueue); err != nil || !found || at != b.now+5*input.Second {
		t.Fatalf("NextVisibleAt: %d, %v, %v; want %d", at, found, err, b.now+5*input.Second)
	}
	if _, found, err := NextVisibleBefore(b.store, testNamespace, testQueue, b.now+5*input.Second); err != nil || found {
		t.Fatalf("NextVisibleBefore its instant: found %v, %v", found, err)
	}
	if at, found, err := NextVisibleBefore(b.store, testNamespace, testQueue, b.now+5*input.Second+1); err != nil || !found || at != b.now+5*input.Second {
		t.Fatalf("NextVisibleBefore after its instant: %d, %v, %v", at, found, err)
	}
	first := b.now
	b.advance(input.Second)
	b.enqueue("visible-3", withPriority(3))
	b.enqueue("visible-1", withPriority(1))
	b.enqueue("leased", withPriority(2))
	if visible, err := VisibleAt(b.store, testNamespace, testQueue, b.now); err != nil || !visible {
		t.Fatalf("VisibleAt: %v, %v", visible, err)
	}
	if at, found, err := NextVisibleBefore(b.store, testNamespace, testQueue, b.now+input.Day); err != nil || !found || at != first+input.Second {
		t.Fatalf("NextVisibleBefore: %d, %v, %v; want the earliest band entry %d", at, found, err, first+input.Second)
	}
	b.lim.PriorityStepMicros = 0
	if got := b.receive(testQueue, 1); len(got) != 1 || got[0].GetId() != "visible-3" {
		t.Fatalf("leased %v, want visible-3", ids(got))
	}
	stats, err := Stats(b.store, testNamespace, testQueue, "", b.now)
	if err != nil {
		t.Fatal(err)
	}
	if stats.GetVisible() != 2 || stats.GetDelayed() != 1 || stats.GetLeased() != 1 || !stats.GetComplete() || stats.GetOldestVisibleAtUnixMicros() != b.now {
		t.Fatalf("stats: %v; want 2 visible since %d, 1 delayed, 1 leased", stats, b.now)
	}
	lane, err := Stats(b.store, testNamespace, testQueue, "k", b.now)
	if err != nil || lane.GetVisible()+lane.GetDelayed()+lane.GetLeased() != 4 || !lane.GetComplete() {
		t.Fatalf("lane stats: %v, %v; want all 4 counted", lane, err)
	}
	queues, more, err := ListQueueStats(b.store, b.now, 10)
	if err != nil || more || len(queues) != 1 || queues[0].GetQueue() != testQueue || queues[0].GetVisible() != 2 {
		t.Fatalf("ListQueueStats: %v, more %v, %v; want the queue with 2 visible", queues, more, err)
	}
}

// TestReceiveBudgetsHoldAcrossBands: a receive that stops at its max reports More when a
// visible message of any band remains, and not when none does.
func TestReceiveBudgetsHoldAcrossBands(t *testing.T) {
	b := setup(t)
	b.enqueue("p0")
	b.enqueue("p7", withPriority(7))
	if got, more := b.receiveIDs(1); !slices.Equal(got, []string{"p7"}) || !more {
		t.Fatalf("leased %v (more %v), want [p7] and more (p0 in band 0)", got, more)
	}
	b.enqueue("p8", withPriority(8))
	if got, more := b.receiveIDs(1); !slices.Equal(got, []string{"p8"}) || !more {
		t.Fatalf("leased %v (more %v), want [p8] and more", got, more)
	}
	if got, more := b.receiveIDs(1); !slices.Equal(got, []string{"p0"}) || more {
		t.Fatalf("leased %v (more %v), want [p0] and no more", got, more)
	}
}

// TestBandsThroughVisibilityFloors: receives through kv.Floors keyed by band
// (keys.VisibilityBandPrefix, what a partition uses) lease exactly what receives of the plain
// store lease, while messages of every band are enqueued (some delayed), leased, acked and
// released, each command one transaction whose floors are promoted.
func TestBandsThroughVisibilityFloors(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		plain, floored := setup(t), setup(t)
		floors := kv.NewFloors(keys.VisibilityBandPrefix, 64)
		apply := func(fn func(v kv.View) error) {
			if err := fn(plain.store); err != nil {
				t.Fatal(err)
			}
			view := floors.View(floored.store)
			if err := fn(view); err != nil {
				t.Fatal(err)
			}
			view.Promote()
		}
		var leased []*orreryv1.QueueMessage
		for i := range rapid.IntRange(1, 40).Draw(t, "steps") {
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				m := &orreryv1.Enqueue{Lane: laneOf(testQueue, "k"), Id: idOf(i), Priority: int32(rapid.IntRange(0, 3).Draw(t, "priority")),
					DelayMicros: int64(rapid.IntRange(0, 2).Draw(t, "delay")) * input.Second}
				apply(func(v kv.View) error { _, err := ApplyEnqueue(v, plain.lim, m, plain.now, CompareOrReturn); return err })
			case 1:
				r := &orreryv1.Receive{Namespace: testNamespace, Queue: testQueue, Max: uint32(rapid.IntRange(1, 3).Draw(t, "max")), LeaseDurationMicros: input.Second}
				var want, got *orreryv1.ReceiveResult
				want, err := ApplyReceive(plain.store, plain.lim, r, plain.now)
				if err != nil {
					t.Fatal(err)
				}
				view := floors.View(floored.store)
				if got, err = ApplyReceive(view, floored.lim, r, floored.now); err != nil {
					t.Fatal(err)
				}
				view.Promote()
				if !slices.Equal(ids(got.GetMessages()), ids(want.GetMessages())) || got.GetMore() != want.GetMore() {
					t.Fatalf("through the floors: %v (more %v); plain: %v (more %v)", ids(got.GetMessages()), got.GetMore(), ids(want.GetMessages()), want.GetMore())
				}
				leased = append(leased, want.GetMessages()...)
			case 2:
				if len(leased) == 0 {
					continue
				}
				m := leased[0]
				leased = leased[1:]
				if rapid.Bool().Draw(t, "ack") {
					apply(func(v kv.View) error {
						_, _, err := ApplyAck(v, plain.lim, &orreryv1.Ack{Lane: m.GetLane(), Id: m.GetId(), LeaseToken: m.GetLease().GetToken()}, plain.now)
						if orrery.CodeOf(err) == orrery.CodeTokenInvalidated || orrery.CodeOf(err) == orrery.CodeNotFound {
							return nil
						}
						return err
					})
				} else {
					apply(func(v kv.View) error {
						_, err := ApplyRelease(v, plain.lim, &orreryv1.Release{Lane: m.GetLane(), Id: m.GetId(), LeaseToken: m.GetLease().GetToken()}, plain.now)
						if orrery.CodeOf(err) == orrery.CodeTokenInvalidated || orrery.CodeOf(err) == orrery.CodeNotFound {
							return nil
						}
						return err
					})
				}
			default:
				d := int64(rapid.IntRange(1, 3).Draw(t, "advance")) * input.Second / 2
				plain.advance(d)
				floored.advance(d)
			}
			floored.check()
		}
	})
}
