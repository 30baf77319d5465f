package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/route"
	"github.com/orreryhq/orrery/persistence"
	"github.com/orreryhq/orrery/silo"
)

// These benchmarks start a protoactor cluster: run without -race (see the Makefile).

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// scale shortens a duration or count under -short, so make test exercises every benchmark.
func scale(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}

// startSilo starts an embedded silo on dir with the silo's defaults; ORRERY_BENCH_PARTITIONS
// overrides its partition count for experiments.
func startSilo(b *testing.B, dir string) *silo.Silo {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	partitions, _ := strconv.Atoi(os.Getenv("ORRERY_BENCH_PARTITIONS"))
	s, err := silo.Start(ctx, silo.Config{DataDir: dir, Admin: "off", Partitions: partitions, Logger: quiet, InsecureDev: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Stop)
	return s
}

// reportWrites reports what the silo store wrote per occurrence: written is the store's
// writes over a run (persistence.WriteCounts) that carried occurrences occurrences through
// their lives (enqueue, lease, ack).
func reportWrites(b *testing.B, written persistence.WriteCounts, occurrences int) {
	b.Helper()
	if occurrences <= 0 {
		return
	}
	per := func(v uint64) float64 { return float64(v) / float64(occurrences) }
	b.ReportMetric(per(written.StateKeys), "state-keys/occurrence")
	b.ReportMetric(per(written.StateBytes), "state-B/occurrence")
	b.ReportMetric(per(written.LogKeys), "log-keys/occurrence")
	b.ReportMetric(per(written.LogBytes), "log-B/occurrence")
}

// laneFor returns a lane whose key routes to partition n, distinct per i.
func laneFor(queue string, n, partitions, i int) *orreryv1.Lane {
	for j := 0; ; j++ {
		l := &orreryv1.Lane{Namespace: "bench", Queue: queue, Key: fmt.Sprintf("k-%d-%d-%d", n, i, j)}
		if route.Partition(l, partitions) == n {
			return l
		}
	}
}

func everySpec(interval time.Duration, first time.Time) *orreryv1.ScheduleSpec {
	return &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{
		IntervalMicros: interval.Microseconds(), FirstDueAtUnixMicros: first.UnixMicro()}}}
}

// createSchedules configures count schedules spread evenly over the partitions, first(i)
// giving each one's first due instant, in batches of up to 200 per command, one goroutine per
// partition. It returns the schedules' lanes and the creation rate.
func createSchedules(b *testing.B, c *client.Client, queue string, count int, interval time.Duration, first func(i int) time.Time) ([]*orreryv1.Lane, float64) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	partitions := c.Partitions()
	lanes := make([]*orreryv1.Lane, count)
	for i := range count {
		lanes[i] = laneFor(queue, i%partitions, partitions, i/partitions)
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, partitions)
	for n := range partitions {
		wg.Go(func() {
			var batch []*orreryv1.Mutation
			flush := func() {
				if len(batch) == 0 {
					return
				}
				rc, _, err := c.Batch(ctx, n, batch)
				if err == nil {
					for _, r := range rc.GetResults() {
						if r.GetError() != nil {
							err = fmt.Errorf("configure: %v", r.GetError())
							break
						}
					}
				}
				if err != nil {
					errs <- err
				}
				batch = batch[:0]
			}
			for i := n; i < count; i += partitions {
				batch = append(batch, &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
					Definition: &orreryv1.ScheduleDefinition{Lane: lanes[i], ScheduleId: uuidFor(i), Spec: everySpec(interval, first(i)),
						Template: &orreryv1.MessageTemplate{PayloadJson: `{"bench":true}`}},
				}}})
				if len(batch) == 200 {
					flush()
				}
			}
			flush()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return lanes, float64(count) / time.Since(start).Seconds()
}

// uuidFor is a deterministic canonical UUID for schedule i.
func uuidFor(i int) string {
	return fmt.Sprintf("00000000-0000-4000-8000-%012x", i)
}

// enqueuedTotal sums the partitions' enqueue sequences: every message ever enqueued.
func enqueuedTotal(b *testing.B, c *client.Client) uint64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var total uint64
	for n := range c.Partitions() {
		st, err := c.PartitionStatus(ctx, n)
		if err != nil {
			b.Fatal(err)
		}
		total += st.GetEnqueuedTotal()
	}
	return total
}

// rssBytes reads this process's resident set: total, anonymous (heap, Badger's memtable
// arenas and buffers) and file-backed (mmapped tables and write-ahead logs: page cache the
// kernel can reclaim).
func rssBytes() (total, anon, file uint64) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseUint(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			total = kb << 10
		case "RssAnon:":
			anon = kb << 10
		case "RssFile:", "RssShmem:":
			file += kb << 10
		}
	}
	return total, anon, file
}

// cpuSeconds is this process's user+system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// diskBytes returns the space the files under dir occupy (allocated blocks, as du counts) and
// their apparent size (Badger preallocates its write-ahead and value-log files sparsely).
func diskBytes(dir string) (allocated, apparent int64) {
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			apparent += info.Size()
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				allocated += st.Blocks * 512
			}
		}
		return nil
	})
	return allocated, apparent
}

// percentiles returns p50, p99 and max of samples in milliseconds.
func percentiles(samples []time.Duration) (p50, p99, maxMS float64) {
	if len(samples) == 0 {
		return 0, 0, 0
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return ms(samples[len(samples)/2]), ms(samples[min(len(samples)-1, len(samples)*99/100)]), ms(samples[len(samples)-1])
}

// handlerTimes records, from a worker's handler, when each occurrence's handler started
// against the occurrence's nominal due time.
type handlerTimes struct {
	from, to time.Time // the due times whose lateness is kept: [from, to)

	mu    sync.Mutex
	late  []time.Duration // handler start − nominal due, for occurrences due in [from, to)
	early int             // occurrences handled or enqueued before their due time
	// handled counts the deliveries of each occurrence, when not nil.
	handled map[occurrenceKey]handledOccurrence
}

// occurrenceKey names one occurrence: its schedule and ordinal.
type occurrenceKey struct {
	scheduleID string
	ordinal    uint64
}

// handledOccurrence is how often an occurrence was handled, and its nominal due time.
type handledOccurrence struct {
	deliveries   int
	dueUnixMicro int64
}

// record is called first thing in the handler with the message it was given.
func (h *handlerTimes) record(m *client.Message) {
	started := time.Now()
	occurrence := m.Occurrence()
	due := time.UnixMicro(occurrence.GetNominalDueAtUnixMicros())
	h.mu.Lock()
	defer h.mu.Unlock()
	if started.Before(due) || m.EnqueuedAt().Before(due) {
		h.early++
	}
	if !due.Before(h.from) && due.Before(h.to) {
		h.late = append(h.late, started.Sub(due))
	}
	if h.handled != nil {
		key := occurrenceKey{scheduleID: occurrence.GetScheduleId(), ordinal: occurrence.GetOrdinal()}
		seen := h.handled[key]
		h.handled[key] = handledOccurrence{deliveries: seen.deliveries + 1, dueUnixMicro: occurrence.GetNominalDueAtUnixMicros()}
	}
}

// benchStore is an empty in-memory partition in which the principal "bench" holds every
// capability, as the due coordinator's principal would grant it.
func benchStore(b *testing.B) *kv.Memory {
	store := kv.NewMemory()
	if err := grants.ApplyPut(store, input.CoordinatorPrincipal, grants.Everything("bench")); err != nil {
		b.Fatal(err)
	}
	return store
}

// fileRSSByKind sums the resident pages of this process's file mappings by what the file is
// to the store: "sst" (Badger's tables), "mem" (its memtables' write-ahead logs), "vlog" (its
// value log) and "other" (the binary, shared libraries), from /proc/self/smaps.
func fileRSSByKind() map[string]uint64 {
	out := map[string]uint64{}
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return out
	}
	kind := ""
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			kind = ""
			if len(fields) >= 6 && strings.HasPrefix(fields[5], "/") {
				switch filepath.Ext(fields[5]) {
				case ".sst", ".mem", ".vlog":
					kind = filepath.Ext(fields[5])[1:]
				default:
					kind = "other"
				}
			}
		case len(fields) >= 2 && fields[0] == "Rss:" && kind != "":
			kb, _ := strconv.ParseUint(fields[1], 10, 64)
			out[kind] += kb << 10
		}
	}
	return out
}

// dirBytesByExt sums the sizes of the files under dir by extension ("sst", "mem", "vlog", …;
// "other" for files without one).
func dirBytesByExt(dir string) map[string]uint64 {
	out := map[string]uint64{}
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		ext := strings.TrimPrefix(filepath.Ext(path), ".")
		if ext == "" {
			ext = "other"
		}
		out[ext] += uint64(info.Size())
		return nil
	})
	return out
}
