package bench

import (
	"context"
	"testing"
	"time"

	"github.com/orreryhq/orrery/client"
)

// BenchmarkBurst: 1,000 Every 1s schedules whose occurrences all fall due on the same whole
// second, every second, for 30 s (4 s under -short), and a worker of concurrency 100 handling
// their queue. It reports the p50, p99 and max of (handler start − nominal due time) over the
// occurrences due in the window; early, the occurrences handled or enqueued before their due
// time; duplicates, the occurrences (schedule and ordinal) handled more than once; and misses,
// the occurrences due in the window (schedules × whole seconds in it) that were not handled by
// the end of a grace period after the window. The last three must be 0.
func BenchmarkBurst(b *testing.B) {
	const schedules = 1_000
	seconds := scale(30, 4)
	window := time.Duration(seconds) * time.Second
	const grace = 15 * time.Second
	for range b.N {
		s := startSilo(b, b.TempDir())
		c := s.Client()
		base := time.Now().Add(4 * time.Second).Truncate(time.Second)
		lanes, _ := createSchedules(b, c, "burst", schedules, time.Second, func(int) time.Time { return base })
		if late := time.Since(base.Add(-time.Second)); late > 0 {
			b.Fatalf("creating the schedules ended %v after a second before the first due time", late)
		}
		times := &handlerTimes{from: base, to: base.Add(window), handled: map[occurrenceKey]handledOccurrence{}}
		ctx, cancel := context.WithCancel(context.Background())
		w := c.NewWorker(client.WorkerConfig{Namespace: "bench", Queue: "burst", Concurrency: 100, Wait: 5 * time.Second,
			Handler: func(_ context.Context, m *client.Message) error {
				times.record(m)
				return nil
			}})
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		writesFrom := s.StoreWrites()
		time.Sleep(time.Until(base.Add(window)))
		// Wait for the window's last burst to be handled, at most grace.
		want := schedules * seconds
		deadline := time.Now().Add(grace)
		for {
			times.mu.Lock()
			handled := len(times.late)
			times.mu.Unlock()
			if handled >= want || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			b.Fatalf("worker: %v", err)
		}
		written := s.StoreWrites().Sub(writesFrom)
		times.mu.Lock()
		duplicates, misses := 0, 0
		type dueKey struct {
			scheduleID   string
			dueUnixMicro int64
		}
		handledDue := map[dueKey]bool{}
		for key, o := range times.handled {
			if o.deliveries > 1 {
				duplicates++
			}
			handledDue[dueKey{key.scheduleID, o.dueUnixMicro}] = true
		}
		for i := range lanes {
			for second := range seconds {
				due := base.Add(time.Duration(second) * time.Second).UnixMicro()
				if !handledDue[dueKey{uuidFor(i), due}] {
					misses++
				}
			}
		}
		p50, p99, pmax := percentiles(times.late)
		early, handledCount := times.early, len(times.late)
		times.mu.Unlock()
		b.ReportMetric(p50, "p50-handler-lateness-ms")
		b.ReportMetric(p99, "p99-handler-lateness-ms")
		b.ReportMetric(pmax, "max-handler-lateness-ms")
		b.ReportMetric(float64(early), "early")
		b.ReportMetric(float64(duplicates), "duplicates")
		b.ReportMetric(float64(misses), "misses")
		reportWrites(b, written, handledCount)
		if early != 0 || duplicates != 0 || misses != 0 {
			b.Fatalf("%d occurrences handled or enqueued early, %d handled twice, %d of %d due in the window never handled", early, duplicates, misses, want)
		}
		s.Stop()
	}
}
