package queue

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

func TestNextVisibleAt(t *testing.T) {
	b := setup(t)
	if _, found, err := NextVisibleAt(b.store, testNamespace, testQueue); err != nil || found {
		t.Fatalf("empty queue: found %v, err %v", found, err)
	}
	b.enqueue("late", delay(10*input.Second))
	b.enqueue("soon", delay(3*input.Second))
	b.enqueue("elsewhere", func(m *orreryv1.Enqueue) { m.Lane = laneOf("mail", "k") })
	for _, tc := range []struct {
		name  string
		step  func()
		want  int64
		found bool
	}{
		{"earliest delay", func() {}, startMicros + 3*input.Second, true},
		{"already visible stays reported", func() { b.advance(5 * input.Second) }, startMicros + 3*input.Second, true},
		{"leased moves to the lease end", func() { b.receive(testQueue, 1) }, startMicros + 10*input.Second, true},
		{"both leased", func() { b.advance(5 * input.Second); b.receive(testQueue, 1) }, startMicros + 5*input.Second + b.lim.DefaultLeaseMicros, true},
	} {
		tc.step()
		at, found, err := NextVisibleAt(b.store, testNamespace, testQueue)
		if err != nil || found != tc.found || at != tc.want {
			t.Fatalf("%s: got %d %v %v, want %d %v", tc.name, at, found, err, tc.want, tc.found)
		}
	}
	if at, found, _ := NextVisibleAt(b.store, testNamespace, "mail"); !found || at != startMicros {
		t.Fatalf("other queue: %d %v", at, found)
	}
}

// TestNextVisibleBeforeReadsOnlyUpToItsLimit: the first entry before the limit, and nothing
// when the first entry is at or after it.
func TestNextVisibleBeforeReadsOnlyUpToItsLimit(t *testing.T) {
	b := setup(t)
	b.enqueue("late", delay(10*input.Second))
	b.enqueue("soon", delay(3*input.Second))
	for _, tc := range []struct {
		limit int64
		want  int64
		found bool
	}{
		{startMicros + 3*input.Second, 0, false}, // the limit is exclusive
		{startMicros + 3*input.Second + 1, startMicros + 3*input.Second, true},
		{startMicros + 60*input.Second, startMicros + 3*input.Second, true},
		{startMicros, 0, false},
	} {
		at, found, err := NextVisibleBefore(b.store, testNamespace, testQueue, tc.limit)
		if err != nil || found != tc.found || at != tc.want {
			t.Errorf("limit %d: got %d %v %v, want %d %v", tc.limit, at, found, err, tc.want, tc.found)
		}
	}
}

func TestListLane(t *testing.T) {
	b := setup(t)
	for i := range 5 {
		b.enqueue(idOf(i))
	}
	// Neighbouring lanes whose key or queue share a prefix are not listed.
	b.enqueue("x", func(m *orreryv1.Enqueue) { m.Lane = laneOf(testQueue, "kk") })
	b.enqueue("y", func(m *orreryv1.Enqueue) { m.Lane = laneOf(testQueue+"s", "k") })
	b.receive(testQueue, 1) // listing includes leased messages
	lane := laneOf(testQueue, "k")
	for _, tc := range []struct {
		pageSize int
		want     [][]string
	}{
		{2, [][]string{{"m0000", "m0001"}, {"m0002", "m0003"}, {"m0004"}}},
		{5, [][]string{{"m0000", "m0001", "m0002", "m0003", "m0004"}}},
		{10, [][]string{{"m0000", "m0001", "m0002", "m0003", "m0004"}}},
		{1, [][]string{{"m0000"}, {"m0001"}, {"m0002"}, {"m0003"}, {"m0004"}}},
	} {
		var pages [][]string
		after := ""
		for {
			msgs, next, err := ListLane(b.store, lane, after, tc.pageSize, 0)
			if err != nil {
				t.Fatal(err)
			}
			pages = append(pages, ids(msgs))
			if next == "" {
				break
			}
			after = next
		}
		if !slices.EqualFunc(pages, tc.want, slices.Equal) {
			t.Fatalf("page size %d: pages %v, want %v", tc.pageSize, pages, tc.want)
		}
	}
	msgs, _, _ := ListLane(b.store, lane, "", 1, 0)
	if msgs[0].GetLease() == nil {
		t.Fatal("listing dropped the lease")
	}
	if msgs, next, err := ListLane(b.store, laneOf(testQueue, "empty"), "", 3, 0); err != nil || len(msgs) != 0 || next != "" {
		t.Fatalf("empty lane: %v %q %v", msgs, next, err)
	}
	_, _, err := ListLane(b.store, lane, "", 0, 0)
	wantCode(t, err, orrery.CodeValidation, "max_messages")
	_, _, err = ListLane(b.store, nil, "", 1, 0)
	wantCode(t, err, orrery.CodeValidation, "lane")
}

func TestRemove(t *testing.T) {
	b := setup(t)
	b.enqueue("a")
	b.enqueue("b")
	msg, _ := b.message(laneOf(testQueue, "k"), "a")
	stale := &orreryv1.QueueMessage{Id: "a", Lane: laneOf(testQueue, "k")} // Remove trusts the store, not the copy
	if err := Remove(b.store, stale, b.now, false); err != nil {
		t.Fatal(err)
	}
	b.check()
	if ts, found := b.tombstone(msg.GetLane(), "a"); !found || ts.GetExpired() {
		t.Fatalf("tombstone %v %v", ts, found)
	}
	before := b.store.Clone()
	wantCode(t, Remove(b.store, msg, b.now, true), orrery.CodeNotFound, "id")
	if !b.store.Equal(before) {
		t.Fatal("removing an absent message wrote")
	}
}

// TestListLaneStopsAtItsByteBudget: a page of large messages ends before the byte budget is
// passed (the first message always goes, however large), with a continuation, and the pages
// together list every message once.
func TestListLaneStopsAtItsByteBudget(t *testing.T) {
	b := setup(t)
	big := `"` + strings.Repeat("x", 10_000) + `"`
	for i := range 7 {
		b.enqueue(idOf(i), func(m *orreryv1.Enqueue) { m.PayloadJson = big })
	}
	lane := laneOf(testQueue, "k")
	var pages [][]string
	after := ""
	for {
		msgs, next, err := ListLane(b.store, lane, after, 1000, 25_000)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, m := range msgs {
			size += proto.Size(m)
		}
		if len(msgs) > 1 && size > 25_000 {
			t.Fatalf("a page of %d messages holds %d bytes, over its 25,000-byte budget", len(msgs), size)
		}
		pages = append(pages, ids(msgs))
		if next == "" {
			break
		}
		after = next
	}
	want := [][]string{{"m0000", "m0001"}, {"m0002", "m0003"}, {"m0004", "m0005"}, {"m0006"}}
	if !slices.EqualFunc(pages, want, slices.Equal) {
		t.Fatalf("pages %v, want %v", pages, want)
	}
	if msgs, _, _ := ListLane(b.store, lane, "", 1000, 100); len(msgs) != 1 {
		t.Fatalf("a budget below one message gives %d messages, want the first alone", len(msgs))
	}
}
