package queue

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

func (b *bundle) stats(key string) *orreryv1.QueueStats {
	b.t.Helper()
	st, err := Stats(b.store, testNamespace, testQueue, key, b.now)
	if err != nil {
		b.t.Fatalf("stats: %v", err)
	}
	return st
}

func TestStatsCountsByState(t *testing.T) {
	b := setup(t)
	b.deadLetters("dead1", "dead2")
	b.enqueue("old")
	b.advance(input.Second)
	b.enqueue("new")
	b.enqueue("later", delay(input.Minute))
	b.enqueue("leased")
	other := &orreryv1.Enqueue{Lane: laneOf(testQueue, "other"), Id: "x"}
	if _, err := ApplyEnqueue(b.store, b.lim, other, b.now, CompareOrReturn); err != nil {
		t.Fatal(err)
	}
	oldestAt := b.now - input.Second
	// Lease the two oldest (old, new), then give old back: it is visible again.
	got := b.receive(testQueue, 2)
	if _, err := ApplyRelease(b.store, b.lim, &orreryv1.Release{Lane: got[0].GetLane(), Id: got[0].GetId(), LeaseToken: got[0].GetLease().GetToken()}, b.now); err != nil {
		t.Fatal(err)
	}
	b.advance(input.Second)
	lane := b.stats("k")
	want := &orreryv1.QueueStats{Visible: 2, Leased: 1, Delayed: 1, DeadLettered: 2, OldestVisibleAtUnixMicros: b.now - input.Second,
		LoggedTimeUnixMicros: b.now, Complete: true, LaneMessages: 4}
	want.LaneBytes = lane.GetLaneBytes()
	if !proto.Equal(lane, want) {
		t.Fatalf("lane stats = %v, want %v", lane, want)
	}
	if n, size := b.counters(laneOf(testQueue, "k")); lane.GetLaneBytes() != size || n != 4 {
		t.Fatalf("lane bytes %d, counters hold %d", lane.GetLaneBytes(), size)
	}
	// "leased" and the other lane's x are visible; old was released at its enqueue + 1 s.
	whole := b.stats("")
	want = &orreryv1.QueueStats{Visible: 3, Leased: 1, Delayed: 1, DeadLettered: 2, OldestVisibleAtUnixMicros: oldestAt + input.Second,
		LoggedTimeUnixMicros: b.now, Complete: true}
	if !proto.Equal(whole, want) {
		t.Fatalf("queue stats = %v, want %v", whole, want)
	}
	// An ended lease counts as visible, from its end.
	b.advance(b.lim.DefaultLeaseMicros)
	if st := b.stats("k"); st.GetVisible() != 3 || st.GetLeased() != 0 {
		t.Fatalf("after the lease ended: %v", st)
	}
}

func TestStatsOfAnEmptyLane(t *testing.T) {
	b := setup(t)
	want := &orreryv1.QueueStats{LoggedTimeUnixMicros: b.now, Complete: true}
	if st := b.stats("k"); !proto.Equal(st, want) {
		t.Fatalf("stats = %v", st)
	}
}

// TestStatsBudget checks that a queue deeper than the budget answers with lower bounds and
// says so, and that one lane's scan ends as soon as it has found its messages.
func TestStatsBudget(t *testing.T) {
	b := setup(t)
	b.enqueue("first")
	for i := range StatsScanBudget {
		if _, err := ApplyEnqueue(b.store, b.lim, &orreryv1.Enqueue{Lane: laneOf(testQueue, "other"), Id: idOf(i)}, b.now, CompareOrReturn); err != nil {
			t.Fatal(err)
		}
	}
	b.enqueue("last")
	if st := b.stats(""); st.GetComplete() || st.GetVisible() != StatsScanBudget {
		t.Fatalf("whole queue over budget: %v", st)
	}
	st := b.stats("k")
	if st.GetComplete() || st.GetVisible() != 1 || st.GetLaneMessages() != 2 {
		t.Fatalf("lane behind the budget: %v", st)
	}
	b.receive(testQueue, 1) // leases first: its entry moves to its lease end, past the budget
	if st := b.stats("k"); st.GetVisible()+st.GetLeased() != 0 || st.GetComplete() {
		t.Fatalf("after leasing first: %v", st)
	}
}

func TestStatsValidation(t *testing.T) {
	b := setup(t)
	_, err := Stats(b.store, testNamespace, deadQueue, "", b.now)
	wantCode(t, err, orrery.CodeValidation, "queue")
	_, err = Stats(b.store, "", testQueue, "", b.now)
	wantCode(t, err, orrery.CodeValidation, "namespace")
}

// TestListQueueStats: every queue holding messages is listed once, a queue holding only dead
// letters included, with the counts Stats gives it; maxQueues leaves the rest out and says so.
func TestListQueueStats(t *testing.T) {
	b := setup(t)
	b.deadLetters("dead") // jobs holds only a dead letter now
	for _, queue := range []string{"alpha", "beta"} {
		if _, err := ApplyEnqueue(b.store, b.lim, &orreryv1.Enqueue{Lane: laneOf(queue, "k"), Id: "x"}, b.now, CompareOrReturn); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ApplyEnqueue(b.store, b.lim, &orreryv1.Enqueue{Lane: &orreryv1.Lane{Namespace: "other", Queue: "alpha", Key: "k"}, Id: "y", DelayMicros: input.Minute}, b.now, CompareOrReturn); err != nil {
		t.Fatal(err)
	}
	queues, more, err := ListQueueStats(b.store, b.now, 10)
	if err != nil || more {
		t.Fatalf("list: more %v, err %v", more, err)
	}
	got := map[string]*orreryv1.QueueStats{}
	for _, q := range queues {
		name := q.GetNamespace() + "/" + q.GetQueue()
		if got[name] != nil {
			t.Fatalf("%s listed twice", name)
		}
		got[name] = q
		want, err := Stats(b.store, q.GetNamespace(), q.GetQueue(), "", b.now)
		if err != nil {
			t.Fatal(err)
		}
		want.Namespace, want.Queue = q.GetNamespace(), q.GetQueue()
		if !proto.Equal(q, want) {
			t.Fatalf("%s listed as %v, Stats gives %v", name, q, want)
		}
	}
	if len(got) != 4 || got["ns/jobs"].GetDeadLettered() != 1 || got["ns/alpha"].GetVisible() != 1 || got["other/alpha"].GetDelayed() != 1 {
		t.Fatalf("listed %v", queues)
	}
	if first, more, _ := ListQueueStats(b.store, b.now, 2); len(first) != 2 || !more {
		t.Fatalf("list of 2: %d queues, more %v", len(first), more)
	}
}
