package duecoordinator

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/duecoordinator/coordinatortest"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/retained"
	"github.com/orreryhq/orrery/grains/saga"
	"github.com/orreryhq/orrery/grains/schedule"
)

// bulkSchedules gives partition n one-shot schedules due at dueAt: the first through the
// command path, the rest as copies of its record and due entry written straight into the
// store, with the id patched in the encoded bytes (ids have one length, so the encoding stays
// valid). The command path takes tens of seconds under the race detector for 100,000.
func (b *bench) bulkSchedules(partition, n int, l *orreryv1.Lane, dueAt time.Time) {
	b.t.Helper()
	b.apply(partition, configure(l, scheduleID(0), at(dueAt), 0))
	err := b.twin.View(partition, func(v kv.View) error {
		tmpl, found, err := schedule.Load(v, l, scheduleID(0))
		if err != nil || !found {
			return fmt.Errorf("template schedule: found=%v err=%v", found, err)
		}
		counters, err := retained.Load(v)
		if err != nil {
			return err
		}
		recBytes, err := record.Marshal(tmpl)
		if err != nil {
			return err
		}
		refBytes, err := record.Marshal(&orreryv1.DueRef{Kind: orreryv1.DueKind_DUE_KIND_SCHEDULE, Lane: l, Id: scheduleID(0), Token: tmpl.GetGeneration(), DueAtUnixMicros: tmpl.GetNextDueAtUnixMicros()})
		if err != nil {
			return err
		}
		old := []byte(scheduleID(0))
		for i := 1; i < n; i++ {
			id := scheduleID(i)
			if err := v.Set(keys.ScheduleKey(l, id), bytes.ReplaceAll(recBytes, old, []byte(id))); err != nil {
				return err
			}
			dueKey := keys.DueKey(tmpl.GetNextDueAtUnixMicros(), orreryv1.DueKind_DUE_KIND_SCHEDULE, l, id)
			if err := v.Set(dueKey, bytes.ReplaceAll(refBytes, old, []byte(id))); err != nil {
				return err
			}
			counters.Records++
			counters.Bytes += uint64(len(recBytes))
		}
		_, err = record.Store(v, keys.PartitionCounters, counters)
		return err
	})
	if err != nil {
		b.t.Fatal(err)
	}
}

// TestFairness: partition 0 has 100,000 due refs, partition 1 one; partition 1's round comes
// right after partition 0's first budget (256 refs, sent as one due command whose receipt no
// round waits for), and dispatches its ref.
func TestFairness(t *testing.T) {
	t.Parallel()
	b := setup(t, options{partitions: 2, cfg: func(c *Config) { c.Workers = 1 }})
	b.bulkSchedules(0, 100_000, lane("backlog"), t0.Add(-time.Minute))
	b.apply(1, configure(lane("single"), scheduleID(1), at(t0.Add(-time.Second)), 0))
	dispatched := []chan struct{}{make(chan struct{}), make(chan struct{})}
	var once [2]sync.Once
	b.twin.SetHooks(coordinatortest.Hooks{AfterCommand: func(partition int, _ *orreryv1.CommandRequest, _ *orreryv1.CommandReply) error {
		once[partition].Do(func() { close(dispatched[partition]) })
		return nil
	}})
	b.c.Start(context.Background())
	b.c.SetOwned([]int{0, 1})
	for partition, ch := range dispatched {
		select {
		case <-ch:
		case <-time.After(60 * time.Second):
			t.Fatalf("partition %d's refs were not dispatched", partition)
		}
	}
	b.c.Stop()
	// Partition 1 is scanned right after partition 0's first round, before its second, and
	// that first round sent its budget (256 refs) as one command.
	var scans []int
	sent := 0
	for _, c := range b.twin.Calls() {
		switch {
		case c.Kind == "scan":
			scans = append(scans, c.Partition)
		case c.Kind == "command" && c.Partition == 0 && len(scans) == 1:
			if len(c.Mutations) != DefaultRefsPerRound {
				t.Fatalf("a command of %d refs, want the round's %d", len(c.Mutations), DefaultRefsPerRound)
			}
			sent += len(c.Mutations)
		}
	}
	if len(scans) < 2 || scans[0] != 0 || scans[1] != 1 {
		t.Fatalf("scans of partitions %v: want partition 1 right after partition 0's first", scans)
	}
	if sent > DefaultRefsPerRound {
		t.Fatalf("partition 0's first round sent %d refs, want at most its budget %d", sent, DefaultRefsPerRound)
	}
	if msgs := b.messages(1, lane("single")); len(msgs) != 1 {
		t.Fatalf("%d messages for partition 1, want 1", len(msgs))
	}
	backlog := b.messages(0, lane("backlog"))
	if len(enqueuedAt(t, backlog)) == 0 {
		t.Fatal("partition 0 emitted nothing")
	}
}

// TestSetOwnedRemovingAPartitionStopsItsTimers: a partition no longer owned keeps no timer,
// takes no hint and is not scanned; owning it again scans it at once.
func TestSetOwnedRemovingAPartitionStopsItsTimers(t *testing.T) {
	t.Parallel()
	b := setup(t, options{partitions: 2, hints: true})
	b.apply(0, configure(lane("a"), scheduleID(1), at(t0.Add(time.Minute)), 0))
	b.apply(1, configure(lane("b"), scheduleID(2), at(t0.Add(time.Minute)), 0))
	b.start(0, 1)
	if got := b.clock.Pending(); got != 2 {
		t.Fatalf("%d timers, want one per partition", got)
	}
	b.c.SetOwned([]int{0})
	if got := b.clock.Pending(); got != 1 {
		t.Fatalf("%d timers after dropping partition 1, want 1", got)
	}
	b.c.Notify(&orreryv1.NextDueNotice{Partition: 1, NextDueAtUnixMicros: micros(t0)})
	if got := b.clock.Pending(); got != 1 {
		t.Fatalf("a hint for a dropped partition armed a timer")
	}
	b.runUntil(t0.Add(2 * time.Minute))
	if got := b.calls("scan", 1); got != 1 {
		t.Fatalf("dropped partition scanned %d times, want only the first scan", got)
	}
	if got := len(b.messages(1, lane("b"))); got != 0 {
		t.Fatalf("dropped partition emitted %d", got)
	}
	if got := len(b.messages(0, lane("a"))); got != 1 {
		t.Fatalf("kept partition emitted %d, want 1", got)
	}
	if s := b.c.Stats(); len(s.Partitions) != 1 || s.Partitions[0].Partition != 0 {
		t.Fatalf("partitions %+v", s.Partitions)
	}
	b.c.SetOwned([]int{1, 0})
	b.settle()
	if got := len(b.messages(1, lane("b"))); got != 1 {
		t.Fatalf("re-owned partition emitted %d, want its overdue occurrence", got)
	}
}

// TestStopIsPrompt: Stop cancels a call in progress, stops every timer and returns.
func TestStopIsPrompt(t *testing.T) {
	t.Parallel()
	b := setup(t, options{partitions: 2, cfg: func(c *Config) { c.RequestTimeout = time.Hour }})
	entered := make(chan struct{})
	var once sync.Once
	b.twin.SetHooks(coordinatortest.Hooks{BeforeScan: func(ctx context.Context, partition int, _ *orreryv1.ScanDueRequest) error {
		if partition != 0 {
			return nil
		}
		once.Do(func() { close(entered) })
		<-ctx.Done()
		return ctx.Err()
	}})
	b.c.Start(context.Background())
	b.c.SetOwned([]int{0, 1})
	<-entered
	stopped := make(chan struct{})
	go func() {
		b.c.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return")
	}
	if got := b.clock.Pending(); got != 0 {
		t.Fatalf("%d timers left after Stop", got)
	}
	b.c.Stop() // idempotent

	never := New(Config{Partitions: b.twin, Clock: b.clock})
	never.Stop() // never started

	ctx, cancel := context.WithCancel(context.Background())
	c := New(Config{Partitions: b.twin, Clock: b.clock, Workers: 3})
	c.Start(ctx)
	cancel()
	done := make(chan struct{})
	go func() {
		c.Stop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop after the start context ended did not return")
	}
}

// TestSagaExpiry: a Waiting saga's timeout is enqueued at its deadline and the saga ends
// TimedOut; a saga completed between the scan and the dispatch is a stale revision, ignored.
func TestSagaExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t, options{hints: true})
	sagaLane := func(key string) *orreryv1.Lane { return &orreryv1.Lane{Namespace: "acme", Queue: "sagas", Key: key} }
	timeoutLane := func(key string) *orreryv1.Lane { return &orreryv1.Lane{Namespace: "acme", Queue: "timeouts", Key: key} }
	for i, key := range []string{"order-1", "order-2"} {
		b.apply(0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_CompareExchangeSaga{CompareExchangeSaga: &orreryv1.CompareExchangeSaga{
			Lane: sagaLane(key), SagaId: scheduleID(i + 1), Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING, StateJson: `{}`,
			DeadlineUnixMicros: micros(t0.Add(5 * time.Second)),
			Timeout:            &orreryv1.SagaTimeout{Queue: "timeouts", Template: &orreryv1.MessageTemplate{PayloadJson: `{"timeout":true}`}},
		}}})
	}
	var once sync.Once
	b.twin.SetHooks(coordinatortest.Hooks{BeforeCommand: func(_ context.Context, partition int, _ *orreryv1.CommandRequest) error {
		once.Do(func() {
			b.apply(partition, &orreryv1.Mutation{Kind: &orreryv1.Mutation_CompareExchangeSaga{CompareExchangeSaga: &orreryv1.CompareExchangeSaga{
				Lane: sagaLane("order-2"), SagaId: scheduleID(2), ExpectedRevision: 1, Phase: orreryv1.SagaPhase_SAGA_PHASE_COMPLETED, StateJson: `{"paid":true}`,
			}}})
		})
		return nil
	}})
	b.start(0)
	b.runUntil(t0.Add(time.Minute))

	msgs := b.messages(0, timeoutLane("order-1"))
	if len(msgs) != 1 || msgs[0].GetId() != saga.TimeoutMessageID(scheduleID(1), 1) || msgs[0].GetEnqueuedAtUnixMicros()-micros(t0.Add(5*time.Second)) > 1000 {
		t.Fatalf("timeout messages %v, want one at t0+5s", msgs)
	}
	if got := len(b.messages(0, timeoutLane("order-2"))); got != 0 {
		t.Fatalf("the completed saga timed out (%d messages)", got)
	}
	var phase orreryv1.SagaPhase
	_ = b.twin.View(0, func(v kv.View) error {
		rec, _, err := saga.Load(v, sagaLane("order-1"), scheduleID(1))
		phase = rec.GetPhase()
		return err
	})
	if phase != orreryv1.SagaPhase_SAGA_PHASE_TIMED_OUT {
		t.Fatalf("saga 1 is %v, want TIMED_OUT", phase)
	}
	if s := b.c.Stats(); s.StaleIgnored != 1 || s.Errors != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestOversizedCommandIsResentOneRefPerCommand: when a partition refuses a multi-ref command
// as a whole (Validation: more than one transaction can hold, e.g. sagas with large timeout
// payloads), the coordinator resends the refs one per command instead of retrying the same
// command forever.
func TestOversizedCommandIsResentOneRefPerCommand(t *testing.T) {
	t.Parallel()
	b := setup(t, options{hints: true})
	sagaLane := func(key string) *orreryv1.Lane { return &orreryv1.Lane{Namespace: "acme", Queue: "sagas", Key: key} }
	keys := []string{"big-1", "big-2", "big-3"}
	for i, key := range keys {
		b.apply(0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_CompareExchangeSaga{CompareExchangeSaga: &orreryv1.CompareExchangeSaga{
			Lane: sagaLane(key), SagaId: scheduleID(i + 1), Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING, StateJson: `{}`,
			DeadlineUnixMicros: micros(t0.Add(5 * time.Second)),
			Timeout:            &orreryv1.SagaTimeout{Queue: "timeouts", Template: &orreryv1.MessageTemplate{PayloadJson: `{"timeout":true}`}},
		}}})
	}
	b.twin.SetHooks(coordinatortest.Hooks{BeforeCommand: func(_ context.Context, _ int, req *orreryv1.CommandRequest) error {
		if len(req.GetBatch().GetMutations()) > 1 {
			return orrery.FieldErrorf(orrery.CodeValidation, "batch", "command writes more than the partition's transaction limit; split it")
		}
		return nil
	}})
	b.start(0)
	b.runUntil(t0.Add(time.Minute))
	for _, key := range keys {
		if got := len(b.messages(0, &orreryv1.Lane{Namespace: "acme", Queue: "timeouts", Key: key})); got != 1 {
			t.Fatalf("saga %s: %d timeout messages, want 1", key, got)
		}
	}
}
