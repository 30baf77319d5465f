package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// River's settings on every workload.
const (
	riverFetchPollInterval = 20 * time.Millisecond
	riverFetchCooldown     = 5 * time.Millisecond // at most FetchPollInterval, which River checks
	riverPoolConns         = 40
	riverInsertBatch       = 1_000 // A: jobs per InsertManyFast
	riverEnqueueBatch      = 100   // B: jobs per InsertManyFast
	riverProducers         = 8     // B: producer goroutines
)

// riverSide runs the workloads with River against one private PostgreSQL cluster per
// workload run.
type riverSide struct {
	binDir   string // PostgreSQL's bin dir
	reg      *cleanups
	settings string // what the last cluster reported of its version and durability settings
}

// name is the side's column in the table.
func (r *riverSide) name() string { return "River" }

// run starts a fresh cluster, migrates River's schema into it and runs workload w.
func (r *riverSide) run(ctx context.Context, w string, _ int, cfg workloadConfig) (metrics, string, error) {
	pg, stop, err := startPostgres(ctx, r.binDir, r.reg)
	if err != nil {
		return nil, "", err
	}
	defer stop()
	r.settings = pg.settings
	poolConfig, err := pgxpool.ParseConfig(pg.dsn)
	if err != nil {
		return nil, "", err
	}
	poolConfig.MaxConns = riverPoolConns
	pool, err := pgxpool.NewWithConfig(ctx, poolConfig)
	if err != nil {
		return nil, "", err
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return nil, "", err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, "", fmt.Errorf("river migrations: %w", err)
	}
	switch w {
	case "A":
		return riverTimers(ctx, pool, pg, cfg)
	case "B":
		return riverConsume(ctx, pool, pg, cfg)
	case "C":
		return riverBurst(ctx, pool, pg, cfg)
	}
	return nil, "", fmt.Errorf("unknown workload %q", w)
}

// newRiverClient returns a client working River's default queue with handlers workers, polling
// every riverFetchPollInterval.
func newRiverClient(pool *pgxpool.Pool, workers *river.Workers, handlers int) (*river.Client[pgx.Tx], error) {
	return river.NewClient(riverpgxv5.New(pool), &river.Config{
		FetchCooldown:     riverFetchCooldown,
		FetchPollInterval: riverFetchPollInterval,
		Logger:            clientLog,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: handlers}},
		Workers:           workers,
	})
}

// stopRiver stops c gracefully: running jobs finish and their completions are written.
func stopRiver(c *river.Client[pgx.Tx]) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		hard, cancelHard := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancelHard()
		return errors.Join(err, c.StopAndCancel(hard))
	}
	return nil
}

// timerArgs is a job of A: timer I.
type timerArgs struct {
	I int `json:"i"`
}

// Kind is the job kind of A's jobs.
func (timerArgs) Kind() string { return "peers_timer" }

// consumeArgs is a job of B: message Seq.
type consumeArgs struct {
	Seq int64 `json:"s"`
}

// Kind is the job kind of B's jobs.
func (consumeArgs) Kind() string { return "peers_consume" }

// burstArgs is a job of C: an occurrence of schedule Schedule.
type burstArgs struct {
	Schedule int `json:"i"`
}

// Kind is the job kind of C's jobs.
func (burstArgs) Kind() string { return "peers_burst" }

// riverSettle is how long a River client runs before A's timers or C's periodic jobs are
// created: its leader starts its maintenance services one after another, each after a random
// stagger of up to 1 s, the job scheduler third and the periodic job enqueuer fourth.
const riverSettle = 5 * time.Second

// riverTimers is workload A: jobs inserted with ScheduledAt into a running client's table.
func riverTimers(ctx context.Context, pool *pgxpool.Pool, pg *pgProcess, cfg workloadConfig) (metrics, string, error) {
	n := cfg.timers
	rec, book := newLatenessRecorder[int](), &timerBook{}
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(_ context.Context, job *river.Job[timerArgs]) error {
		started := time.Now()
		if due, ok := book.get(job.Args.I); ok {
			rec.record(job.Args.I, due, started)
		}
		return nil
	}))
	c, err := newRiverClient(pool, workers, cfg.handlers)
	if err != nil {
		return nil, "", err
	}
	mem := sampleMemory(pg.pids)
	defer mem.stop()
	if err := c.Start(ctx); err != nil {
		return nil, "", err
	}
	err = sleep(ctx, riverSettle)
	created := time.Now()
	due := timerDueInstants(created, cfg)
	book.set(due)
	params := make([]river.InsertManyParams, 0, riverInsertBatch)
	for i := 0; i < n && err == nil; i++ {
		params = append(params, river.InsertManyParams{Args: timerArgs{I: i}, InsertOpts: &river.InsertOpts{ScheduledAt: due[i]}})
		if len(params) == riverInsertBatch || i == n-1 {
			if _, err = c.InsertManyFast(ctx, params); err != nil {
				err = fmt.Errorf("insert timers: %w", err)
			}
			params = params[:0]
		}
	}
	creation := time.Since(created)
	if err == nil {
		rec.waitHandled(indexes(n), due[n-1].Add(cfg.grace), ctx.Done())
	}
	if err := errors.Join(err, stopRiver(c), ctx.Err()); err != nil {
		return nil, "", err
	}
	sum := rec.summary(indexes(n))
	return sum.metrics("A"), timersNote(sum, n, created, creation, due[0], mem.stop()), nil
}

// riverConsume is workload B: jobs inserted already due by producers in a closed loop and
// worked by handlers returning nil.
func riverConsume(ctx context.Context, pool *pgxpool.Pool, pg *pgProcess, cfg workloadConfig) (metrics, string, error) {
	loop := newClosedLoop(cfg.backlog, riverEnqueueBatch)
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(_ context.Context, job *river.Job[consumeArgs]) error {
		loop.completed(job.Args.Seq)
		return nil
	}))
	c, err := newRiverClient(pool, workers, cfg.handlers)
	if err != nil {
		return nil, "", err
	}
	if err := c.Start(ctx); err != nil {
		return nil, "", err
	}
	mem := sampleMemory(pg.pids)
	var producers sync.WaitGroup
	produceErrs := make(chan error, riverProducers)
	for range riverProducers {
		producers.Go(func() {
			params := make([]river.InsertManyParams, riverEnqueueBatch)
			for {
				first, ok := loop.reserve()
				if !ok {
					return
				}
				for i := range params {
					params[i] = river.InsertManyParams{Args: consumeArgs{Seq: first + int64(i)}}
				}
				// Each call runs to its end (no ctx), so that what was enqueued is known.
				callCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
				inserted, err := c.InsertManyFast(callCtx, params)
				cancel()
				loop.enqueued(inserted)
				if err != nil {
					produceErrs <- fmt.Errorf("insert: %w", err)
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
	serr := stopRiver(c)
	if err := errors.Join(err, <-produceErrs, serr); err != nil {
		return nil, "", err
	}
	handled, dup := loop.handledAndDuplicates()
	var completed int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&completed); err != nil {
		return nil, "", err
	}
	durability := "every handled job's completion is durable"
	if completed != handled {
		durability = fmt.Sprintf("COMPLETIONS NOT DURABLE: %d completed rows, %d jobs handled", completed, handled)
	}
	return metrics{"B.rate": rate, "B.mem": peak},
		fmt.Sprintf("%s completions/s, server peak PSS %s MiB; %d duplicates, backlog max %d; %s",
			num(rate, 0), num(peak, 0), dup, loop.maxBacklog.Load(), durability), nil
}

// alignedEvery is a river.PeriodicSchedule firing at first + k·interval, k ≥ 0: after its
// first run the same as river.PeriodicInterval(interval), but on a phase the caller chooses
// (see the package doc).
type alignedEvery struct {
	first    time.Time
	interval time.Duration
}

// Next returns the first instant first + k·interval strictly after t, and first itself when t
// is before it.
func (s alignedEvery) Next(t time.Time) time.Time {
	if t.Before(s.first) {
		return s.first
	}
	return s.first.Add((t.Sub(s.first)/s.interval + 1) * s.interval)
}

// riverBurst is workload C: periodic jobs every second, all on the same whole second, added to
// a running client.
func riverBurst(ctx context.Context, pool *pgxpool.Pool, pg *pgProcess, cfg workloadConfig) (metrics, string, error) {
	n := cfg.schedules
	rec := newLatenessRecorder[occurrence]()
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(_ context.Context, job *river.Job[burstArgs]) error {
		started := time.Now()
		rec.record(occurrence{job.Args.Schedule, job.ScheduledAt.UnixMicro()}, job.ScheduledAt, started)
		return nil
	}))
	c, err := newRiverClient(pool, workers, cfg.handlers)
	if err != nil {
		return nil, "", err
	}
	mem := sampleMemory(pg.pids)
	defer mem.stop()
	if err := c.Start(ctx); err != nil {
		return nil, "", err
	}
	err = sleep(ctx, riverSettle)
	created := time.Now()
	base := created.Add(cfg.lead).Truncate(time.Second)
	periodic := make([]*river.PeriodicJob, n)
	for i := range periodic {
		periodic[i] = river.NewPeriodicJob(alignedEvery{first: base, interval: time.Second},
			func() (river.JobArgs, *river.InsertOpts) { return burstArgs{Schedule: i}, nil }, nil)
	}
	if err == nil {
		_, err = c.PeriodicJobs().AddManySafely(periodic)
	}
	creation := time.Since(created)
	expected := expectedOccurrences(n, cfg.seconds, base)
	if err == nil {
		end := base.Add(time.Duration(cfg.seconds) * time.Second)
		rec.waitHandled(expected, end.Add(cfg.grace), ctx.Done())
	}
	if err := errors.Join(err, stopRiver(c), ctx.Err()); err != nil {
		return nil, "", err
	}
	sum := rec.summary(expected)
	return sum.metrics("C"), burstNote(sum, n, created, creation, base, mem.stop()), nil
}
