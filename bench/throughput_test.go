package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/schedule"
)

// writeSet is what emitting one occurrence writes, on average, measured on the real apply
// path: records per occurrence and their mean key and value sizes (message, visibility index,
// ledger record and its age index, plus the schedule's share of its record, due entry,
// counters, receipt and inbox index).
type writeSet struct {
	records              float64
	keyBytes, valueBytes int
}

// occurrenceWriteSet applies EmitOccurrences of 32 occurrences to 64 schedules on an
// in-memory partition and counts the writes per occurrence.
func occurrenceWriteSet(b *testing.B) writeSet {
	store := benchStore(b)
	a := batch.Applier{Limits: input.DefaultLimits()}
	now := time.Now()
	var configure, emit []*orreryv1.Mutation
	for i := range 64 {
		lane := laneFor("throughput", 0, 32, i)
		configure = append(configure, &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
			Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: uuidFor(i), Spec: everySpec(time.Second, now.Add(-time.Hour)),
				Template: &orreryv1.MessageTemplate{PayloadJson: `{"bench":true}`}}}}})
		emit = append(emit, &orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{
			Lane: lane, ScheduleId: uuidFor(i), ExpectedGeneration: 1, Max: 32}}})
	}
	if _, err := a.ApplyBatch(store, "bench", &orreryv1.Batch{CommandId: "configure", Mutations: configure}, now.UnixMicro()); err != nil {
		b.Fatal(err)
	}
	writes := &countingView{View: store}
	out, err := a.ApplyBatch(writes, input.CoordinatorPrincipal, &orreryv1.Batch{CommandId: "emit", Mutations: emit[:16]}, now.UnixMicro()+1)
	if err != nil {
		b.Fatal(err)
	}
	occurrences := 0
	for _, r := range out.Receipt.GetResults() {
		occurrences += len(r.GetSchedule().GetEnqueuedIds())
	}
	if occurrences != 16*32 {
		b.Fatalf("the sample emitted %d occurrences, want %d", occurrences, 16*32)
	}
	return writeSet{records: float64(writes.sets) / float64(occurrences), keyBytes: writes.keyBytes / writes.sets, valueBytes: writes.valueBytes / writes.sets}
}

// countingView counts the writes that reach a view.
type countingView struct {
	kv.View
	sets, keyBytes, valueBytes int
}

func (c *countingView) Set(key, value []byte) error {
	c.sets++
	c.keyBytes += len(key)
	c.valueBytes += len(value)
	return c.View.Set(key, value)
}

// messageSizes are the key and value sizes of one occurrence's message record alone.
func messageSizes(b *testing.B) (keyBytes, valueBytes int) {
	lane := laneFor("throughput", 0, 32, 0)
	id := schedule.OccurrenceID(uuidFor(1), 1, 12345)
	msg := &orreryv1.QueueMessage{Id: id, Lane: lane, PayloadJson: `{"bench":true}`, EnqueuedAtUnixMicros: time.Now().UnixMicro(),
		VisibleAtUnixMicros: time.Now().UnixMicro(), MaxDeliveries: 10, Sequence: 123456,
		Origin: &orreryv1.QueueMessage_Occurrence{Occurrence: &orreryv1.OccurrenceOrigin{ScheduleId: uuidFor(1), Generation: 1, Ordinal: 12345, NominalDueAtUnixMicros: time.Now().UnixMicro()}}}
	value, err := record.Marshal(msg)
	if err != nil {
		b.Fatal(err)
	}
	return len(keys.MessageKey(lane, id)), len(value)
}

// rawBadgerCeiling measures this machine's durable-write ceiling: one raw Badger database,
// synced transactions of 256 units of recordsPerUnit records of the given sizes, for the
// given time. It returns units per second.
func rawBadgerCeiling(b *testing.B, recordsPerUnit float64, keyBytes, valueBytes int, d time.Duration) float64 {
	db, err := badger.Open(badger.DefaultOptions(b.TempDir()).WithSyncWrites(true).WithLogger(nil))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	value := []byte(strings.Repeat("v", valueBytes))
	perTxn := int(256*recordsPerUnit + 0.5)
	records := 0
	start := time.Now()
	for time.Since(start) < d {
		txn := db.NewTransaction(true)
		for range perTxn {
			key := fmt.Appendf(nil, "%0*d", keyBytes, records)
			if err := txn.Set(key, value); err != nil {
				b.Fatal(err)
			}
			records++
		}
		if err := txn.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	return float64(records) / recordsPerUnit / time.Since(start).Seconds()
}

// BenchmarkEmitThroughput: occurrences durably enqueued per second by one silo with the
// default 32 partitions and many due schedules (each with a backlog, so the silo emits as fast
// as it can), sustained for 30 s, and that rate as a ratio of ceilings measured in the same
// run: x-store-ratio against the silo store alone doing exactly the Raft writes and applies of
// full due commands, pipelined as the driver does (storeCeiling; at most 1 by
// construction, the rest is the cost of everything else); x-badger-ratio against raw Badger
// (default options) writing the same write set per occurrence in synced transactions of 256
// occurrences' worth, x-badger-record-ratio against one message-sized record per occurrence.
func BenchmarkEmitThroughput(b *testing.B) {
	schedules := scale(2048, 256)
	window := time.Duration(scale(30, 3)) * time.Second
	// Enough backlog that the silo cannot drain it during creation and the window even at
	// 200,000 occurrences/s: the window must measure catch-up, never the steady 1/s.
	backlog := time.Duration(scale(4000, 4000)) * time.Second
	for range b.N {
		s := startSilo(b, b.TempDir())
		c := s.Client()
		set := occurrenceWriteSet(b)
		keyBytes, valueBytes := messageSizes(b)
		ceiling := rawBadgerCeiling(b, set.records, set.keyBytes, set.valueBytes, time.Duration(scale(10, 2))*time.Second)
		recordCeiling := rawBadgerCeiling(b, 1, keyBytes, valueBytes, time.Duration(scale(10, 2))*time.Second)
		storeRate := storeCeiling(b, recordDueCommand(b), time.Duration(scale(10, 2))*time.Second)
		first := time.Now().Add(-backlog)
		createSchedules(b, c, "throughput", schedules, time.Second, func(int) time.Time { return first })
		time.Sleep(time.Second) // let the coordinator find the backlog
		before, start := enqueuedTotal(b, c), time.Now()
		time.Sleep(window)
		after, elapsed := enqueuedTotal(b, c), time.Since(start)
		rate := float64(after-before) / elapsed.Seconds()
		dueByEnd := uint64(schedules) * uint64(time.Since(first)/time.Second+1)
		if after >= dueByEnd*95/100 || after == before {
			b.Fatalf("the backlog ran out (%d of %d due emitted) or nothing was emitted in the window (%d): not a sustained measurement", after, dueByEnd, after-before)
		}
		b.ReportMetric(rate, "occurrences/s")
		b.ReportMetric(storeRate, "store-occurrences/s")
		b.ReportMetric(rate/storeRate, "x-store-ratio")
		b.ReportMetric(ceiling, "badger-occurrence-sets/s")
		b.ReportMetric(rate/ceiling, "x-badger-ratio")
		b.ReportMetric(recordCeiling, "badger-records/s")
		b.ReportMetric(rate/recordCeiling, "x-badger-record-ratio")
		b.ReportMetric(elapsed.Seconds(), "window-s")
		st := s.CoordinatorStats()
		b.Logf("coordinator: %d rounds, %d scans, %d commands, %d refs, %d stale, %d skipped, %d retries, %d errors",
			st.Rounds, st.Scans, st.CommandsSent, st.RefsDispatched, st.StaleIgnored, st.RefsSkipped, st.Retries, st.Errors)
		b.Logf("emitted %d occurrences in %v (%d schedules, 32 partitions); an occurrence writes %.2f records (mean key %d B, value %d B); raw Badger: %.0f such sets/s, %.0f message records/s (key %d B, value %d B)",
			after-before, elapsed.Round(time.Millisecond), schedules, set.records, set.keyBytes, set.valueBytes, ceiling, recordCeiling, keyBytes, valueBytes)
		s.Stop()
	}
}
