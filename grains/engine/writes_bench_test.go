package engine

import (
	"fmt"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

// BenchmarkWritesPerOccurrence reports what the partition state machine writes for one
// occurrence of an Every-1s schedule, phase by phase: the due command that emits it, the
// receive that leases it and the ack, each applied through ApplyEntry as a partition applies
// its entries (without the Raft log entry and applied mark a partition writes beside each
// apply; entry-bytes is the size of the three encoded commands that entry holds). Keys count
// a key set or deleted; bytes count keys and values.
//
//	go test -run '^$' -bench BenchmarkWritesPerOccurrence ./grains/engine
func BenchmarkWritesPerOccurrence(b *testing.B) {
	h := newHarness(b, nil)
	h.command("a", request("configure", &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
		Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: scheduleID(1), Template: &orreryv1.MessageTemplate{PayloadJson: `{"bench":true}`},
			Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{
				IntervalMicros: input.Second, FirstDueAtUnixMicros: t0.Add(time.Second).UnixMicro()}}}}}}}))
	h.commit()
	type phase struct {
		name                        string
		keysSet, keysDeleted, bytes int
		entryBytes                  int
	}
	phases := []*phase{{name: "emit"}, {name: "lease"}, {name: "ack"}}
	apply := func(ph *phase, from string, req *orreryv1.CommandRequest) *orreryv1.Receipt {
		h.writes = &writeCount{}
		h.command(from, req)
		for _, e := range h.log {
			ph.entryBytes += len(e.command)
		}
		h.commit()
		ph.keysSet += h.writes.sets
		ph.keysDeleted += h.writes.deletes
		ph.bytes += h.writes.bytes
		h.writes = nil
		answers := h.answers(from)
		rc := receiptOf(b, answers[len(answers)-1])
		if err := rc.GetResults()[0].GetError(); err != nil {
			b.Fatalf("%s: %v", ph.name, err)
		}
		return rc
	}
	b.ResetTimer()
	for i := range b.N {
		h.now = h.now.Add(time.Second)
		apply(phases[0], "coordinator", &orreryv1.CommandRequest{Principal: input.CoordinatorPrincipal, Due: true, Batch: batchOf(fmt.Sprint("d", i),
			&orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: scheduleID(1), ExpectedGeneration: 1, Max: 1}}})})
		leased := apply(phases[1], "worker", request(fmt.Sprint("r", i), &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Max: 1}}}))
		msgs := leased.GetResults()[0].GetReceive().GetMessages()
		if len(msgs) != 1 {
			b.Fatalf("occurrence %d: the receive leased %d messages, want 1", i, len(msgs))
		}
		apply(phases[2], "worker", request(fmt.Sprint("a", i), &orreryv1.Mutation{Kind: &orreryv1.Mutation_Ack{Ack: &orreryv1.Ack{Lane: msgs[0].GetLane(), Id: msgs[0].GetId(), LeaseToken: msgs[0].GetLease().GetToken()}}}))
	}
	b.StopTimer()
	total := phase{}
	n := float64(b.N)
	for _, ph := range phases {
		b.ReportMetric(float64(ph.keysSet+ph.keysDeleted)/n, ph.name+"-keys/occurrence")
		b.ReportMetric(float64(ph.bytes)/n, ph.name+"-bytes/occurrence")
		total.keysSet += ph.keysSet
		total.keysDeleted += ph.keysDeleted
		total.bytes += ph.bytes
		total.entryBytes += ph.entryBytes
	}
	b.ReportMetric(float64(total.keysSet)/n, "keys-set/occurrence")
	b.ReportMetric(float64(total.keysDeleted)/n, "keys-deleted/occurrence")
	b.ReportMetric(float64(total.bytes)/n, "bytes/occurrence")
	b.ReportMetric(float64(total.entryBytes)/n, "entry-bytes/occurrence")
}
