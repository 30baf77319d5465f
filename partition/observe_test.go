package partition

import (
	"sync"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/replication"
)

// The enqueue lateness observer hears each occurrence a due command enqueues, with its schedule
// and the entry's logged time minus the occurrence's nominal due instant, and nothing of ordinary enqueues; the
// round observer hears the rounds that persisted them; after ObserveEnqueueLateness(nil) the
// lateness observer hears nothing.
func TestObserversHearEnqueueLatenessAndRounds(t *testing.T) {
	h, fake := newFakeClockHarness(t, nil)
	var mu sync.Mutex
	var lateness []time.Duration
	var committed int
	h.cfg.Host.ObserveEnqueueLateness(func(partition int, schedule string, late time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if partition != 1 {
			t.Errorf("lateness reported for partition %d, want 1", partition)
		}
		if schedule != scheduleID {
			t.Errorf("lateness reported for schedule %q, want %q", schedule, scheduleID)
		}
		lateness = append(lateness, late)
	})
	h.cfg.Host.ObserveRounds(func(rt replication.RoundTiming) {
		mu.Lock()
		committed += rt.Committed
		mu.Unlock()
	})
	now := fake.Now()
	receipt(t, h.do(command("enqueue", 0, enqueue("plain"))))
	// Three hourly occurrences are due: 2.5 h, 1.5 h and 0.5 h ago.
	first := now.Add(-150 * time.Minute)
	if r := receipt(t, h.do(command("configure", 0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
		Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: scheduleID, Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{
			Every: &orreryv1.EverySpec{IntervalMicros: input.Hour, FirstDueAtUnixMicros: first.UnixMicro()}}}}}}}))); r.GetResults()[0].GetError() != nil {
		t.Fatalf("configure: %v", r)
	}
	rc := receipt(t, h.do(h.dueCommand("due-1")))
	enqueued := rc.GetResults()[0].GetSchedule().GetEnqueuedIds()
	if len(enqueued) != 3 {
		t.Fatalf("the due command enqueued %v, want 3 occurrences", enqueued)
	}
	logged := time.UnixMicro(rc.GetLoggedTimeUnixMicros())
	mu.Lock()
	got := append([]time.Duration(nil), lateness...)
	mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("observed lateness %v, want one per occurrence (3)", got)
	}
	for i, late := range got {
		want := logged.Sub(first.Add(time.Duration(i) * time.Hour))
		if late != want {
			t.Errorf("occurrence %d: lateness %v, want %v", i, late, want)
		}
	}
	// A round reports its timing once it has advanced, which can be after the command's reply.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		gotCommitted := committed
		mu.Unlock()
		if gotCommitted >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rounds committed %d entries, want at least the 3 commands", gotCommitted)
		}
		time.Sleep(time.Millisecond)
	}
	h.cfg.Host.ObserveEnqueueLateness(nil)
	fake.Advance(time.Hour)
	if rc := receipt(t, h.do(h.dueCommand("due-2"))); len(rc.GetResults()[0].GetSchedule().GetEnqueuedIds()) != 1 {
		t.Fatalf("the second due command: %v, want one occurrence", rc)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lateness) != 3 {
		t.Fatalf("observed %d lateness values after ObserveEnqueueLateness(nil), want still 3", len(lateness))
	}
}

// Host.Queued counts a parked long poll while it waits, and nothing once it is answered.
func TestQueuedCountsParkedCommands(t *testing.T) {
	h := newHarness(t, nil)
	if got := h.cfg.Host.Queued(1); got != 0 {
		t.Fatalf("queued before any command: %d", got)
	}
	answer := h.send(command("r1", 20*time.Second, receive(5)))
	h.waitParked(1)
	if got := h.cfg.Host.Queued(1); got != 1 {
		t.Fatalf("queued with a parked receive: %d, want 1", got)
	}
	receipt(t, h.do(command("c1", 0, enqueue("m1"))))
	replyOf(t, answer)
	deadline := time.Now().Add(10 * time.Second)
	for h.cfg.Host.Queued(1) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("queued after the receive was answered: %d, want 0", h.cfg.Host.Queued(1))
		}
		time.Sleep(time.Millisecond)
	}
	if got := h.cfg.Host.Queued(-1); got != 0 {
		t.Fatalf("queued of a partition not hosted: %d", got)
	}
}
