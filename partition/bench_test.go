package partition

import (
	"fmt"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

// BenchmarkEmitCommand measures one coordinator-shaped command through the grain: 16
// EmitOccurrences of 32 occurrences each (512 occurrences), applied and synced.
func BenchmarkEmitCommand(b *testing.B) {
	h := newHarness(b, nil)
	const schedules = 16
	var configure []*orreryv1.Mutation
	ids := make([]string, schedules)
	for i := range schedules {
		ids[i] = fmt.Sprintf("00000000-0000-4000-8000-%012x", i)
		configure = append(configure, &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
			Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: ids[i], Template: &orreryv1.MessageTemplate{PayloadJson: `{"bench":true}`},
				Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{IntervalMicros: input.Second,
					FirstDueAtUnixMicros: time.Now().Add(-100 * time.Hour).UnixMicro()}}}}}}})
	}
	receipt(b, h.do(command("configure", 0, configure...)))
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		var emits []*orreryv1.Mutation
		for _, id := range ids {
			emits = append(emits, &orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: id, ExpectedGeneration: 1, Max: 32}}})
		}
		rc := receipt(b, h.do(command(fmt.Sprint("emit-", i), 0, emits...)))
		if n := len(rc.GetResults()[0].GetSchedule().GetEnqueuedIds()); n != 32 {
			b.Fatalf("emitted %d, want 32: %v", n, rc.GetResults()[0])
		}
	}
	b.ReportMetric(float64(b.N*schedules*32)/time.Since(start).Seconds(), "occurrences/s")
}

// BenchmarkConsistencyChecksum measures what one replica does for a consistency check: read
// its partition's whole state (here 20,000 queued messages and their indexes) from a snapshot
// and hash it, as Host.checksumState does.
func BenchmarkConsistencyChecksum(b *testing.B) {
	h := newHarness(b, nil)
	const messages, perCommand = 20_000, 250
	for c := range messages / perCommand {
		muts := make([]*orreryv1.Mutation, perCommand)
		for i := range muts {
			muts[i] = enqueue(fmt.Sprintf("m-%d-%d", c, i))
		}
		receipt(b, h.do(command(fmt.Sprint("fill-", c), 0, muts...)))
	}
	host := h.cfg.Host
	b.ResetTimer()
	var bytes int64
	for range b.N {
		snap, err := host.machines[1].state.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		_, size, err := hashState(snap)
		_ = snap.Close()
		if err != nil {
			b.Fatal(err)
		}
		bytes = size
	}
	b.ReportMetric(float64(bytes)/(1<<20), "state-MiB")
	b.ReportMetric(float64(messages)*float64(b.N)/b.Elapsed().Seconds(), "messages/s")
}
