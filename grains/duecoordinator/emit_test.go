package duecoordinator

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/schedule"
)

// TestEmitsEveryDueOccurrenceOnceOnTime runs schedules in several partitions for three minutes
// and checks that each due occurrence was enqueued exactly once, at its due instant, with and
// without the partitions' next-due hints.
func TestEmitsEveryDueOccurrenceOnceOnTime(t *testing.T) {
	for _, hints := range []bool{true, false} {
		t.Run(fmt.Sprintf("hints=%v", hints), func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{partitions: 3, hints: hints})
			b.apply(0, configure(lane("a"), scheduleID(1), every(t0.Add(5*time.Second), 10*time.Second), 0))
			b.apply(1, configure(lane("b"), scheduleID(2), at(t0.Add(7*time.Second)), 0))
			b.apply(2, configure(lane("c"), scheduleID(3), every(t0.Add(30*time.Second), time.Minute), 0),
				configure(lane("c"), scheduleID(4), every(t0.Add(30*time.Second), 45*time.Second), 0))
			b.start(0, 1, 2)
			b.runUntil(t0.Add(3 * time.Minute))

			wants := []struct {
				partition int
				lane      string
				id        int
				count     int
			}{{0, "a", 1, 18}, {1, "b", 2, 1}, {2, "c", 3, 3}, {2, "c", 4, 4}}
			byLane := map[string][]*orreryv1.QueueMessage{}
			for _, w := range wants {
				if byLane[w.lane] == nil {
					byLane[w.lane] = b.messages(w.partition, lane(w.lane))
				}
				n := 0
				for _, m := range byLane[w.lane] {
					if m.GetOccurrence().GetScheduleId() == scheduleID(w.id) {
						n++
					}
				}
				if n != w.count {
					t.Errorf("schedule %d emitted %d occurrences, want %d", w.id, n, w.count)
				}
			}
			var all []*orreryv1.QueueMessage
			for _, msgs := range byLane {
				enqueuedAt(t, msgs)
				checkOnTime(t, msgs)
				all = append(all, msgs...)
			}
			// Time order across partitions: the twin saw the commands in due order.
			var order []int64
			for _, c := range b.twin.Calls() {
				if c.Kind == "command" {
					order = append(order, c.LoggedTimeMicros)
				}
			}
			if !slices.IsSorted(order) {
				t.Errorf("commands not in time order: %v", order)
			}
			if s := b.c.Stats(); s.StaleIgnored != 0 || s.Errors != 0 || s.RefsSkipped != 0 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

// TestNoScansBetweenDueInstants advances through an idle hour: only the safety rescans scan.
func TestNoScansBetweenDueInstants(t *testing.T) {
	t.Parallel()
	b := setup(t, options{partitions: 2, hints: true})
	b.apply(0, configure(lane("a"), scheduleID(1), every(t0.Add(time.Hour), time.Hour), 0))
	b.start(0, 1)
	if got := len(b.twin.Calls()); got != 2 {
		t.Fatalf("start made %d calls, want one scan per partition", got)
	}
	b.runUntil(t0.Add(59*time.Minute + 50*time.Second))
	// Safety rescans every 30 s per partition: 119 each up to 59:50.
	for p := range 2 {
		if got := b.calls("scan", p); got != 1+119 {
			t.Errorf("partition %d scanned %d times, want 120", p, got)
		}
		if got := b.calls("command", p); got != 0 {
			t.Errorf("partition %d got %d commands before anything was due", p, got)
		}
	}
	b.runUntil(t0.Add(time.Hour))
	if got := b.calls("command", 0); got != 1 {
		t.Fatalf("%d commands at the due instant, want 1", got)
	}
	checkOnTime(t, b.messages(0, lane("a")))

	quiet := setup(t, options{partitions: 2, hints: true, cfg: func(c *Config) { c.SafetyRescan = 24 * time.Hour }})
	quiet.apply(0, configure(lane("a"), scheduleID(1), every(t0.Add(time.Hour), time.Hour), 0))
	quiet.start(0, 1)
	quiet.runUntil(t0.Add(3*time.Hour + 30*time.Minute))
	// Without safety rescans: the first scan, then one scan and one command per due instant.
	if got, want := quiet.calls("scan", 0), 1+3; got != want {
		t.Errorf("partition 0 scanned %d times, want %d", got, want)
	}
	if got := quiet.calls("scan", 1); got != 1 {
		t.Errorf("idle partition 1 scanned %d times, want 1", got)
	}
	if got := len(quiet.messages(0, lane("a"))); got != 3 {
		t.Errorf("%d occurrences, want 3", got)
	}
}

// TestNotifyMovesTimerEarlier: a hint for an earlier instant re-arms the partition's timer; a
// later one does not delay it; a hint for a partition not owned is dropped.
func TestNotifyMovesTimerEarlier(t *testing.T) {
	t.Parallel()
	b := setup(t, options{partitions: 2, cfg: func(c *Config) { c.SafetyRescan = 24 * time.Hour }})
	b.apply(0, configure(lane("a"), scheduleID(1), at(t0.Add(50*time.Minute)), 0))
	b.start(0)
	if got := b.c.Stats().Partitions[0].TimerAt; !got.Equal(t0.Add(50 * time.Minute)) {
		t.Fatalf("timer at %v, want t0+50m", got)
	}
	// A commit the coordinator has not heard of (this twin sends no hints), then its hint.
	b.apply(0, configure(lane("a"), scheduleID(2), at(t0.Add(10*time.Second)), 0))
	b.c.Notify(&orreryv1.NextDueNotice{Partition: 0, NextDueAtUnixMicros: micros(t0.Add(10 * time.Second)), ActivationEpoch: 7})
	b.c.Notify(&orreryv1.NextDueNotice{Partition: 0, NextDueAtUnixMicros: micros(t0.Add(40 * time.Minute))})
	b.c.Notify(&orreryv1.NextDueNotice{Partition: 1, NextDueAtUnixMicros: micros(t0.Add(time.Second))})
	s := b.c.Stats()
	if len(s.Partitions) != 1 || !s.Partitions[0].TimerAt.Equal(t0.Add(10*time.Second)) || s.Partitions[0].ActivationEpoch != 7 {
		t.Fatalf("partitions %+v, want one timer at t0+10s", s.Partitions)
	}
	b.runUntil(t0.Add(time.Minute))
	msgs := b.messages(0, lane("a"))
	if len(msgs) != 1 || msgs[0].GetOccurrence().GetScheduleId() != scheduleID(2) {
		t.Fatalf("messages %v, want schedule 2's occurrence", msgs)
	}
	checkOnTime(t, msgs)
	if got := b.c.Stats().Partitions[0].TimerAt; !got.Equal(t0.Add(50 * time.Minute)) {
		t.Fatalf("after the emit the timer is at %v, want t0+50m", got)
	}
	b.c.Notify(&orreryv1.NextDueNotice{Partition: 0, NextDueAtUnixMicros: micros(t0.Add(55 * time.Minute))})
	if got := b.c.Stats().Partitions[0].TimerAt; !got.Equal(t0.Add(50 * time.Minute)) {
		t.Fatalf("a later hint moved the timer to %v", got)
	}
	if got := b.calls("scan", 1); got != 0 {
		t.Fatalf("partition 1 (not owned) scanned %d times", got)
	}
}

// TestBacklogIsServedRoundRobin: a schedule with 100 occurrences due at once is drained 32 per
// command over several rounds, and another partition's single ref goes in the second round.
func TestBacklogIsServedRoundRobin(t *testing.T) {
	t.Parallel()
	b := setup(t, options{partitions: 2, cfg: func(c *Config) { c.Workers = 1 }})
	b.apply(0, configure(lane("a"), scheduleID(1), every(t0.Add(-99*time.Second), time.Second), 0))
	b.apply(1, configure(lane("b"), scheduleID(2), at(t0), 0))
	b.start(0, 1)
	var seq []string
	for _, c := range b.twin.Calls() {
		seq = append(seq, fmt.Sprintf("%s/%d", c.Kind, c.Partition))
	}
	// A round that finds everything due does not wait for its command's receipt, so the
	// commands may go in another order than the rounds; the rounds themselves alternate.
	var scans []string
	for _, c := range seq {
		if strings.HasPrefix(c, "scan/") {
			scans = append(scans, c)
		}
	}
	if want := []string{"scan/0", "scan/1", "scan/0", "scan/0", "scan/0"}; !slices.Equal(scans, want) {
		t.Fatalf("scans %v (calls %v)\nwant  %v", scans, seq, want)
	}
	if all := strings.Join(seq, " "); strings.Count(all, "command/0") != 4 || strings.Count(all, "command/1") != 1 {
		t.Fatalf("calls %v: want 4 commands to partition 0 and 1 to partition 1", seq)
	}
	msgs := b.messages(0, lane("a"))
	ids := enqueuedAt(t, msgs)
	for ordinal := range uint64(100) {
		if _, ok := ids[schedule.OccurrenceID(scheduleID(1), 1, ordinal)]; !ok {
			t.Fatalf("ordinal %d missing", ordinal)
		}
	}
	if len(msgs) != 100 || len(b.messages(1, lane("b"))) != 1 {
		t.Fatalf("%d and %d messages, want 100 and 1", len(msgs), len(b.messages(1, lane("b"))))
	}
}

// TestClockSkewDoesNotHotLoop: the partitions' clock runs 10 s behind the coordinator's; the
// coordinator measures due instants from the partition's logged time and still emits each
// occurrence once, at the partition's due instant, without a scan storm.
func TestClockSkewDoesNotHotLoop(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{-10 * time.Second, 10 * time.Second} {
		b := setup(t, options{hints: true, skew: skew, cfg: func(c *Config) { c.SafetyRescan = time.Hour }})
		b.apply(0, configure(lane("a"), scheduleID(1), every(t0.Add(time.Minute), time.Minute), 0))
		b.start(0)
		b.runUntil(t0.Add(5*time.Minute + 30*time.Second))
		msgs := b.messages(0, lane("a"))
		checkOnTime(t, msgs)
		if len(msgs) < 4 || len(msgs) > 5 {
			t.Errorf("skew %v: %d occurrences, want 4 or 5", skew, len(msgs))
		}
		if got := b.calls("scan", 0); got > 2*len(msgs)+2 {
			t.Errorf("skew %v: %d scans for %d occurrences", skew, got, len(msgs))
		}
	}
}
