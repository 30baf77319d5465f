package duecoordinator

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/grains/duecoordinator/coordinatortest"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
)

// t0 is where every fake clock starts: 2026-01-01T00:00:00Z.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// settleTimeout bounds how long (real time) the workers may take to go idle. A coordinator
// that hot-loops never goes idle, so the tests catch it here.
const settleTimeout = 20 * time.Second

// options tune setup.
type options struct {
	partitions int
	limits     input.Limits
	// hints makes the twin tell the coordinator each partition's earliest due instant after
	// every applied command, as a partition grain does.
	hints bool
	// skew is added to the fake clock to give the partitions' logged time.
	skew time.Duration
	cfg  func(*Config)
}

// bench is what a test gets: a fake clock, a twin of the partitions and a coordinator on them.
type bench struct {
	t     *testing.T
	clock *clock.Fake
	twin  *coordinatortest.Twin
	c     *Coordinator
	cmds  atomic.Uint64
}

func setup(t *testing.T, o options) *bench {
	t.Helper()
	if o.partitions == 0 {
		o.partitions = 1
	}
	if o.limits == (input.Limits{}) {
		o.limits = input.DefaultLimits()
	}
	fake := clock.NewFake(t0)
	var partitionClock clock.Clock = fake
	if o.skew != 0 {
		partitionClock = skewed{fake, o.skew}
	}
	b := &bench{t: t, clock: fake, twin: coordinatortest.New(partitionClock, o.limits, o.partitions)}
	if err := b.twin.Grant(grants.Everything("alice")); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Partitions: b.twin, Clock: fake, CommandIDPrefix: "silo-1", Logger: slog.New(slog.DiscardHandler)}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	b.c = New(cfg)
	if o.hints {
		b.twin.SetNotify(b.c.Notify)
	}
	t.Cleanup(b.c.Stop)
	return b
}

// skewed is a clock running offset ahead of (or, negative, behind) another.
type skewed struct {
	clock.Clock
	offset time.Duration
}

func (s skewed) Now() time.Time { return s.Clock.Now().Add(s.offset) }

// start starts the coordinator owning partitions and lets the first scans finish.
func (b *bench) start(partitions ...int) {
	b.t.Helper()
	b.c.Start(context.Background())
	b.c.SetOwned(partitions)
	b.settle()
}

// settle waits until no partition is queued or being served.
func (b *bench) settle() {
	b.t.Helper()
	select {
	case <-b.c.idle():
	case <-time.After(settleTimeout):
		b.t.Fatalf("coordinator still busy after %v (hot loop?); stats %+v", settleTimeout, b.c.Stats())
	}
}

// runUntil moves the fake clock to until, stopping at every timer on the way and letting the
// workers settle after each, so the run is deterministic.
func (b *bench) runUntil(until time.Time) {
	b.t.Helper()
	for {
		b.settle()
		next, ok := b.clock.Next()
		if !ok || next.After(until) {
			break
		}
		b.clock.AdvanceTo(next)
	}
	b.clock.AdvanceTo(until)
	b.settle()
}

// apply runs mutations on a partition through the twin (setup and racing writers) and fails
// the test on any error.
func (b *bench) apply(partition int, mutations ...*orreryv1.Mutation) *orreryv1.Receipt {
	b.t.Helper()
	id := fmt.Sprintf("setup-%d", b.cmds.Add(1))
	r, err := b.twin.Apply(partition, "alice", &orreryv1.Batch{CommandId: id, Mutations: mutations})
	if err != nil {
		b.t.Fatalf("apply: %v", err)
	}
	if r.GetError() != nil {
		b.t.Fatalf("apply: batch error %v", r.GetError())
	}
	for i, res := range r.GetResults() {
		if res.GetError() != nil {
			b.t.Fatalf("apply: mutation %d: %v", i, res.GetError())
		}
	}
	return r
}

// messages lists a lane's live messages.
func (b *bench) messages(partition int, lane *orreryv1.Lane) []*orreryv1.QueueMessage {
	b.t.Helper()
	var all []*orreryv1.QueueMessage
	err := b.twin.View(partition, func(v kv.View) error {
		after := ""
		for {
			page, next, err := queue.ListLane(v, lane, after, 1000, 0)
			if err != nil {
				return err
			}
			all = append(all, page...)
			if next == "" {
				return nil
			}
			after = next
		}
	})
	if err != nil {
		b.t.Fatalf("list lane: %v", err)
	}
	return all
}

// calls counts the twin's calls of a kind ("scan" or "command") to a partition.
func (b *bench) calls(kind string, partition int) int {
	n := 0
	for _, c := range b.twin.Calls() {
		if c.Kind == kind && c.Partition == partition {
			n++
		}
	}
	return n
}

// scheduleID is the n-th test schedule or saga id.
func scheduleID(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012x", n) }

func micros(t time.Time) int64 { return t.UnixMicro() }

func lane(key string) *orreryv1.Lane {
	return &orreryv1.Lane{Namespace: "acme", Queue: "jobs", Key: key}
}

// configure is a ConfigureSchedule creating id in l with spec and a TTL (zero: none).
func configure(l *orreryv1.Lane, id string, spec *orreryv1.ScheduleSpec, ttl time.Duration) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
		Definition: &orreryv1.ScheduleDefinition{
			Lane: l, ScheduleId: id, Spec: spec,
			Template: &orreryv1.MessageTemplate{PayloadJson: `{"id":"` + id + `"}`, TimeToLiveMicros: ttl.Microseconds()},
		},
	}}}
}

func every(first time.Time, interval time.Duration) *orreryv1.ScheduleSpec {
	return &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{FirstDueAtUnixMicros: micros(first), IntervalMicros: interval.Microseconds()}}}
}

func at(instant time.Time) *orreryv1.ScheduleSpec {
	return &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_At{At: &orreryv1.AtSpec{DueAtUnixMicros: micros(instant)}}}
}

// enqueuedAt returns each message's id → logged enqueue time, failing on a duplicate id.
func enqueuedAt(t *testing.T, msgs []*orreryv1.QueueMessage) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	for _, m := range msgs {
		if _, dup := out[m.GetId()]; dup {
			t.Fatalf("duplicate message id %s", m.GetId())
		}
		out[m.GetId()] = time.UnixMicro(m.GetEnqueuedAtUnixMicros())
	}
	return out
}

// checkOnTime fails unless every occurrence was enqueued within a millisecond of its nominal
// due instant (the fake world has no lateness; the twin's logged time adds at most a few µs).
func checkOnTime(t *testing.T, msgs []*orreryv1.QueueMessage) {
	t.Helper()
	for _, m := range msgs {
		nominal := m.GetOccurrence().GetNominalDueAtUnixMicros()
		if late := m.GetEnqueuedAtUnixMicros() - nominal; late < 0 || late > 1000 {
			t.Errorf("message %s due at %v enqueued at %v", m.GetId(), time.UnixMicro(nominal).UTC(), time.UnixMicro(m.GetEnqueuedAtUnixMicros()).UTC())
		}
	}
}
