package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// Shape of the Orrery side's load.
const (
	orreryNamespace       = "peers"
	orreryConfigureBatch  = 200 // schedule configurations per command
	orreryEnqueueBatch    = 100 // enqueues per command (B)
	orreryLanesPerPart    = 4   // B's lanes per partition
	orreryPayload         = `{"bench":true}`
	orreryScheduleIDStart = "00000000-0000-4000-8000-"
)

// orrerySide runs the workloads against one silo process per workload run.
type orrerySide struct {
	binary string   // the silo binary built from this repository
	args   []string // extra flags for the silo (-silo-args)
	// profiles is the directory of the silos' CPU profiles (-cpu-profile; "": none).
	profiles string
	reg      *cleanups
}

// name is the side's column in the table.
func (o *orrerySide) name() string { return "Orrery" }

// run starts a fresh silo, joins it and runs workload w against it.
func (o *orrerySide) run(ctx context.Context, w string, run int, cfg workloadConfig) (metrics, string, error) {
	args, graceful := o.args, false
	if o.profiles != "" {
		args = append(slices.Clip(args), "--cpu-profile", filepath.Join(o.profiles, fmt.Sprintf("orrery-%s-%d.pprof", w, run)))
		graceful = true
	}
	s, stop, err := startSilo(ctx, o.binary, args, graceful, o.reg)
	if err != nil {
		return nil, "", err
	}
	defer stop()
	c, err := client.Dial(ctx, client.DialConfig{Seeds: []string{s.gossip}, Options: client.Options{Logger: clientLog}})
	if err != nil {
		return nil, "", fmt.Errorf("dial the silo at %s: %w", s.gossip, err)
	}
	defer c.Close()
	if o.profiles != "" {
		stopProfile, err := profileClients(filepath.Join(o.profiles, fmt.Sprintf("orrery-%s-%d-clients.pprof", w, run)))
		if err != nil {
			return nil, "", err
		}
		defer stopProfile()
	}
	var m metrics
	var note string
	switch w {
	case "A":
		m, note, err = orreryTimers(ctx, c, s, cfg)
	case "B":
		m, note, err = orreryConsume(ctx, c, s, cfg)
	case "C":
		m, note, err = orreryBurst(ctx, c, s, cfg)
	default:
		return nil, "", fmt.Errorf("unknown workload %q", w)
	}
	if err != nil {
		return nil, "", err
	}
	stages, err := siloStages(ctx, s.admin)
	if err != nil {
		stages = "stages unavailable: " + err.Error()
	}
	return m, note + "\n    " + stages, nil
}

// profileClients profiles this process's CPU (the Orrery client and the workload driving it)
// into path until the returned stop.
func profileClients(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpu-profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// scheduleID is a canonical UUID for schedule (or timer) i; scheduleIndex reverses it.
func scheduleID(i int) string { return fmt.Sprintf(orreryScheduleIDStart+"%012x", i) }

// scheduleIndex returns the i of scheduleID(i), or -1.
func scheduleIndex(id string) int {
	if len(id) != len(orreryScheduleIDStart)+12 || id[:len(orreryScheduleIDStart)] != orreryScheduleIDStart {
		return -1
	}
	i, err := strconv.ParseInt(id[len(orreryScheduleIDStart):], 16, 64)
	if err != nil {
		return -1
	}
	return int(i)
}

// laneFor returns a lane of queue whose key routes to partition n, distinct per i.
func laneFor(queue string, n, partitions, i int) *orreryv1.Lane {
	for j := 0; ; j++ {
		l := &orreryv1.Lane{Namespace: orreryNamespace, Queue: queue, Key: fmt.Sprintf("k-%d-%d-%d", n, i, j)}
		if client.PartitionOf(l, partitions) == n {
			return l
		}
	}
}

// scheduleLanes returns count lanes of queue spread evenly over the partitions, one per schedule.
func scheduleLanes(queue string, count, partitions int) []*orreryv1.Lane {
	lanes := make([]*orreryv1.Lane, count)
	for i := range lanes {
		lanes[i] = laneFor(queue, i%partitions, partitions, i/partitions)
	}
	return lanes
}

// configureAll creates defs (revision 0), orreryConfigureBatch per command, one goroutine per
// partition, as BenchmarkDueLateness does.
func configureAll(ctx context.Context, c *client.Client, defs []*orreryv1.ScheduleDefinition) error {
	byPartition := make([][]*orreryv1.Mutation, c.Partitions())
	for _, def := range defs {
		n := c.PartitionOf(def.GetLane())
		byPartition[n] = append(byPartition[n], &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{
			ConfigureSchedule: &orreryv1.ConfigureSchedule{Definition: def}}})
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(byPartition))
	for n, mutations := range byPartition {
		wg.Go(func() {
			for len(mutations) > 0 {
				batch := mutations[:min(orreryConfigureBatch, len(mutations))]
				mutations = mutations[len(batch):]
				receipt, _, err := c.Batch(ctx, n, batch)
				for _, r := range receipt.GetResults() {
					if err == nil && r.GetError() != nil {
						err = fmt.Errorf("configure: %v", r.GetError())
					}
				}
				if err != nil {
					errs <- fmt.Errorf("partition %d: %w", n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when none failed
}

// runWorker runs a worker of cfg.handlers on queue with handler until the returned stop
// function is called, which returns the worker's error.
func runWorker(c *client.Client, queue string, handlers int, handler client.Handler) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	w := c.NewWorker(client.WorkerConfig{Namespace: orreryNamespace, Queue: queue, Concurrency: handlers, Handler: handler})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}

// orreryTimers is workload A: one-shot At timers whose occurrences land in a queue a worker
// consumes. The worker runs before the timers are created, as River's client does.
func orreryTimers(ctx context.Context, c *client.Client, s *siloProcess, cfg workloadConfig) (metrics, string, error) {
	n := cfg.timers
	lanes := scheduleLanes("timers", n, c.Partitions())
	mem := sampleMemory(s.pids)
	defer mem.stop()
	rec, book := newLatenessRecorder[int](), &timerBook{}
	stopWorker := runWorker(c, "timers", cfg.handlers, func(_ context.Context, m *client.Message) error {
		started := time.Now()
		i := scheduleIndex(m.Occurrence().GetScheduleId())
		if due, ok := book.get(i); ok {
			rec.record(i, due, started)
		}
		return nil
	})
	writesBefore := siloWrites(ctx, s.admin)
	created := time.Now()
	due := timerDueInstants(created, cfg)
	book.set(due)
	defs := make([]*orreryv1.ScheduleDefinition, n)
	for i := range defs {
		defs[i] = &orreryv1.ScheduleDefinition{Lane: lanes[i], ScheduleId: scheduleID(i), Spec: client.At(due[i]),
			Template: &orreryv1.MessageTemplate{PayloadJson: orreryPayload}}
	}
	err := configureAll(ctx, c, defs)
	creation := time.Since(created)
	if err == nil {
		rec.waitHandled(indexes(n), due[n-1].Add(cfg.grace), ctx.Done())
	}
	if err := errors.Join(err, stopWorker(), ctx.Err()); err != nil {
		return nil, "", err
	}
	sum := rec.summary(indexes(n))
	writes := writesNote(writesBefore, siloWrites(ctx, s.admin), n)
	return sum.metrics("A"), timersNote(sum, n, created, creation, due[0], mem.stop()) + "\n    " + writes, nil
}

// orreryConsume is workload B: already-due messages enqueued in Batch commands and consumed by
// a worker in a closed loop, as BenchmarkConsume does.
func orreryConsume(ctx context.Context, c *client.Client, s *siloProcess, cfg workloadConfig) (metrics, string, error) {
	partitions := c.Partitions()
	lanes := make([][]*orreryv1.Lane, partitions)
	for n := range partitions {
		for i := range orreryLanesPerPart {
			lanes[n] = append(lanes[n], laneFor("consume", n, partitions, i))
		}
	}
	loop := newClosedLoop(cfg.backlog, orreryEnqueueBatch)
	stopWorker := runWorker(c, "consume", cfg.handlers, func(_ context.Context, m *client.Message) error {
		seq, err := strconv.ParseInt(m.ID()[len("m-"):], 10, 64)
		if err != nil {
			return fmt.Errorf("message id %q: %w", m.ID(), err)
		}
		loop.completed(seq)
		return nil
	})
	mem := sampleMemory(s.pids)
	writesBefore := siloWrites(ctx, s.admin)
	var producers sync.WaitGroup
	produceErrs := make(chan error, partitions)
	for n := range partitions {
		producers.Go(func() {
			batch := make([]*orreryv1.Mutation, orreryEnqueueBatch)
			for k := 0; ; k++ {
				first, ok := loop.reserve()
				if !ok {
					return
				}
				for i := range batch {
					batch[i] = &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{
						Lane: lanes[n][(k+i)%orreryLanesPerPart], Id: "m-" + strconv.FormatInt(first+int64(i), 10), PayloadJson: orreryPayload}}}
				}
				// Each command runs to its end (no ctx), so that what was enqueued is known.
				callCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
				receipt, _, err := c.Batch(callCtx, n, batch)
				cancel()
				created := 0
				for _, r := range receipt.GetResults() {
					if err == nil && r.GetError() != nil {
						err = fmt.Errorf("enqueue: %v", r.GetError())
					}
					if r.GetEnqueue().GetCreated() {
						created++
					}
				}
				loop.enqueued(created)
				if err != nil {
					produceErrs <- fmt.Errorf("partition %d: %w", n, err)
					loop.stop()
					return
				}
			}
		})
	}
	rate, err := loop.measure(ctx, cfg.warmup, cfg.window)
	peak := mem.stop()
	loop.stop()
	producers.Wait()
	close(produceErrs)
	werr := stopWorker()
	if err := errors.Join(err, <-produceErrs, werr); err != nil {
		return nil, "", err
	}
	handled, dup := loop.handledAndDuplicates()
	writes := writesNote(writesBefore, siloWrites(ctx, s.admin), handled)
	remaining, err := liveMessages(ctx, c, lanes)
	if err != nil {
		return nil, "", err
	}
	durability := "every handled message's ack is durable"
	if want := int(loop.enqueuedTotal()) - handled; remaining != want {
		durability = fmt.Sprintf("ACKS NOT DURABLE: the lanes hold %d messages, enqueued − handled = %d", remaining, want)
	}
	return metrics{"B.rate": rate, "B.mem": peak},
		fmt.Sprintf("%s completions/s, server peak PSS %s MiB; %d duplicates, backlog max %d; %s\n    %s (per handled message; the messages still enqueued at the end add theirs)",
			num(rate, 0), num(peak, 0), dup, loop.maxBacklog.Load(), durability, writes), nil
}

// liveMessages counts the messages lanes hold.
func liveMessages(ctx context.Context, c *client.Client, lanes [][]*orreryv1.Lane) (int, error) {
	total := 0
	for _, partitionLanes := range lanes {
		for _, lane := range partitionLanes {
			after := ""
			for {
				msgs, next, err := c.InspectLane(ctx, lane, after, 1000)
				if err != nil {
					return 0, fmt.Errorf("inspect lane %v: %w", lane, err)
				}
				total += len(msgs)
				if next == "" {
					break
				}
				after = next
			}
		}
	}
	return total, nil
}

// orreryBurst is workload C: Every 1s schedules whose occurrences all fall due on the same
// whole second, as BenchmarkBurst does. The worker runs before the schedules are created.
func orreryBurst(ctx context.Context, c *client.Client, s *siloProcess, cfg workloadConfig) (metrics, string, error) {
	n := cfg.schedules
	lanes := scheduleLanes("burst", n, c.Partitions())
	mem := sampleMemory(s.pids)
	defer mem.stop()
	rec := newLatenessRecorder[occurrence]()
	stopWorker := runWorker(c, "burst", cfg.handlers, func(_ context.Context, m *client.Message) error {
		started := time.Now()
		o := m.Occurrence()
		if i := scheduleIndex(o.GetScheduleId()); i >= 0 {
			due := time.UnixMicro(o.GetNominalDueAtUnixMicros())
			rec.record(occurrence{i, due.UnixMicro()}, due, started)
		}
		return nil
	})
	created := time.Now()
	base := created.Add(cfg.lead).Truncate(time.Second)
	defs := make([]*orreryv1.ScheduleDefinition, n)
	for i := range defs {
		defs[i] = &orreryv1.ScheduleDefinition{Lane: lanes[i], ScheduleId: scheduleID(i), Spec: client.Every(time.Second, base),
			Template: &orreryv1.MessageTemplate{PayloadJson: orreryPayload}}
	}
	err := configureAll(ctx, c, defs)
	creation := time.Since(created)
	writesBefore := siloWrites(ctx, s.admin)
	expected := expectedOccurrences(n, cfg.seconds, base)
	if err == nil {
		end := base.Add(time.Duration(cfg.seconds) * time.Second)
		rec.waitHandled(expected, end.Add(cfg.grace), ctx.Done())
	}
	if err := errors.Join(err, stopWorker(), ctx.Err()); err != nil {
		return nil, "", err
	}
	sum := rec.summary(expected)
	writes := writesNote(writesBefore, siloWrites(ctx, s.admin), len(expected))
	return sum.metrics("C"), burstNote(sum, n, created, creation, base, mem.stop()) + "\n    " + writes, nil
}
