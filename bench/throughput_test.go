package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/schedule"
)

// occurrenceSizes are the key and value sizes of one occurrence's message record as the
// throughput benchmark writes it.
func occurrenceSizes(b *testing.B) (keyBytes, valueBytes int) {
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
// synced transactions of 256 records of the given sizes, for the given time. It returns
// records per second.
func rawBadgerCeiling(b *testing.B, keyBytes, valueBytes int, d time.Duration) float64 {
	db, err := badger.Open(badger.DefaultOptions(b.TempDir()).WithSyncWrites(true).WithLogger(nil))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	value := []byte(strings.Repeat("v", valueBytes))
	records := 0
	start := time.Now()
	for time.Since(start) < d {
		txn := db.NewTransaction(true)
		for range 256 {
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
	return float64(records) / time.Since(start).Seconds()
}

// BenchmarkEmitThroughput: occurrences durably enqueued per second by one silo with the
// default 32 partitions and many due schedules (each with a backlog, so the silo emits as fast
// as it can), sustained for 30 s, and that rate as a ratio of raw Badger's durable-write
// ceiling measured in the same run (x-badger-ratio).
func BenchmarkEmitThroughput(b *testing.B) {
	schedules := scale(2048, 256)
	window := time.Duration(scale(30, 3)) * time.Second
	// Enough backlog that the silo cannot drain it during creation and the window even at
	// 200,000 occurrences/s: the window must measure catch-up, never the steady 1/s.
	backlog := time.Duration(scale(4000, 4000)) * time.Second
	for range b.N {
		s := startSilo(b, b.TempDir())
		c := s.Client()
		keyBytes, valueBytes := occurrenceSizes(b)
		ceiling := rawBadgerCeiling(b, keyBytes, valueBytes, time.Duration(scale(10, 2))*time.Second)
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
		b.ReportMetric(ceiling, "badger-records/s")
		b.ReportMetric(rate/ceiling, "x-badger-ratio")
		b.ReportMetric(elapsed.Seconds(), "window-s")
		st := s.CoordinatorStats()
		b.Logf("coordinator: %d rounds, %d scans, %d commands, %d refs, %d stale, %d skipped, %d retries, %d errors",
			st.Rounds, st.Scans, st.CommandsSent, st.RefsDispatched, st.StaleIgnored, st.RefsSkipped, st.Retries, st.Errors)
		b.Logf("emitted %d occurrences in %v (%d schedules, 32 partitions); raw Badger ceiling %.0f records/s (key %d B, value %d B, 256 per synced txn)",
			after-before, elapsed.Round(time.Millisecond), schedules, ceiling, keyBytes, valueBytes)
		s.Stop()
	}
}
