package bench

import (
	"context"
	"testing"
	"time"

	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/persistence"
)

// BenchmarkSteadyDisk: a steady emit-and-ack workload for 60 s (schedules every second, a
// worker acking every occurrence); then the bytes on disk against the live data (every key
// and value the partitions hold, read back after the silo stops).
func BenchmarkSteadyDisk(b *testing.B) {
	schedules := scale(2_000, 200)
	window := time.Duration(scale(60, 5)) * time.Second
	for range b.N {
		dir := b.TempDir()
		s := startSilo(b, dir)
		c := s.Client()
		base := time.Now().Add(3 * time.Second)
		createSchedules(b, c, "steady", schedules, time.Second, func(i int) time.Time {
			return base.Add(time.Duration(i) * time.Second / time.Duration(schedules))
		})
		ctx, cancel := context.WithTimeout(context.Background(), window)
		w := c.NewWorker(client.WorkerConfig{Namespace: "bench", Queue: "steady", Concurrency: 128, Wait: 5 * time.Second,
			Handler: func(context.Context, *client.Message) error { return nil }})
		_ = w.Run(ctx)
		cancel()
		handled := enqueuedTotal(b, c)
		s.Stop()
		disk, apparent := diskBytes(dir)
		var live int64
		store, err := persistence.OpenSiloStore(persistence.SiloStoreDir(dir), c.Partitions(), persistence.Options{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		for n := range c.Partitions() {
			state, err := store.Partition(n)
			if err == nil {
				err = state.View(func(r kv.Reader) error {
					return r.Scan(nil, nil, func(k, v []byte) (bool, error) { live += int64(len(k) + len(v)); return true, nil })
				})
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		store.Close()
		b.ReportMetric(float64(disk)/(1<<20), "disk-MiB")
		b.ReportMetric(float64(apparent)/(1<<20), "apparent-MiB")
		b.ReportMetric(float64(live)/(1<<20), "live-MiB")
		b.ReportMetric(float64(disk)/float64(max(live, 1)), "disk/live")
		b.ReportMetric(float64(handled), "occurrences")
	}
}
