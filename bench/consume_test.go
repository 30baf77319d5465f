package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// Shape of BenchmarkConsume's load.
const (
	consumeBacklog      = 5_000 // ready messages the bounded producer keeps at most
	consumeBatch        = 100   // enqueues per command
	consumeLanesPerPart = 4     // lanes per partition
	consumeConcurrency  = 100   // the worker's concurrency
	consumeSampleEvery  = 100 * time.Millisecond
)

// BenchmarkConsume: already-due messages consumed in a closed loop. A producer, one goroutine
// per partition, enqueues 100 messages per command spread over 4 lanes of its partition and
// keeps the backlog (messages enqueued − completed) at most 5,000; a worker of concurrency 100
// handles them with a handler that returns nil at once. After a warm-up (5 s; 1 s under
// -short) it measures a window of 30 s (4 s under -short). ORRERY_BENCH_CONSUME_INSERT=flat
// lets the producer insert flat out, with no bound on the backlog, while the worker consumes.
//
// completions/s counts the handler returns in the window. The worker acks each in a batched
// ack command; at most twice its concurrency of returned messages wait for a durable ack at
// any instant (Concurrency settling and as many handlers waiting to settle), so the durable
// acks trail the count by at most 200. The run fails unless every handled message's ack became
// durable: once the worker has stopped, the queue must hold exactly the messages enqueued and
// never handled. rss-MB is the peak resident set and heap-MB the peak runtime.MemStats
// HeapInuse (both MiB) sampled every 100 ms over warm-up and window; backlog-max is the
// largest backlog seen; enqueues/s the messages enqueued in the window. duplicates counts the
// messages handled more than once (must be 0).
func BenchmarkConsume(b *testing.B) {
	flat := os.Getenv("ORRERY_BENCH_CONSUME_INSERT") == "flat"
	warmUp := time.Duration(scale(5, 1)) * time.Second
	window := time.Duration(scale(30, 4)) * time.Second
	for range b.N {
		s := startSilo(b, b.TempDir())
		c := s.Client()
		partitions := c.Partitions()
		lanes := make([][]*orreryv1.Lane, partitions)
		for n := range partitions {
			for i := range consumeLanesPerPart {
				lanes[n] = append(lanes[n], laneFor("consume", n, partitions, i))
			}
		}
		var (
			reserved  atomic.Int64 // sequence numbers handed to producers: ids m-0 … m-(reserved−1)
			enqueued  atomic.Int64 // messages the producers' commands created
			completed atomic.Int64 // handler returns
			maxLog    atomic.Int64 // the largest backlog seen
			countsMu  sync.Mutex
			counts    []uint8 // deliveries per sequence number (saturating)
		)
		room := make(chan struct{}, 1) // a completion freed room in the backlog
		w := c.NewWorker(client.WorkerConfig{Namespace: "bench", Queue: "consume", Concurrency: consumeConcurrency, Wait: 5 * time.Second,
			Handler: func(_ context.Context, m *client.Message) error {
				seq, err := strconv.Atoi(m.ID()[len("m-"):])
				if err != nil {
					return fmt.Errorf("message id %q: %w", m.ID(), err)
				}
				countsMu.Lock()
				if seq >= len(counts) {
					counts = append(counts, make([]uint8, seq+1-len(counts)+1<<16)...)
				}
				if counts[seq] < 255 {
					counts[seq]++
				}
				countsMu.Unlock()
				completed.Add(1)
				select {
				case room <- struct{}{}:
				default:
				}
				return nil
			}})
		workerCtx, stopWorker := context.WithCancel(context.Background())
		workerDone := make(chan error, 1)
		go func() { workerDone <- w.Run(workerCtx) }()

		// Producers: each batch's commands run to their end, so that what was enqueued is known.
		stopProducing := make(chan struct{})
		var producers sync.WaitGroup
		produceErrs := make(chan error, partitions)
		for n := range partitions {
			producers.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
				defer cancel()
				batch := make([]*orreryv1.Mutation, consumeBatch)
				for k := 0; ; k++ {
					var first int64
					for {
						select {
						case <-stopProducing:
							return
						default:
						}
						r := reserved.Load()
						if !flat && r+consumeBatch-completed.Load() > consumeBacklog {
							select {
							case <-room:
							case <-stopProducing:
								return
							}
							continue
						}
						if reserved.CompareAndSwap(r, r+consumeBatch) {
							first = r
							break
						}
					}
					for i := range batch {
						batch[i] = &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{
							Lane: lanes[n][(k+i)%consumeLanesPerPart], Id: "m-" + strconv.FormatInt(first+int64(i), 10), PayloadJson: `{"bench":true}`}}}
					}
					rc, _, err := c.Batch(ctx, n, batch)
					created := int64(0)
					for _, r := range rc.GetResults() {
						if err == nil && r.GetError() != nil {
							err = fmt.Errorf("enqueue: %v", r.GetError())
						}
						if r.GetEnqueue().GetCreated() {
							created++
						}
					}
					raiseTo(&maxLog, enqueued.Add(created)-completed.Load())
					if err != nil {
						produceErrs <- fmt.Errorf("partition %d: %w", n, err)
						return
					}
				}
			})
		}

		// Memory: sampled over warm-up and window.
		var peakRSS, peakHeap uint64
		stopSampling := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			ticker := time.NewTicker(consumeSampleEvery)
			defer ticker.Stop()
			var ms runtime.MemStats
			for {
				rss, _, _ := rssBytes()
				runtime.ReadMemStats(&ms)
				peakRSS, peakHeap = max(peakRSS, rss), max(peakHeap, ms.HeapInuse)
				select {
				case <-stopSampling:
					return
				case <-ticker.C:
				}
			}
		}()

		time.Sleep(warmUp)
		fromCompleted, fromEnqueued, from, writesFrom := completed.Load(), enqueued.Load(), time.Now(), s.StoreWrites()
		time.Sleep(window)
		toCompleted, toEnqueued, elapsed, written := completed.Load(), enqueued.Load(), time.Since(from), s.StoreWrites().Sub(writesFrom)
		close(stopSampling)
		<-sampled
		close(stopProducing)
		producers.Wait()
		close(produceErrs)
		for err := range produceErrs {
			b.Fatal(err)
		}
		stopWorker()
		if err := <-workerDone; err != nil {
			b.Fatalf("worker: %v", err)
		}

		countsMu.Lock()
		handled, duplicates := 0, 0
		for _, n := range counts {
			if n > 0 {
				handled++
			}
			if n > 1 {
				duplicates++
			}
		}
		countsMu.Unlock()
		remaining := liveMessages(b, c, lanes)
		b.ReportMetric(float64(toCompleted-fromCompleted)/elapsed.Seconds(), "completions/s")
		b.ReportMetric(float64(toEnqueued-fromEnqueued)/elapsed.Seconds(), "enqueues/s")
		b.ReportMetric(float64(peakRSS)/(1<<20), "rss-MB")
		b.ReportMetric(float64(peakHeap)/(1<<20), "heap-MB")
		b.ReportMetric(float64(maxLog.Load()), "backlog-max")
		b.ReportMetric(float64(duplicates), "duplicates")
		reportWrites(b, written, int(toCompleted-fromCompleted))
		if duplicates != 0 {
			b.Fatalf("%d messages were handled more than once", duplicates)
		}
		if total := enqueued.Load(); remaining != int(total)-handled {
			b.Fatalf("the queue holds %d messages after the run, expected %d enqueued − %d handled = %d: some acks did not become durable",
				remaining, total, handled, int(total)-handled)
		}
		s.Stop()
	}
}

// raiseTo sets v to x when x is larger.
func raiseTo(v *atomic.Int64, x int64) {
	for old := v.Load(); x > old && !v.CompareAndSwap(old, x); old = v.Load() {
	}
}

// liveMessages counts the messages lanes hold.
func liveMessages(b *testing.B, c *client.Client, lanes [][]*orreryv1.Lane) int {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	total := 0
	for _, partitionLanes := range lanes {
		for _, lane := range partitionLanes {
			after := ""
			for {
				msgs, next, err := c.InspectLane(ctx, lane, after, 1000)
				if err != nil {
					b.Fatal(err)
				}
				total += len(msgs)
				if next == "" {
					break
				}
				after = next
			}
		}
	}
	return total
}
