package persistence

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// idlePartitions is how many partitions the memory measurement holds open at once.
const idlePartitions = 32

// idleCost is what one open, idle partition costs the process.
type idleCost struct {
	rssBytes, anonBytes, fileBytes float64
	goroutines, fds                float64
}

// measureIdlePartitions opens idlePartitions stores under one data root, writes
// writtenBytes of records to each (in batches below MaxBatchBytes), lets them settle and
// reports the cost per open store: resident memory (VmRSS), goroutines and file descriptors.
func measureIdlePartitions(tb testing.TB, writtenBytes int) idleCost {
	tb.Helper()
	root := tb.TempDir()
	settle := func() {
		runtime.GC()
		debug.FreeOSMemory()
	}
	settle()
	before, goroutinesBefore, fdsBefore := readResident(tb), runtime.NumGoroutine(), openFDs(tb)
	stores := make([]*Store, 0, idlePartitions)
	for n := range idlePartitions {
		s, err := Open(PartitionDir(root, n), quietOptions())
		if err != nil {
			tb.Fatal(err)
		}
		stores = append(stores, s)
		writeRecords(tb, s, writtenBytes)
	}
	settle()
	after := readResident(tb)
	cost := idleCost{
		rssBytes:   float64(after.total-before.total) / idlePartitions,
		anonBytes:  float64(after.anon-before.anon) / idlePartitions,
		fileBytes:  float64(after.file-before.file) / idlePartitions,
		goroutines: float64(runtime.NumGoroutine()-goroutinesBefore) / idlePartitions,
		fds:        float64(openFDs(tb)-fdsBefore) / idlePartitions,
	}
	for _, s := range stores {
		if err := s.Close(); err != nil {
			tb.Fatal(err)
		}
	}
	return cost
}

// TestIdlePartitionMemory holds 32 partitions open in this process and logs what each costs.
// It is not parallel, so no other test allocates while it measures.
func TestIdlePartitionMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 32 databases")
	}
	cost := measureIdlePartitions(t, 0)
	t.Logf("per open idle partition (%d open, nothing written): RSS %.2f MiB (anonymous %.2f, file-backed %.2f), "+
		"%.1f goroutines, %.1f file descriptors (race detector: %v)",
		idlePartitions, cost.rssBytes/(1<<20), cost.anonBytes/(1<<20), cost.fileBytes/(1<<20),
		cost.goroutines, cost.fds, raceEnabled)
	if cost.goroutines > 40 || cost.fds > 16 {
		t.Errorf("an idle partition costs %.1f goroutines and %.1f descriptors", cost.goroutines, cost.fds)
	}
	if !raceEnabled && cost.rssBytes > 16<<20 {
		t.Errorf("an idle partition costs %.2f MiB of RSS, more than 16 MiB", cost.rssBytes/(1<<20))
	}
}

// BenchmarkIdlePartitions reports the cost of one open idle partition, measured with 32 open:
// freshly opened, and after 4 MiB of records were written to each (half a memtable, which
// stays resident until it is flushed). Run it without -race:
//
//	go test -run '^$' -bench IdlePartitions -benchtime 1x ./persistence
func BenchmarkIdlePartitions(b *testing.B) {
	for _, tc := range []struct {
		name         string
		writtenBytes int
	}{{"fresh", 0}, {"written-4MiB", 4 << 20}} {
		b.Run(tc.name, func(b *testing.B) {
			var cost idleCost
			for b.Loop() {
				cost = measureIdlePartitions(b, tc.writtenBytes)
			}
			b.ReportMetric(cost.rssBytes/(1<<20), "RSS-MiB/partition")
			b.ReportMetric(cost.anonBytes/(1<<20), "anon-MiB/partition")
			b.ReportMetric(cost.fileBytes/(1<<20), "file-MiB/partition")
			b.ReportMetric(cost.goroutines, "goroutines/partition")
			b.ReportMetric(cost.fds, "fds/partition")
		})
	}
}

// writeRecords commits about total bytes of 1 KiB records to s.
func writeRecords(tb testing.TB, s *Store, total int) {
	tb.Helper()
	value := make([]byte, 1000)
	perBatch := int(s.MaxBatchBytes() * 3 / 4 / 1024)
	for written := 0; written < total; {
		err := s.Update(func(txn *Txn) error {
			for range perBatch {
				if written >= total {
					break
				}
				if err := txn.Set(fmt.Appendf(nil, "m/%012d", written), value); err != nil {
					return err
				}
				written += len(value) + 14
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// residentMemory is the process's resident set from /proc/self/status, in bytes: anonymous
// (heap, Go arenas) and file-backed (mmap'd WAL and tables: page cache the kernel can reclaim).
type residentMemory struct{ total, anon, file int64 }

func readResident(tb testing.TB) residentMemory {
	tb.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		tb.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	var m residentMemory
	fields := map[string]*int64{"VmRSS:": &m.total, "RssAnon:": &m.anon, "RssFile:": &m.file}
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		words := strings.Fields(lines.Text())
		if len(words) != 3 || words[2] != "kB" || fields[words[0]] == nil {
			continue
		}
		kib, err := strconv.ParseInt(words[1], 10, 64)
		if err != nil {
			tb.Fatal(err)
		}
		*fields[words[0]] = kib << 10
	}
	if m.total == 0 {
		tb.Skip("no VmRSS in /proc/self/status")
	}
	return m
}

// openFDs counts the process's open file descriptors.
func openFDs(tb testing.TB) int {
	tb.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Skipf("no /proc/self/fd: %v", err)
	}
	return len(entries)
}
