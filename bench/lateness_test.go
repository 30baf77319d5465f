package bench

import (
	"cmp"
	"context"
	"maps"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// BenchmarkDueLateness: 10,000 Every 1s schedules on one silo for 20 s, first due instants
// spread over one second, and a worker handling the queue. Reports p50, p99 and max of
// (enqueue logged time − due time), read from the occurrence ledger for every occurrence due in
// the window, and of (worker handler start − due time) for those the worker handled, with the
// fraction it handled within the run; and how many occurrences were enqueued or handled before
// their due time (must be 0). It logs the five 250 ms windows of due times with the worst
// enqueue lateness, so periodic stalls show. ORRERY_BENCH_LATENESS_WORKER=off runs it without
// the worker, which separates what emitting costs from what consuming adds;
// ORRERY_BENCH_LATENESS_SCHEDULES=<n> runs it at another schedule count, to find the load a
// machine keeps within a lateness bound. cpu-cores is the process's CPU time during the window
// divided by its length: how close the load came to the machine's cores; refs/due-command and
// scans/due-command are the due coordinator's refs sent and scans made per due command in the
// window: how well it batched.
func BenchmarkDueLateness(b *testing.B) {
	schedules := scale(10_000, 1_000)
	if n, err := strconv.Atoi(os.Getenv("ORRERY_BENCH_LATENESS_SCHEDULES")); err == nil && n > 0 {
		schedules = n
	}
	window := time.Duration(scale(20, 4)) * time.Second
	for range b.N {
		s := startSilo(b, b.TempDir())
		started := time.Now()
		c := s.Client()
		base := time.Now().Add(5 * time.Second).Truncate(time.Second)
		lanes, _ := createSchedules(b, c, "lateness", schedules, time.Second, func(i int) time.Time {
			return base.Add(time.Duration(i) * time.Second / time.Duration(schedules))
		})
		measureFrom, measureTo := base.Add(time.Second), base.Add(time.Second+window)
		times := &handlerTimes{from: measureFrom, to: measureTo}
		ctx, cancel := context.WithTimeout(context.Background(), window+15*time.Second)
		w := c.NewWorker(client.WorkerConfig{Namespace: "bench", Queue: "lateness", Concurrency: 256, Wait: 5 * time.Second,
			Handler: func(_ context.Context, m *client.Message) error {
				times.record(m)
				return nil
			}})
		done := make(chan error, 1)
		if os.Getenv("ORRERY_BENCH_LATENESS_WORKER") == "off" {
			go func() { <-ctx.Done(); done <- nil }()
		} else {
			go func() { done <- w.Run(ctx) }()
		}
		time.Sleep(time.Until(measureFrom))
		cpuFrom, statsFrom := cpuSeconds(), s.CoordinatorStats()
		time.Sleep(time.Until(measureTo))
		cpuCores := (cpuSeconds() - cpuFrom) / measureTo.Sub(measureFrom).Seconds()
		statsTo := s.CoordinatorStats()
		refsPerCommand := float64(statsTo.RefsDispatched-statsFrom.RefsDispatched) / float64(max(1, statsTo.CommandsSent-statsFrom.CommandsSent))
		scansPerCommand := float64(statsTo.Scans-statsFrom.Scans) / float64(max(1, statsTo.CommandsSent-statsFrom.CommandsSent))
		time.Sleep(3 * time.Second)
		cancel()
		if err := <-done; err != nil {
			b.Fatalf("worker: %v", err)
		}
		times.mu.Lock()
		early := times.early
		handlerLate := times.late
		times.mu.Unlock()
		// Enqueue lateness of every occurrence due in the window, from the ledger.
		var enqueueLate []time.Duration
		worstByWindow := map[int64]time.Duration{}
		readCtx, readCancel := context.WithTimeout(context.Background(), 5*time.Minute)
		for i, lane := range lanes {
			records, next, err := c.ReadLedger(readCtx, lane, uuidFor(i), client.LedgerQuery{From: measureFrom, To: measureTo.Add(-time.Microsecond)})
			if err != nil || next != nil {
				b.Fatalf("ledger of schedule %d: %v (continuation %v)", i, err, next)
			}
			for _, r := range records {
				if r.GetOutcome() != orreryv1.LedgerOutcome_LEDGER_OUTCOME_ENQUEUED {
					b.Fatalf("schedule %d ordinal %d: outcome %v", i, r.GetOrdinal(), r.GetOutcome())
				}
				late := time.Duration(r.GetRecordedAtUnixMicros()-r.GetNominalDueAtUnixMicros()) * time.Microsecond
				if late < 0 {
					early++
				}
				enqueueLate = append(enqueueLate, late)
				window := (r.GetNominalDueAtUnixMicros() - measureFrom.UnixMicro()) / 250_000
				worstByWindow[window] = max(worstByWindow[window], late)
			}
		}
		readCancel()
		e50, e99, emax := percentiles(enqueueLate)
		h50, h99, hmax := percentiles(handlerLate)
		n, handled := len(enqueueLate), len(handlerLate)
		want := int(window/time.Second) * schedules
		b.ReportMetric(e50, "p50-enqueue-lateness-ms")
		b.ReportMetric(e99, "p99-enqueue-lateness-ms")
		b.ReportMetric(emax, "max-enqueue-lateness-ms")
		b.ReportMetric(h50, "p50-handler-lateness-ms")
		b.ReportMetric(h99, "p99-handler-lateness-ms")
		b.ReportMetric(hmax, "max-handler-lateness-ms")
		b.ReportMetric(cpuCores, "cpu-cores")
		b.ReportMetric(refsPerCommand, "refs/due-command")
		b.ReportMetric(scansPerCommand, "scans/due-command")
		b.ReportMetric(float64(early), "early")
		b.ReportMetric(float64(n), "enqueued")
		b.ReportMetric(float64(handled)/float64(max(n, 1)), "handled-fraction")
		windows := slices.Collect(maps.Keys(worstByWindow))
		slices.SortFunc(windows, func(x, y int64) int { return cmp.Compare(worstByWindow[y], worstByWindow[x]) })
		for _, w := range windows[:min(5, len(windows))] {
			b.Logf("due %5.2f–%5.2f s into the window: worst enqueue lateness %v", float64(w)/4, float64(w+1)/4, worstByWindow[w].Round(time.Millisecond))
		}
		var commits uint64 // the partitions' applied indexes: their log entries
		for p := range c.Partitions() {
			ps, err := c.PartitionStatus(context.Background(), p)
			if err != nil {
				b.Fatal(err)
			}
			commits += ps.GetAppliedIndex()
		}
		b.Logf("partitions applied %d log entries in %v", commits, time.Since(started).Round(time.Second))
		st := s.CoordinatorStats()
		b.Logf("coordinator: %d rounds, %d scans, %d commands, %d refs, %d retries, %d errors",
			st.Rounds, st.Scans, st.CommandsSent, st.RefsDispatched, st.Retries, st.Errors)
		if early != 0 {
			b.Fatalf("%d occurrences were enqueued or handled before their due time", early)
		}
		if n < want*99/100 || n > want*101/100 {
			b.Fatalf("the ledger shows %d occurrences enqueued for the window, expected %d", n, want)
		}
		s.Stop()
	}
}
