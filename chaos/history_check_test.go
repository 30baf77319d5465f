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

// checkFixture is a hand-made clean history of a run: two Every-1s schedules (one paused for
// ordinals 3 and 4, which its ledger records PAUSED), two timers (one due too close to the end
// to be required), an enqueued message, a redelivery after a dropped lease.
type checkFixture struct {
	first time.Time
	h     history
}

func newCheckFixture() *checkFixture {
	first := time.Unix(1_700_000_000, 0)
	f := &checkFixture{first: first}
	lane := func(key string) *orreryv1.Lane { return &orreryv1.Lane{Namespace: "n", Queue: "q", Key: key} }
	f.h = history{
		schedules: []tickSchedule{
			{lane: lane("s1"), id: "sched-1", partition: 1, first: first},
			{lane: lane("s2"), id: "sched-2", partition: 2, first: first},
		},
		next:        map[string]uint64{"s1": 6, "s2": 6},
		cancelledAt: map[string]time.Time{"s1": first.Add(6 * time.Second), "s2": first.Add(6 * time.Second)},
		paused:      map[string]bool{"s2": true},
		excused:     map[string]map[uint64]bool{"s2": {3: true, 4: true}},
		timers: []timer{
			{lane: lane("t1"), id: "timer-1", partition: 3, due: first.Add(2 * time.Second)},
			{lane: lane("t2"), id: "timer-2", partition: 3, due: first.Add(59 * time.Second)}, // within the recovery bound of the end
		},
		enqueued:      map[string]string{"m1": "m"},
		end:           first.Add(70 * time.Second),
		recoveryBound: 20 * time.Second,
	}
	for o := range uint64(6) {
		f.h.deliveries = append(f.h.deliveries, f.occurrence("s1", o, 1, 40*time.Millisecond))
		if o != 3 && o != 4 {
			f.h.deliveries = append(f.h.deliveries, f.occurrence("s2", o, 1, 10*time.Millisecond))
		}
	}
	dropped := f.occurrence("s1", 2, 1, 40*time.Millisecond)
	dropped.dropped = true
	f.h.deliveries[4] = dropped
	f.h.deliveries = append(f.h.deliveries, f.occurrence("s1", 2, 2, 40*time.Millisecond)) // after the lease expired
	f.h.deliveries = append(f.h.deliveries,
		delivery{id: "timer-occ-1", key: "t1", partition: 3, origin: client.OriginOccurrence, nominal: first.Add(2 * time.Second),
			enqueuedAt: first.Add(2*time.Second + 300*time.Millisecond), count: 1, handledAt: first.Add(2*time.Second + 310*time.Millisecond)},
		delivery{id: "m1", key: "m", partition: 4, origin: client.OriginEnqueue, enqueuedAt: first, count: 1, handledAt: first.Add(time.Millisecond)})
	return f
}

// occurrence is the delivery of ordinal of the schedule in lane key, enqueued late after its
// nominal instant and received a millisecond later.
func (f *checkFixture) occurrence(key string, ordinal uint64, count uint32, late time.Duration) delivery {
	at := f.first.Add(time.Duration(ordinal) * time.Second)
	return delivery{id: fmt.Sprintf("occ-%s-%d", key, ordinal), key: key, partition: 1, origin: client.OriginOccurrence,
		ordinal: ordinal, nominal: at, enqueuedAt: at.Add(late), count: count, handledAt: at.Add(late + time.Millisecond)}
}

// TestCheckHistoryPassesACleanHistory: a history with a redelivery after an expired lease,
// ordinals passed while paused and a timer due too late to be required has no violation; the
// lateness is the largest of a never-paused schedule's occurrences and the timers'.
func TestCheckHistoryPassesACleanHistory(t *testing.T) {
	v := checkHistory(newCheckFixture().h)
	if v.violations() > 0 || len(v.problems) > 0 {
		t.Fatalf("a clean history has %d violations: %q", v.violations(), v.problems)
	}
	if v.occurrences != 11 || v.redelivered != 1 {
		t.Errorf("occurrences %d, redelivered %d; want 11 and 1", v.occurrences, v.redelivered)
	}
	if v.maxLateness != 300*time.Millisecond {
		t.Errorf("max lateness %v, want 300ms (the timer's)", v.maxLateness)
	}
}

// TestCheckHistoryFindsEachViolation: each fault put into the clean history is counted under
// its kind and named.
func TestCheckHistoryFindsEachViolation(t *testing.T) {
	runFaultCases(t, newCheckFixture, []faultCase{
		{"duplicate id: enqueued twice", func(f *checkFixture) {
			d := f.occurrence("s1", 1, 2, 40*time.Millisecond)
			d.enqueuedAt = d.enqueuedAt.Add(3 * time.Second)
			f.h.deliveries = append(f.h.deliveries, d)
		}, func(v verdict) int { return v.duplicates }, "enqueued twice"},
		{"duplicate id: a delivery count repeated", func(f *checkFixture) {
			f.h.deliveries = append(f.h.deliveries, f.occurrence("s1", 5, 1, 40*time.Millisecond))
		}, func(v verdict) int { return v.duplicates }, "delivered twice with delivery count 1"},
		{"duplicate: an ordinal under two ids", func(f *checkFixture) {
			d := f.occurrence("s1", 3, 1, 40*time.Millisecond)
			d.id = "another"
			f.h.deliveries = append(f.h.deliveries, d)
		}, func(v verdict) int { return v.duplicates }, "under two ids"},
		{"duplicate: a timer fired twice", func(f *checkFixture) {
			d := f.h.deliveries[len(f.h.deliveries)-2]
			d.id = "timer-occ-again"
			f.h.deliveries = append(f.h.deliveries, d)
		}, func(v verdict) int { return v.duplicates }, "delivered under 2 ids"},
		{"gap", func(f *checkFixture) {
			f.h.deliveries = slices.DeleteFunc(f.h.deliveries, func(d delivery) bool { return d.id == "occ-s1-1" })
		}, func(v verdict) int { return v.gaps }, "gap, ordinals [1]"},
		{"gap: an ordinal passed while paused that the ledger does not excuse", func(f *checkFixture) {
			delete(f.h.excused["s2"], 4)
		}, func(v verdict) int { return v.gaps }, "gap, ordinals [4]"},
		{"gap: beyond what it emitted", func(f *checkFixture) {
			f.h.deliveries = append(f.h.deliveries, f.occurrence("s1", 6, 1, 40*time.Millisecond))
		}, func(v verdict) int { return v.gaps }, "beyond"},
		{"early: enqueued before its nominal instant", func(f *checkFixture) {
			d := f.occurrence("s1", 6, 1, -200*time.Millisecond)
			f.h.deliveries = append(f.h.deliveries, d)
			f.h.next["s1"] = 7
			f.h.cancelledAt["s1"] = f.first.Add(7 * time.Second)
		}, func(v verdict) int { return v.early }, "enqueued at"},
		{"early: received before its nominal instant", func(f *checkFixture) {
			d := f.occurrence("s1", 6, 1, 0)
			d.handledAt = d.nominal.Add(-time.Millisecond)
			f.h.deliveries = append(f.h.deliveries, d)
			f.h.next["s1"] = 7
			f.h.cancelledAt["s1"] = f.first.Add(7 * time.Second)
		}, func(v verdict) int { return v.early }, "received at"},
		{"early: a timer", func(f *checkFixture) {
			for i, d := range f.h.deliveries {
				if d.id == "timer-occ-1" {
					f.h.deliveries[i].enqueuedAt = d.nominal.Add(-time.Second)
				}
			}
		}, func(v verdict) int { return v.early }, "timer-occ-1 (lane t1) enqueued at"},
		{"lost timer", func(f *checkFixture) {
			f.h.deliveries = slices.DeleteFunc(f.h.deliveries, func(d delivery) bool { return d.id == "timer-occ-1" })
		}, func(v verdict) int { return v.lost }, "timer timer-1 (lane t1, partition 3) due at"},
		{"lost timer: due before the recovery bound", func(f *checkFixture) {
			f.h.end = f.h.end.Add(time.Minute)
		}, func(v verdict) int { return v.lost }, "timer timer-2"},
		{"lost enqueued message", func(f *checkFixture) {
			f.h.deliveries = slices.DeleteFunc(f.h.deliveries, func(d delivery) bool { return d.id == "m1" })
		}, func(v verdict) int { return v.lost }, "1 enqueued messages never delivered: [m1"},
		{"lost: a schedule that stopped emitting", func(f *checkFixture) {
			f.h.cancelledAt["s1"] = f.first.Add(time.Minute)
		}, func(v verdict) int { return v.lost }, "stopped emitting"},
	})
}

// TestCheckHistoryLeavesEarlyCancelsUnstalled: a schedule cancelled while faults went on, whose
// last emitted instant is long before its cancel (a fault held its emission back), is no stall;
// its ordinals 0..next-1 are still checked.
func TestCheckHistoryLeavesEarlyCancelsUnstalled(t *testing.T) {
	f := newCheckFixture()
	f.h.cancelledAt["s1"] = f.first.Add(time.Minute)
	f.h.cancelledEarly = map[string]bool{"s1": true}
	if v := checkHistory(f.h); v.violations() > 0 {
		t.Fatalf("an early cancel is taken for a stall: %q", v.problems)
	}
	f.h.deliveries = slices.DeleteFunc(f.h.deliveries, func(d delivery) bool { return d.id == "occ-s1-0" })
	if v := checkHistory(f.h); v.gaps != 1 {
		t.Fatalf("a gap of an early-cancelled schedule: gaps %d, problems %q", v.gaps, v.problems)
	}
}

// TestCheckHistoryJudgesReceiptsByTheClockAhead: a silo whose clock ran ahead stamped an
// occurrence at its nominal instant on its own clock, so a consumer on the real clock received
// it minutes early: no violation while the receipt is within clockAhead of the nominal instant,
// a violation beyond it; an enqueue before the nominal instant on the logging silo's clock is a
// violation whatever clockAhead is.
func TestCheckHistoryJudgesReceiptsByTheClockAhead(t *testing.T) {
	received := func(clockAhead, early time.Duration, enqueuedLate time.Duration) verdict {
		f := newCheckFixture()
		d := f.occurrence("s1", 6, 1, enqueuedLate)
		d.handledAt = d.nominal.Add(-early)
		f.h.deliveries = append(f.h.deliveries, d)
		f.h.next["s1"] = 7
		f.h.cancelledAt["s1"] = f.first.Add(7 * time.Second)
		f.h.clockAhead = clockAhead
		return checkHistory(f.h)
	}
	if v := received(7*time.Minute, 5*time.Minute, 0); v.early != 0 {
		t.Errorf("received 5m early with a clock 7m ahead: %q", v.problems)
	}
	if v := received(3*time.Minute, 5*time.Minute, 0); v.early != 1 || !strings.Contains(strings.Join(v.problems, "\n"), "received at") {
		t.Errorf("received 5m early with a clock only 3m ahead: early %d, %q", v.early, v.problems)
	}
	if v := received(0, 5*time.Minute, 0); v.early != 1 {
		t.Errorf("received 5m early with no clock ahead: early %d, %q", v.early, v.problems)
	}
	if v := received(7*time.Minute, 0, -time.Second); v.early != 1 || !strings.Contains(strings.Join(v.problems, "\n"), "enqueued at") {
		t.Errorf("enqueued before its nominal instant with a clock 7m ahead: early %d, %q", v.early, v.problems)
	}
}

// TestCheckHistoryChecksCronInstantsByTheCompiledRules: a cron schedule due every 2 s in two
// Europe/Berlin hours passes with its ordinals at those instants; an occurrence where UTC's
// rules for the zone would put it (an hour later in winter), an ordinal never delivered, one
// under two ids, and instants out of order are each a violation.
func TestCheckHistoryChecksCronInstantsByTheCompiledRules(t *testing.T) {
	zone, err := cronZoneLocation()
	if err != nil {
		t.Fatal(err)
	}
	first := time.Date(2023, 11, 14, 10, 0, 0, 0, zone)
	lane := &orreryv1.Lane{Namespace: "n", Queue: "q", Key: "c1"}
	build := func(instants ...time.Time) history {
		f := newCheckFixture()
		f.h.crons = []tickSchedule{{lane: lane, id: "cron-1", partition: 5}}
		f.h.cronHours = cronHours{zone: zone, first: 10}
		f.h.next["c1"] = uint64(len(instants))
		for o, at := range instants {
			f.h.deliveries = append(f.h.deliveries, delivery{id: fmt.Sprintf("cron-occ-%d", o), key: "c1", partition: 5, origin: client.OriginOccurrence,
				ordinal: uint64(o), nominal: at, enqueuedAt: at.Add(20 * time.Millisecond), count: 1, handledAt: at.Add(30 * time.Millisecond)})
		}
		return f.h
	}
	clean := []time.Time{first, first.Add(2 * time.Second), first.Add(4 * time.Second), first.Add(3*time.Hour + 6*time.Second)}
	if v := checkHistory(build(clean...)); v.violations() != 0 {
		t.Fatalf("a clean cron history: %q", v.problems)
	}
	utcRules := time.Date(2023, 11, 14, 10, 0, 6, 0, time.UTC) // 11:00:06 in Berlin
	for _, tc := range []struct {
		name  string
		h     func() history
		count func(verdict) int
		says  string
	}{
		{"an instant of other rules", func() history { return build(first, first.Add(2*time.Second), utcRules) },
			func(v verdict) int { return v.gaps }, "not an instant"},
		{"an odd second", func() history { return build(first, first.Add(3*time.Second)) },
			func(v verdict) int { return v.gaps }, "not an instant"},
		{"out of order", func() history { return build(first.Add(2*time.Second), first) },
			func(v verdict) int { return v.gaps }, "not after"},
		{"a gap", func() history {
			h := build(clean...)
			h.deliveries = slices.DeleteFunc(h.deliveries, func(d delivery) bool { return d.id == "cron-occ-1" })
			return h
		}, func(v verdict) int { return v.gaps }, "gap"},
		{"one ordinal under two ids", func() history {
			h := build(clean...)
			d := h.deliveries[len(h.deliveries)-1]
			d.id = "cron-occ-again"
			h.deliveries = append(h.deliveries, d)
			return h
		}, func(v verdict) int { return v.duplicates }, "two ids"},
	} {
		v := checkHistory(tc.h())
		if tc.count(v) == 0 || !strings.Contains(strings.Join(v.problems, "\n"), tc.says) {
			t.Errorf("%s: not found (%q)", tc.name, v.problems)
		}
	}
}

// TestLatenessIsNotTheClockAhead: an occurrence a silo ahead by 5 minutes logged at its
// nominal instant on its own clock, received 50 ms after it on the real clock, was 50 ms late,
// not 5 minutes.
func TestLatenessIsNotTheClockAhead(t *testing.T) {
	f := newCheckFixture()
	d := f.occurrence("s1", 6, 1, 5*time.Minute)
	d.handledAt = d.nominal.Add(50 * time.Millisecond)
	f.h.deliveries = append(f.h.deliveries, d)
	f.h.next["s1"] = 7
	f.h.cancelledAt["s1"] = f.first.Add(7 * time.Second)
	v := checkHistory(f.h)
	if v.maxLateness != 300*time.Millisecond { // the fixture's timer, the latest of the others
		t.Errorf("max lateness %v, want the timer's 300ms: a logged time 5m ahead counted as lateness", v.maxLateness)
	}
}

// replacedFixture is the clean fixture with schedule s1 replaced twice: generation 1 emitted
// ordinals 0..2 from first, generation 2 ordinals 0..1 from first+10 s, generation 3 (the
// current one) ordinals 0..3 from first+20 s; and two triggers, one delivered.
func replacedFixture() *checkFixture {
	f := newCheckFixture()
	f.h.deliveries = slices.DeleteFunc(f.h.deliveries, func(d delivery) bool { return d.key == "s1" })
	spans := []generationSpan{{1, f.first, 3}, {2, f.first.Add(10 * time.Second), 2}, {3, f.first.Add(20 * time.Second), 4}}
	f.h.generations = map[string][]generationSpan{"s1": spans}
	for _, sp := range spans {
		for o := range sp.next {
			at := sp.first.Add(time.Duration(o) * time.Second)
			f.h.deliveries = append(f.h.deliveries, delivery{id: fmt.Sprintf("occ-s1-g%d-%d", sp.generation, o), key: "s1", partition: 1,
				origin: client.OriginOccurrence, generation: sp.generation, ordinal: o, nominal: at, enqueuedAt: at.Add(10 * time.Millisecond),
				count: 1, handledAt: at.Add(11 * time.Millisecond)})
		}
	}
	manual := f.first.Add(15 * time.Second)
	f.h.deliveries = append(f.h.deliveries, delivery{id: "manual-1", key: "s1", partition: 1, origin: client.OriginOccurrence,
		generation: 2, manual: true, nominal: manual, enqueuedAt: manual, count: 1, handledAt: manual.Add(time.Millisecond)})
	f.h.enqueued["manual-1"] = "s1"
	f.h.triggers = map[string]int{"s1": 2}
	f.h.next["s1"] = 4
	f.h.cancelledAt["s1"] = f.first.Add(24 * time.Second)
	return f
}

// TestCheckHistoryChecksEveryGenerationOfAReplacedSchedule: a schedule replaced twice, read
// back with its three generations, passes when each generation's ordinals 0..next-1 are
// delivered at its own instants and the manual occurrences are no more than the triggers; a
// gap in a replaced generation, an ordinal beyond one's emission, a generation it never had, an
// instant of another generation, and more manual occurrences than triggers are violations.
func TestCheckHistoryChecksEveryGenerationOfAReplacedSchedule(t *testing.T) {
	if v := checkHistory(replacedFixture().h); v.violations() > 0 {
		t.Fatalf("a clean history of a replaced schedule has violations: %q", v.problems)
	}
	runFaultCases(t, replacedFixture, []faultCase{
		{"gap in a replaced generation", func(f *checkFixture) {
			f.h.deliveries = slices.DeleteFunc(f.h.deliveries, func(d delivery) bool { return d.id == "occ-s1-g2-1" })
		}, func(v verdict) int { return v.gaps }, "gap, ordinals [1] of generation 2's 0..1 never delivered"},
		{"beyond a replaced generation's emission", func(f *checkFixture) {
			f.h.generations["s1"][0].next = 2
		}, func(v verdict) int { return v.gaps }, "ordinal 2 of generation 1 delivered, beyond the 2 it emitted"},
		{"a generation it never had", func(f *checkFixture) {
			f.h.generations["s1"] = f.h.generations["s1"][1:]
		}, func(v verdict) int { return v.gaps }, "in generation 1, which it never had"},
		{"an instant of another generation", func(f *checkFixture) {
			f.h.generations["s1"][2].first = f.first.Add(21 * time.Second)
		}, func(v verdict) int { return v.gaps }, "ordinal 0 of generation 3 has nominal instant"},
		{"one ordinal of one generation under two ids", func(f *checkFixture) {
			d := f.h.deliveries[len(f.h.deliveries)-2]
			d.id = "occ-s1-again"
			f.h.deliveries = append(f.h.deliveries, d)
		}, func(v verdict) int { return v.duplicates }, "ordinal 3 of generation 3 delivered under two ids"},
		{"more manual occurrences than triggers", func(f *checkFixture) {
			f.h.triggers["s1"] = 0
		}, func(v verdict) int { return v.duplicates }, "1 manual occurrences delivered for 0 triggers"},
		{"a triggered occurrence lost", func(f *checkFixture) {
			f.h.deliveries = slices.DeleteFunc(f.h.deliveries, func(d delivery) bool { return d.id == "manual-1" })
		}, func(v verdict) int { return v.lost }, "manual-1"},
		{"the current generation stopped emitting", func(f *checkFixture) {
			f.h.cancelledAt["s1"] = f.first.Add(time.Minute)
		}, func(v verdict) int { return v.lost }, "stopped emitting"},
	})
	// Replaced just before its cancel: the current generation emitted nothing yet, no stall.
	f := replacedFixture()
	f.h.generations["s1"] = append(f.h.generations["s1"], generationSpan{4, f.first.Add(26 * time.Second), 0})
	f.h.cancelledAt["s1"] = f.first.Add(25 * time.Second)
	if v := checkHistory(f.h); v.violations() > 0 {
		t.Fatalf("a generation replaced just before the cancel is taken for a stall: %q", v.problems)
	}
}

// faultCase is a violation put into a clean fixture: its name, the fault, the count of the
// verdict it must raise and what a problem must say.
type faultCase struct {
	name  string
	fault func(f *checkFixture)
	count func(verdict) int
	want  string
}

// runFaultCases checks each case on a fresh fixture: the violation is counted under its kind
// and a problem names it.
func runFaultCases(t *testing.T, fixture func() *checkFixture, cases []faultCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fixture()
			tc.fault(f)
			v := checkHistory(f.h)
			if tc.count(v) == 0 {
				t.Errorf("not counted under its kind: duplicates %d, gaps %d, lost %d, early %d", v.duplicates, v.gaps, v.lost, v.early)
			}
			if !slices.ContainsFunc(v.problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("problems %q do not name %q", v.problems, tc.want)
			}
		})
	}
}
