package bench

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// BenchmarkIdleSchedules: 1,000,000 schedules due far in the future on one silo with every
// partition of the default count open: creation rate, resident memory after creation, and CPU
// while idle, measured before the schedules exist and again after: there are no per-schedule
// timers, so the two must match. (What remains is fixed: the Raft groups' ticks, Badger's two
// compactor goroutines on a hard-coded 50 ms ticker, levels.go in badger v4.9.6, and
// memberlist's gossip.)
func BenchmarkIdleSchedules(b *testing.B) {
	count := scale(1_000_000, 20_000)
	idle := time.Duration(scale(20, 3)) * time.Second
	for range b.N {
		dir := b.TempDir()
		s := startSilo(b, dir)
		c := s.Client()
		time.Sleep(3 * time.Second) // every partition open (the coordinator scans them)
		emptyBefore, emptyWall := cpuSeconds(), time.Now()
		time.Sleep(idle)
		emptyCPU := (cpuSeconds() - emptyBefore) / time.Since(emptyWall).Seconds()
		far := time.Now().Add(365 * 24 * time.Hour)
		writesFrom := s.StoreWrites()
		_, rate := createSchedules(b, c, "idle", count, time.Hour, func(int) time.Time { return far })
		written := s.StoreWrites().Sub(writesFrom)
		time.Sleep(5 * time.Second) // let flushes finish and Badger release its builder buffers
		debug.FreeOSMemory()        // measure the heap in use, not garbage not yet returned
		rss, anon, file := rssBytes()
		cpuBefore, wallBefore := cpuSeconds(), time.Now()
		time.Sleep(idle)
		cpu := (cpuSeconds() - cpuBefore) / time.Since(wallBefore).Seconds()
		// Again once idle: Badger keeps the table builders' buffers of recent flushes and
		// compactions in a pool that releases one every 2 s once unused.
		debug.FreeOSMemory()
		idleRSS, idleAnon, idleFile := rssBytes()
		b.ReportMetric(rate, "schedules-created/s")
		b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
		b.ReportMetric(float64(anon)/(1<<20), "rss-anon-MiB")
		b.ReportMetric(float64(file)/(1<<20), "rss-file-MiB")
		b.ReportMetric(float64(idleRSS)/(1<<20), "idle-rss-MiB")
		b.ReportMetric(float64(idleAnon)/(1<<20), "idle-rss-anon-MiB")
		b.ReportMetric(float64(idleFile)/(1<<20), "idle-rss-file-MiB")
		for kind, bytes := range fileRSSByKind() {
			b.ReportMetric(float64(bytes)/(1<<20), "idle-rss-"+kind+"-MiB")
		}
		for ext, bytes := range dirBytesByExt(dir) {
			if ext == "sst" || ext == "mem" || ext == "vlog" {
				b.ReportMetric(float64(bytes)/(1<<20), "disk-"+ext+"-MiB")
			}
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "go-heap-inuse-MiB")
		b.ReportMetric(cpu*100, "idle-cpu-%")
		b.ReportMetric(emptyCPU*100, "idle-cpu-empty-silo-%")
		b.ReportMetric(float64(count), "schedules")
		b.ReportMetric(float64(written.StateBytes)/float64(count), "state-B/schedule")
		b.ReportMetric(float64(written.LogBytes)/float64(count), "log-B/schedule")
		s.Stop()
	}
}
