package chaos

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

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
