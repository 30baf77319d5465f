package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// historyProblems checks what a worker was delivered against what the schedules emitted
// (next: each schedule lane's next ordinal once cancelled, at cancelledAt) and what the test
// enqueued (message id → lane key):
//   - no message was enqueued twice: the deliveries of one id share one enqueue time and no
//     delivery count repeats (a repeat is a second enqueue, or a committed receive lost);
//   - no schedule has a gap: ordinals 0..next-1 each delivered under one id, each at its
//     nominal instant (first + ordinal × 1 s);
//   - no schedule stalled: its last emitted instant is within 10 s of its cancel;
//   - every enqueued message was delivered.
//
// Redeliveries of one enqueue (a lost ack or receive reply) are counted in summary, not
// problems. Problems come sorted.
func historyProblems(schedules []tickSchedule, deliveries []delivery, enqueued map[string]string, next map[string]uint64, cancelledAt map[string]time.Time) (problems []string, summary string) {
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	byID := map[string][]delivery{}
	for _, d := range deliveries {
		byID[d.id] = append(byID[d.id], d)
	}
	redelivered := 0
	for id, ds := range byID {
		counts := map[uint32]bool{}
		for _, d := range ds {
			if counts[d.count] {
				fail("message %s (lane %s) delivered twice with delivery count %d: enqueued twice or a committed receive lost", id, d.key, d.count)
			}
			counts[d.count] = true
			if !d.enqueuedAt.Equal(ds[0].enqueuedAt) {
				fail("message %s (lane %s) enqueued twice: at %v and at %v", id, d.key, ds[0].enqueuedAt, d.enqueuedAt)
			}
		}
		if len(ds) > 1 {
			redelivered++
		}
	}
	total := 0
	for _, s := range schedules {
		key := s.lane.GetKey()
		ordinals := map[uint64]string{} // ordinal → id
		for id, ds := range byID {
			d := ds[0]
			if d.key != key || d.origin != client.OriginOccurrence {
				continue
			}
			if other, ok := ordinals[d.ordinal]; ok {
				fail("schedule %s: ordinal %d delivered under two ids, %s and %s", s.id, d.ordinal, min(id, other), max(id, other))
			}
			ordinals[d.ordinal] = id
			if want := s.first.Add(time.Duration(d.ordinal) * time.Second); !d.nominal.Equal(want) {
				fail("schedule %s: ordinal %d has nominal instant %v, want %v", s.id, d.ordinal, d.nominal, want)
			}
		}
		var missing []uint64
		for o := range next[key] {
			if _, ok := ordinals[o]; !ok {
				missing = append(missing, o)
			}
		}
		if len(missing) > 0 {
			fail("schedule %s (partition %d): gap, ordinals %v of 0..%d never delivered", s.id, s.partition, missing, next[key]-1)
		}
		for o := range ordinals {
			if o >= next[key] {
				fail("schedule %s: ordinal %d delivered, beyond the %d it emitted", s.id, o, next[key])
			}
		}
		last := s.first.Add(time.Duration(next[key]-1) * time.Second)
		if lag := cancelledAt[key].Sub(last); next[key] == 0 || lag > 10*time.Second {
			fail("schedule %s (partition %d): its last emitted instant %v is %v before its cancel: it stopped emitting", s.id, s.partition, last, lag)
		}
		total += len(ordinals)
	}
	var lost []string
	for id, key := range enqueued {
		if len(byID[id]) == 0 {
			lost = append(lost, id+" (lane "+key+")")
		}
	}
	if len(lost) > 0 {
		sort.Strings(lost)
		fail("%d enqueued messages never delivered: %v", len(lost), lost)
	}
	sort.Strings(problems)
	summary = fmt.Sprintf("%d schedules emitted %d occurrences, %d messages enqueued; %d ids redelivered (lost acks or receive replies)",
		len(schedules), total, len(enqueued), redelivered)
	return problems, summary
}

// TestHistoryProblemsFindsDuplicatesGapsStallsAndLosses: the history check passes a clean
// history with a redelivery, and names each kind of fault put into it.
func TestHistoryProblemsFindsDuplicatesGapsStallsAndLosses(t *testing.T) {
	first := time.Unix(1_700_000_000, 0)
	s := tickSchedule{lane: &orreryv1.Lane{Namespace: "n", Queue: "q", Key: "s"}, id: "sched", partition: 3, first: first}
	occurrence := func(ordinal uint64, count uint32) delivery {
		at := first.Add(time.Duration(ordinal) * time.Second)
		return delivery{id: fmt.Sprintf("occ-%d", ordinal), key: "s", partition: 3, origin: client.OriginOccurrence,
			ordinal: ordinal, nominal: at, enqueuedAt: at.Add(time.Millisecond), count: count}
	}
	clean := func() []delivery {
		var ds []delivery
		for o := range uint64(5) {
			ds = append(ds, occurrence(o, 1))
		}
		ds = append(ds, occurrence(2, 2)) // a redelivery
		return append(ds, delivery{id: "m1", key: "m", origin: client.OriginEnqueue, enqueuedAt: first, count: 1})
	}
	enqueued := map[string]string{"m1": "m"}
	next := map[string]uint64{"s": 5}
	cancelled := map[string]time.Time{"s": first.Add(5 * time.Second)}
	if problems, summary := historyProblems([]tickSchedule{s}, clean(), enqueued, next, cancelled); len(problems) > 0 {
		t.Fatalf("a clean history has problems: %v", problems)
	} else {
		t.Log(summary)
	}
	for _, tc := range []struct {
		name  string
		fault func(ds []delivery) []delivery
		next  uint64
		at    time.Duration // cancel, after first
		want  string
	}{
		{"enqueued twice", func(ds []delivery) []delivery {
			d := occurrence(1, 1)
			d.enqueuedAt = d.enqueuedAt.Add(3 * time.Second)
			return append(ds, d)
		}, 5, 5 * time.Second, "enqueued twice"},
		{"a delivery count repeated", func(ds []delivery) []delivery { return append(ds, occurrence(4, 1)) }, 5, 5 * time.Second, "delivery count 1"},
		{"an ordinal under two ids", func(ds []delivery) []delivery {
			d := occurrence(3, 1)
			d.id = "other"
			return append(ds, d)
		}, 5, 5 * time.Second, "under two ids"},
		{"a gap", func(ds []delivery) []delivery { return slices.Delete(ds, 1, 2) }, 5, 5 * time.Second, "gap, ordinals [1]"},
		{"a wrong instant", func(ds []delivery) []delivery {
			ds[0].nominal = ds[0].nominal.Add(time.Second)
			return ds
		}, 5, 5 * time.Second, "nominal instant"},
		{"beyond what it emitted", func(ds []delivery) []delivery { return append(ds, occurrence(5, 1)) }, 5, 5 * time.Second, "beyond"},
		{"a stall", func(ds []delivery) []delivery { return ds }, 5, 30 * time.Second, "stopped emitting"},
		{"an enqueued message lost", func(ds []delivery) []delivery { return ds[:len(ds)-1] }, 5, 5 * time.Second, "never delivered: [m1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems, _ := historyProblems([]tickSchedule{s}, tc.fault(clean()), enqueued,
				map[string]uint64{"s": tc.next}, map[string]time.Time{"s": first.Add(tc.at)})
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Fatalf("problems %q do not name %q", problems, tc.want)
			}
		})
	}
}
