package partition

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/duecoordinator"
	"github.com/orreryhq/orrery/grains/engine"
	"github.com/orreryhq/orrery/grains/input"
)

// Shape of BenchmarkReplicatedEmission.
const (
	emissionPartitions = 4
	emissionSchedules  = 1000
	// emissionLead is how far ahead of the configuration the first due instants begin; they
	// spread over the second after it.
	emissionLead = 3 * time.Second
)

// BenchmarkReplicatedEmission measures the emission of 1,000 Every 1s schedules on a host of
// 4 partitions, each partition's grain on its leader, a due coordinator sending their due
// commands, with one replica per partition (replicas=1) and with three
// (replicas=3: a replica set of three hosts on their own stores over the network twin). After
// a second in which every schedule fires its first occurrence, it measures a window of 20 s
// (4 s with -short) and reports occurrences/s (the partitions' EnqueuedTotal on their leaders,
// before and after), cpu-ms/occurrence (the process's CPU time over the window per occurrence)
// and enqueue-lateness-p99-ms (enqueued_at, the entry's logged time, minus the nominal due
// instant, over the occurrences due in the window, read from the lanes). replicas=3 also
// reports cpu-ratio-3-to-1, its CPU per occurrence over that of replicas=1 when both ran in the
// same invocation. All three hosts run in this process: replicas=3's CPU covers the leaders'
// work, every follower's persist and apply of every entry and the network twin's copying, so
// it is the cost of three replicas on one machine, not one replica's share of it.
func BenchmarkReplicatedEmission(b *testing.B) {
	var singleCPU float64 // replicas=1's cpu-ms/occurrence, 0 until it ran
	b.Run("replicas=1", func(b *testing.B) {
		host := openFounder(b, HostConfig{DataRoot: b.TempDir(), Partitions: emissionPartitions, Logger: quiet})
		b.Cleanup(func() { _ = host.Close() })
		singleCPU = measureEmission(b, func(int) *Host { return host })
	})
	b.Run("replicas=3", func(b *testing.B) {
		rs := newReplicaSet(b)
		cpu := measureEmission(b, rs.leader)
		if singleCPU > 0 {
			b.ReportMetric(cpu/singleCPU, "cpu-ratio-3-to-1")
		}
	})
}

// emissionGrain is one partition's grain, on its leader.
type emissionGrain struct {
	system *actor.ActorSystem
	pid    *actor.PID
	lane   *orreryv1.Lane
}

// measureEmission starts every partition's grain on the host leader returns for it and a due
// coordinator serving them, configures the schedules, measures one window (b.N times the window's length),
// reports the metrics and returns the CPU milliseconds per occurrence. The grains stop when b
// ends.
func measureEmission(b *testing.B, leader func(n int) *Host) float64 {
	window := 20 * time.Second
	if testing.Short() {
		window = 4 * time.Second
	}
	window *= time.Duration(b.N)
	grains := make([]emissionGrain, emissionPartitions)
	var coord atomic.Pointer[duecoordinator.Coordinator]
	notify := func(n *orreryv1.NextDueNotice) {
		if c := coord.Load(); c != nil {
			c.Notify(n)
		}
	}
	refs := grainPartitions{}
	for n := range grains {
		system, pid := grainOn(b, Config{Host: leader(n), OnNextDue: notify}, n)
		grantAll(b, system, pid, "alice")
		grains[n] = emissionGrain{system: system, pid: pid, lane: laneOf(n, emissionPartitions)}
		refs[n] = grainRef{system, pid}
	}
	c := duecoordinator.New(duecoordinator.Config{Partitions: refs, Logger: quiet, Workers: emissionPartitions})
	coord.Store(c)
	c.Start(context.Background())
	c.SetOwned(slices.Collect(maps.Keys(refs)))
	b.Cleanup(c.Stop)
	firsts := configureEmission(b, grains)

	start := time.UnixMicro(slices.Max(firsts)).Add(time.Second) // every schedule has fired once
	time.Sleep(time.Until(start))
	b.ResetTimer()
	enqueued, cpu, from := enqueuedTotal(b, grains), cpuSeconds(), time.Now()
	time.Sleep(window)
	enqueued, cpu, to := enqueuedTotal(b, grains)-enqueued, cpuSeconds()-cpu, time.Now()
	b.StopTimer()
	if enqueued == 0 {
		b.Fatalf("no occurrence enqueued in %v", to.Sub(from))
	}
	lateness := emissionLateness(b, grains, firsts, from.UnixMicro(), to.UnixMicro())
	cpuPerOccurrence := 1000 * cpu / float64(enqueued)
	b.ReportMetric(float64(enqueued)/to.Sub(from).Seconds(), "occurrences/s")
	b.ReportMetric(cpuPerOccurrence, "cpu-ms/occurrence")
	b.ReportMetric(percentileMillis(lateness, 0.99), "enqueue-lateness-p99-ms")
	return cpuPerOccurrence
}

// configureEmission configures the schedules, each on partition i mod 4's lane, the first due
// instants spread over one second emissionLead ahead, and returns them by schedule.
func configureEmission(b *testing.B, grains []emissionGrain) []int64 {
	base := time.Now().Add(emissionLead).UnixMicro()
	firsts := make([]int64, emissionSchedules)
	configure := make([][]*orreryv1.Mutation, len(grains))
	for i := range firsts {
		firsts[i] = base + int64(i)*input.Second/emissionSchedules
		n := i % len(grains)
		configure[n] = append(configure[n], &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
			Definition: &orreryv1.ScheduleDefinition{Lane: grains[n].lane, ScheduleId: emissionScheduleID(i),
				Template: &orreryv1.MessageTemplate{PayloadJson: `{"bench":true}`},
				Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{
					IntervalMicros: input.Second, FirstDueAtUnixMicros: firsts[i]}}}}}}})
	}
	for n, g := range grains {
		reply := request[*orreryv1.CommandReply](b, g.system, g.pid, command(fmt.Sprint("configure-", n), 0, configure[n]...))
		for _, res := range receipt(b, reply).GetResults() {
			if res.GetError() != nil {
				b.Fatalf("configure on partition %d: %v", n, res.GetError())
			}
		}
	}
	return firsts
}

func emissionScheduleID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012x", i) }

// enqueuedTotal sums the partitions' EnqueuedTotal as their leaders' states hold it.
func enqueuedTotal(b *testing.B, grains []emissionGrain) uint64 {
	var total uint64
	for n, g := range grains {
		reply := request[*orreryv1.InspectReply](b, g.system, g.pid, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Partition{Partition: &orreryv1.InspectPartition{}}})
		if reply.GetError() != nil {
			b.Fatalf("inspect partition %d: %v", n, reply.GetError())
		}
		total += reply.GetPartition().GetEnqueuedTotal()
	}
	return total
}

// emissionLateness waits until the lanes hold every occurrence due in [from, to) and returns
// each one's enqueued_at minus its nominal due instant, in microseconds.
func emissionLateness(b *testing.B, grains []emissionGrain, firsts []int64, from, to int64) []int64 {
	want := 0
	for _, first := range firsts {
		for at := first; at < to; at += input.Second {
			if at >= from {
				want++
			}
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var lateness []int64
		for _, g := range grains {
			for _, m := range lanePages(b, g) {
				due := m.GetOccurrence().GetNominalDueAtUnixMicros()
				if due >= from && due < to {
					lateness = append(lateness, m.GetEnqueuedAtUnixMicros()-due)
				}
			}
		}
		if len(lateness) >= want {
			return lateness
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d occurrences due in the window enqueued, want %d", len(lateness), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lanePages reads every message of g's lane, page by page.
func lanePages(b *testing.B, g emissionGrain) []*orreryv1.QueueMessage {
	var msgs []*orreryv1.QueueMessage
	after := ""
	for {
		reply := request[*orreryv1.InspectReply](b, g.system, g.pid, &orreryv1.InspectRequest{Principal: "alice", Target: &orreryv1.InspectRequest_Lane{
			Lane: &orreryv1.InspectLane{Lane: g.lane, AfterId: after, MaxMessages: engine.MaxInspectMessages}}})
		if reply.GetError() != nil {
			b.Fatalf("inspect lane %v: %v", g.lane, reply.GetError())
		}
		msgs = append(msgs, reply.GetMessages()...)
		if after = reply.GetNextAfterId(); after == "" {
			return msgs
		}
	}
}

// percentileMillis is the q-quantile of micros, in milliseconds.
func percentileMillis(micros []int64, q float64) float64 {
	sorted := slices.Sorted(slices.Values(micros))
	return float64(sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]) / 1000
}

// cpuSeconds is this process's user and system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
