package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/client/clienttest"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/route"
)

const (
	testNamespace = "ns"
	testQueue     = "jobs"
)

// testPrincipal is who the tests' clients act as; setup grants it every capability.
const testPrincipal = "tester"

// bundle is one test's twin transport, its clock and a client.
type bundle struct {
	t     *testing.T
	tr    *clienttest.Transport
	c     *client.Client
	clock *testClock
}

// setup returns a client over a fresh twin with partitions partitions, retrying fast. The twin
// runs on b.clock; closing the client (at the end of the test) closes it.
func setup(t *testing.T, partitions int, opts ...clienttest.Option) *bundle {
	t.Helper()
	clock := &testClock{}
	opts = append([]clienttest.Option{clienttest.WithClock(clock.Now), clienttest.WithGrants(grants.Everything(testPrincipal))}, opts...)
	tr := clienttest.New(partitions, opts...)
	c := client.New(tr, client.Options{
		Principal: testPrincipal,
		Logger:    slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Retry:     client.RetryPolicy{Initial: time.Millisecond, Max: 5 * time.Millisecond, Jitter: func() float64 { return 0.5 }},
	})
	t.Cleanup(func() { _ = c.Close() })
	return &bundle{t: t, tr: tr, c: c, clock: clock}
}

// testClock is the twin's clock in these tests: real time, plus what the test advanced it by.
type testClock struct{ offset atomic.Int64 }

// Now is the clock's time.
func (c *testClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// Advance moves the clock d ahead, at once.
func (c *testClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// emitDue does what a due coordinator does at the twin's clock (Transport.EmitDue) and
// requires that it enqueued and expired want in all.
func (b *bundle) emitDue(want int) {
	b.t.Helper()
	if n, err := b.tr.EmitDue(context.Background()); err != nil || n != want {
		b.t.Fatalf("EmitDue: %d, %v; want %d", n, err, want)
	}
}

// testWriter sends log lines to the test's log (shown when the test fails or with -v).
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func lane(queue, key string) *orreryv1.Lane {
	return &orreryv1.Lane{Namespace: testNamespace, Queue: queue, Key: key}
}

// partitionOf is where the twin keeps lane.
func (b *bundle) partitionOf(l *orreryv1.Lane) int { return route.Partition(l, b.tr.Partitions()) }

// commandCalls returns the recorded command calls.
func (b *bundle) commandCalls() []clienttest.Call {
	var out []clienttest.Call
	for _, c := range b.tr.Calls() {
		if c.Kind == clienttest.CallCommand {
			out = append(out, c)
		}
	}
	return out
}

// lastCall returns the last recorded command call.
func (b *bundle) lastCall() clienttest.Call {
	b.t.Helper()
	calls := b.commandCalls()
	if len(calls) == 0 {
		b.t.Fatal("no command call recorded")
	}
	return calls[len(calls)-1]
}

// enqueue enqueues a message with id in lane and requires success.
func (b *bundle) enqueue(l *orreryv1.Lane, id string) {
	b.t.Helper()
	if _, err := b.c.Enqueue(context.Background(), &orreryv1.Enqueue{Lane: l, Id: id, PayloadJson: `{"id":"` + id + `"}`}); err != nil {
		b.t.Fatalf("enqueue %s: %v", id, err)
	}
}

// laneMessages lists every live message of a lane.
func (b *bundle) laneMessages(l *orreryv1.Lane) []*orreryv1.QueueMessage {
	b.t.Helper()
	msgs, next, err := b.c.InspectLane(context.Background(), l, "", 1000)
	if err != nil || next != "" {
		b.t.Fatalf("inspect lane %v: %v (next %q)", l, err, next)
	}
	return msgs
}

// keysOnEveryPartition returns one lane key per partition, in partition order.
func keysOnEveryPartition(t *testing.T, partitions int) []string {
	t.Helper()
	keys := make([]string, partitions)
	found := 0
	for i := 0; found < partitions && i < 100_000; i++ {
		k := fmt.Sprintf("key-%d", i)
		if p := route.PartitionOf(testNamespace, k, partitions); keys[p] == "" {
			keys[p] = k
			found++
		}
	}
	if found < partitions {
		t.Fatalf("found keys for %d of %d partitions", found, partitions)
	}
	return keys
}

// clientGoroutines returns the stacks of goroutines running code of package client or
// clienttest (other than test code).
func clientGoroutines() []string {
	var out []string
	for _, g := range goroutineStacks() {
		if strings.Contains(g, "orreryhq/orrery/client.") || strings.Contains(g, "orreryhq/orrery/client/clienttest.") {
			out = append(out, g)
		}
	}
	return out
}

// goroutineStacks returns the stack of every goroutine, one string each.
func goroutineStacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

func everySchedule(l *orreryv1.Lane, id string, interval time.Duration, firstDue time.Time) *orreryv1.ScheduleDefinition {
	return &orreryv1.ScheduleDefinition{
		Lane:       l,
		ScheduleId: id,
		Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{
			IntervalMicros:       interval.Microseconds(),
			FirstDueAtUnixMicros: firstDue.UnixMicro(),
		}}},
		Template: &orreryv1.MessageTemplate{PayloadJson: `{"tick":true}`},
	}
}
