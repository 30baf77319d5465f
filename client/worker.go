package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

// Worker defaults.
const (
	DefaultWorkerConcurrency   = 8
	DefaultWorkerLeaseDuration = 30 * time.Second
	DefaultWorkerWait          = 20 * time.Second
	DefaultWorkerSettleTimeout = 10 * time.Second
	// DefaultWorkerMaxPerReceive caps the default MaxPerReceive at the partition's default
	// Limits.MaxReceivePerCommand.
	DefaultWorkerMaxPerReceive = 256
	// DefaultWorkerMaxUnsettled is the default WorkerConfig.MaxUnsettled: enough messages for
	// the acks of a busy worker to batch while its handlers keep running.
	DefaultWorkerMaxUnsettled = 4096
)

// Handler processes one message. Returning nil acks it; returning an error (or panicking)
// releases it for redelivery. ctx is cancelled when the worker stops or the message's lease is
// lost; a lease lost to a CancelMessage is lost at the next extension, and context.Cause(ctx)
// is then that extension's error (TokenInvalidated, naming who cancelled the message).
type Handler func(ctx context.Context, m *Message) error

// WorkerConfig configures a Worker. Namespace is required, and at least one queue: Queue with
// its Handler here, or more with Worker.Handle and Handle. The settings below are every
// queue's, unless its HandlerOptions say otherwise.
type WorkerConfig struct {
	// Namespace is the namespace of the worker's queues.
	Namespace string
	// Queue names a queue to consume (a dead-letter queue "<queue>$dlq" may be consumed too),
	// with Handler. Optional when the worker's queues are added with Worker.Handle.
	Queue string
	// Handler processes each message of Queue.
	Handler Handler
	// Concurrency bounds the handlers of each queue running at once, across all partitions
	// (default 8). A handler's slot is freed when it returns, before its ack or release is
	// durable (see MaxUnsettled).
	Concurrency int
	// MaxUnsettled bounds the messages whose handler has returned and whose ack or release is
	// not yet durable (acks are batched per partition, one command in flight at a time):
	// beyond it a handler that returned keeps its slot until one is settled. Default
	// DefaultWorkerMaxUnsettled, or Concurrency + Prefetch when that is more. A process that
	// dies loses its unsettled acks: those messages are delivered again once their leases
	// expire, as a message whose handler was running would be.
	MaxUnsettled int
	// LeaseDuration is each delivery's lease (default 30 s; the partition accepts 1 s..10 min).
	// The worker extends it at half its duration while the handler runs.
	LeaseDuration time.Duration
	// Wait bounds each long-poll receive (default 20 s): an idle worker sends one receive per
	// partition per Wait.
	Wait time.Duration
	// MaxPerReceive bounds the messages one receive asks for (default Concurrency + Prefetch,
	// at most DefaultWorkerMaxPerReceive: the partition's limit, 256 by default, refuses more).
	MaxPerReceive int
	// Prefetch is how many messages beyond the free handler slots the receives of a busy
	// queue may ask for, shared among the partitions fetching (default Concurrency; -1: none).
	// A prefetched message waits for a slot with its lease extended, and holds back its
	// partition's next receive until it has one: a burst drains in fewer receives.
	Prefetch int
	// Owner is recorded in every lease (default "<hostname>/<pid>").
	Owner string
	// ReleaseDelay is how long a message whose handler failed stays invisible (default 0), unless
	// Backoff is set, or a retry policy is in force (see Retry).
	ReleaseDelay time.Duration
	// Backoff, when set, decides how long a message whose handler failed stays invisible, from
	// its delivery count (1 at the first delivery), instead of ReleaseDelay: see
	// ExponentialBackoff. The partition counts deliveries, so the delay grows across workers
	// and restarts; MaxDeliveries (on enqueue or the template) still bounds the attempts.
	Backoff func(delivery int) time.Duration
	// Retry, when set, is the handlers' own retry policy (apply version 19), which wins over the
	// message's and its queue's. Whenever a policy is in force the partition decides a failed
	// message's delay (its backoff) and its end (dead-letter or drop once MaxAttempts are used
	// up), and ReleaseDelay and Backoff apply only to messages without one. A handler's error
	// is kept on its message (Message.LastError), and a RetryAfter error sets the delay itself.
	// Against a partition below apply version 19 the worker releases as before.
	Retry *MessageRetry
	// SettleTimeout bounds each ack, release and lease extension, which outlive Run's context
	// so that a stopping worker still settles what it finished, and how much longer a receive
	// that leases may take once Run's context has ended (what it leases is then released;
	// default 10 s).
	SettleTimeout time.Duration
	// UnreachableTimeout, when positive, is how long a partition's receives may keep failing
	// with retriable errors (the cluster unreachable, the partition's silo gone) before Run
	// stops and returns an Unavailable error naming the partition. By default (zero or
	// negative) a worker waits for its cluster for as long as Run runs. Meanwhile Status
	// reports the failing partitions, and the client's logger has one WARN line when a
	// partition's receives start failing and one INFO line when it is reachable again.
	UnreachableTimeout time.Duration
	// Metrics, when set, receives the worker's series, labelled with its namespace and queue:
	// orrery_worker_handler_start_lateness_seconds, a histogram of each handler's start minus
	// its message's enqueue time (the partition leader's logged time, so the two clocks' skew
	// is in it), and orrery_worker_handled_total{outcome="ok"|"error"}. Workers of the same
	// queue registered with the same Registerer share the series. Default: none.
	Metrics prometheus.Registerer
}

// Worker consumes its queues across all partitions of the cluster; see Run.
type Worker struct {
	c    *Client
	cfg  WorkerConfig // the worker's settings, the defaults of its queues
	mu   sync.Mutex
	regs []registration // its queues, in the order they were added
	// regErr is the first error of a registration (a queue added twice, its metrics); Run
	// returns it.
	regErr  error
	running atomic.Bool
	current atomic.Pointer[[]*run] // each queue's run while Run runs, nil otherwise
}

// registration is one queue of a worker: its settings (WorkerConfig with the queue's
// HandlerOptions applied) and its metrics.
type registration struct {
	cfg     WorkerConfig
	metrics *workerMetrics // nil without WorkerConfig.Metrics
}

// HandlerOptions are one queue's settings on a worker (Worker.Handle, Handle). A zero field
// takes the WorkerConfig's.
type HandlerOptions struct {
	// Concurrency bounds this queue's handlers running at once.
	Concurrency int
	// LeaseDuration is each delivery's lease; the worker extends it at half its duration while
	// the handler runs.
	LeaseDuration time.Duration
	// Prefetch is how many messages beyond this queue's free handler slots its receives may ask
	// for (-1: none).
	Prefetch int
	// ReleaseDelay is how long a message whose handler failed stays invisible, unless Backoff is
	// set.
	ReleaseDelay time.Duration
	// Backoff decides how long a message whose handler failed stays invisible from its delivery
	// count (see ExponentialBackoff).
	Backoff func(delivery int) time.Duration
	// Retry is this queue's handler's own retry policy (see WorkerConfig.Retry).
	Retry *MessageRetry
}

// ExponentialBackoff is a WorkerConfig.Backoff (or HandlerOptions.Backoff) that keeps a
// failed message invisible for first after its first delivery, twice that after its second,
// and so on up to limit, each delay less a random part of up to a fifth, so that messages that
// failed together do not all come back together. first and limit must be positive.
func ExponentialBackoff(first, limit time.Duration) func(delivery int) time.Duration {
	return func(delivery int) time.Duration {
		d := first
		for i := 1; i < delivery && d < limit; i++ {
			d *= 2
		}
		d = min(d, limit)
		return d - time.Duration(rand.Int64N(int64(d)/5+1))
	}
}

// WorkerStatus is what Worker.Status reports.
type WorkerStatus struct {
	// Running is set while Run runs.
	Running bool
	// Failing lists the partitions whose receives have been failing, oldest failure first.
	Failing []PartitionFailure
}

// PartitionFailure is a partition whose receives of a queue keep failing with retriable
// errors.
type PartitionFailure struct {
	Queue     string
	Partition int
	// Since is when the first receive of the current run of failures failed.
	Since time.Time
	// Err is the last receive's error.
	Err error
}

// Status reports whether the worker runs and which partitions it cannot reach, per queue. A
// partition leaves Failing at its next successful receive.
func (w *Worker) Status() WorkerStatus {
	runs := w.current.Load()
	if runs == nil {
		return WorkerStatus{}
	}
	status := WorkerStatus{Running: true}
	for _, r := range *runs {
		r.healthMu.Lock()
		for _, f := range r.failing {
			status.Failing = append(status.Failing, f)
		}
		r.healthMu.Unlock()
	}
	slices.SortFunc(status.Failing, func(a, b PartitionFailure) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		if c := strings.Compare(a.Queue, b.Queue); c != 0 {
			return c
		}
		return a.Partition - b.Partition
	})
	return status
}

// NewWorker returns a worker for cfg, consuming cfg.Queue when it is set; the configuration is
// checked when Run starts.
func (c *Client) NewWorker(cfg WorkerConfig) *Worker {
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultWorkerConcurrency
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = DefaultWorkerLeaseDuration
	}
	if cfg.Wait == 0 {
		cfg.Wait = DefaultWorkerWait
	}
	if cfg.SettleTimeout == 0 {
		cfg.SettleTimeout = DefaultWorkerSettleTimeout
	}
	if cfg.Owner == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "worker"
		}
		cfg.Owner = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	w := &Worker{c: c, cfg: cfg}
	if cfg.Queue != "" || cfg.Handler != nil {
		w.Handle(cfg.Queue, cfg.Handler, HandlerOptions{})
	}
	return w
}

// Handle adds queue to the worker's queues, its messages processed by h with the worker's
// settings overridden by o's non-zero fields. Add queues before Run; a queue added twice, or
// while the worker runs, makes Run fail (Validation).
func (w *Worker) Handle(queue string, h Handler, o HandlerOptions) {
	cfg := w.cfg
	cfg.Queue, cfg.Handler = queue, h
	if o.Concurrency != 0 {
		cfg.Concurrency = o.Concurrency
	}
	if o.LeaseDuration != 0 {
		cfg.LeaseDuration = o.LeaseDuration
	}
	if o.Prefetch != 0 {
		cfg.Prefetch = o.Prefetch
	}
	if o.ReleaseDelay != 0 {
		cfg.ReleaseDelay = o.ReleaseDelay
	}
	if o.Backoff != nil {
		cfg.Backoff = o.Backoff
	}
	if o.Retry != nil {
		cfg.Retry = o.Retry
	}
	if cfg.Prefetch == 0 {
		cfg.Prefetch = cfg.Concurrency
	}
	if w.cfg.MaxPerReceive == 0 {
		cfg.MaxPerReceive = min(cfg.Concurrency+max(cfg.Prefetch, 0), DefaultWorkerMaxPerReceive)
	}
	if w.cfg.MaxUnsettled == 0 {
		cfg.MaxUnsettled = max(DefaultWorkerMaxUnsettled, cfg.Concurrency+max(cfg.Prefetch, 0))
	}
	reg := registration{cfg: cfg}
	var err error
	if cfg.Metrics != nil {
		reg.metrics, err = newWorkerMetrics(cfg.Metrics, cfg.Namespace, cfg.Queue)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.running.Load():
		err = orrery.Invalid("queue", "%q added while the worker runs: add queues before Run", queue)
	case slices.ContainsFunc(w.regs, func(r registration) bool { return r.cfg.Queue == queue }):
		err = orrery.Invalid("queue", "%q is handled twice by one worker", queue)
	}
	if err != nil {
		if w.regErr == nil {
			w.regErr = err
		}
		return
	}
	w.regs = append(w.regs, reg)
}

// Handle adds queue to w's queues, each message's JSON payload decoded into a T for h (see
// JSONHandler), with the worker's settings overridden by the non-zero fields of o (at most
// one).
func Handle[T any](w *Worker, queue string, h func(ctx context.Context, j *Job[T]) error, o ...HandlerOptions) {
	var opts HandlerOptions
	if len(o) > 0 {
		opts = o[0]
	}
	w.Handle(queue, JSONHandler(h), opts)
}

func (cfg WorkerConfig) validate() error {
	if cfg.Handler == nil {
		return orrery.Invalid("handler", "is required (queue %q)", cfg.Queue)
	}
	if err := input.Name("namespace", cfg.Namespace, input.MaxNamespaceBytes); err != nil {
		return err
	}
	if err := input.QueueName("queue", cfg.Queue, true); err != nil {
		return err
	}
	switch {
	case cfg.Concurrency < 0:
		return orrery.Invalid("concurrency", "must not be negative, got %d", cfg.Concurrency)
	case cfg.LeaseDuration < 0:
		return orrery.Invalid("lease_duration", "must not be negative, got %s", cfg.LeaseDuration)
	case cfg.Wait < 0:
		return orrery.Invalid("wait", "must not be negative, got %s", cfg.Wait)
	case cfg.MaxPerReceive < 0:
		return orrery.Invalid("max_per_receive", "must not be negative, got %d", cfg.MaxPerReceive)
	case cfg.MaxUnsettled < 0:
		return orrery.Invalid("max_unsettled", "must not be negative, got %d", cfg.MaxUnsettled)
	case cfg.Prefetch < -1:
		return orrery.Invalid("prefetch", "must be at least -1 (none), got %d", cfg.Prefetch)
	case cfg.ReleaseDelay < 0:
		return orrery.Invalid("release_delay", "must not be negative, got %s", cfg.ReleaseDelay)
	case cfg.SettleTimeout < 0:
		return orrery.Invalid("settle_timeout", "must not be negative, got %s", cfg.SettleTimeout)
	}
	return cfg.Retry.check("retry")
}

// Run consumes the worker's queues until ctx ends, then stops: no new receive is sent, the
// handlers' contexts are cancelled, and Run returns once every handler has returned and its
// message is settled. A stopping worker leases nothing it does not release: a waiting receive
// parked on a partition is abandoned, and a receive that leases, in flight as it stops, is
// waited for; what either leased is released (at most SettleTimeout, see Client.Receive). A
// process that dies leaves the leases of its messages to expire (LeaseDuration).
//
// It returns nil after a stop by ctx, and an error when the configuration is invalid, a receive
// fails for a reason retrying cannot cure (Validation, Unauthorized, ...), or a partition's
// receives have kept failing for UnreachableTimeout (Unavailable); an error of one queue stops
// them all. Retriable failures are retried with the client's backoff: a client that rejoins a
// restarted cluster resumes consuming by itself.
//
// Each queue is consumed on its own, with its own handler slots (Concurrency), as follows.
// Each partition has one poller with at most one outstanding receive. An idle partition's
// poller sends a waiting (long-poll) receive for its share of Concurrency + Prefetch, which
// leases on the partition as soon as a message is visible; once it gets one and the partition
// reports more visible, it switches to fetching: it takes free handler slots — at least one,
// waiting for it if need be, at most MaxPerReceive and a fair share of Concurrency among the
// fetching partitions — and asks for that many messages plus its share of Prefetch (within
// MaxPerReceive), without waiting. The messages beyond its slots wait for free slots, their
// leases extended, before the partition's next receive. When a fetch comes back short or
// reports none left, the partition is idle again (so a partition that gets one message at a
// time costs one receive per message, not two). Slots are handed out first come, first served.
// So at most Concurrency handlers run, and beyond them each partition holds at most the
// messages of its waiting receive or the prefetched messages of its last fetch (about Prefetch
// in all). After a failed receive, a partition's next receives do not wait until one succeeds,
// so Status shows it reachable again as soon as it is.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return orrery.Errorf(orrery.CodeValidation, "worker for namespace %s is already running", w.cfg.Namespace)
	}
	defer w.running.Store(false)
	w.mu.Lock()
	regs, regErr := slices.Clone(w.regs), w.regErr
	w.mu.Unlock()
	if regErr != nil {
		return regErr
	}
	if len(regs) == 0 {
		return orrery.Invalid("queue", "the worker has no queue: set WorkerConfig.Queue and Handler, or add queues with Handle")
	}
	for _, reg := range regs {
		if err := reg.cfg.validate(); err != nil {
			return err
		}
	}
	partitions := w.c.Partitions()
	if partitions <= 0 {
		return orrery.Errorf(orrery.CodeUnavailable, "transport reports %d partitions", partitions)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	runs := make([]*run, len(regs))
	for i, reg := range regs {
		runs[i] = &run{w: w, cfg: reg.cfg, metrics: reg.metrics, ctx: runCtx, slots: make(chan struct{}, reg.cfg.Concurrency),
			settling: make(chan struct{}, reg.cfg.MaxUnsettled), ackers: newAckers(w.c, reg.cfg.SettleTimeout),
			failing: map[int]PartitionFailure{}}
		runs[i].putSlots(reg.cfg.Concurrency)
	}
	w.current.Store(&runs)
	defer w.current.Store(nil)
	var (
		pollers   sync.WaitGroup
		fatalOnce sync.Once
		fatal     error
	)
	for _, r := range runs {
		for p := range partitions {
			pollers.Go(func() {
				if err := r.poll(p); err != nil {
					fatalOnce.Do(func() { fatal = err })
					cancel()
				}
			})
		}
	}
	pollers.Wait()
	for _, r := range runs {
		r.deliveries.Wait()
	}
	return fatal
}

// run is the state of one queue's consumption in a Run.
type run struct {
	w          *Worker
	cfg        WorkerConfig   // the queue's settings
	metrics    *workerMetrics // nil without WorkerConfig.Metrics
	ctx        context.Context
	slots      chan struct{} // one token per free handler slot
	settling   chan struct{} // one token per message waiting for its ack or release
	ackers     []*acker      // one per partition: batched acks
	fetching   atomic.Int64  // partitions currently fetching
	deliveries sync.WaitGroup

	healthMu sync.Mutex
	failing  map[int]PartitionFailure // partitions whose receives are failing, by partition
	// outageSince is when the first of the failing partitions failed (zero: none fails), and
	// outageWarned whether this outage was logged at WARN (once it lasted unreachableWarnAfter).
	outageSince  time.Time
	outageWarned bool
}

// unreachableWarnAfter is how long partitions may stay unreachable before the worker logs it at
// WARN: a silo restart or a leader election is over well before, and its lines are INFO.
const unreachableWarnAfter = 30 * time.Second

// poll is partition's poller: it returns nil when the run stops and an error when a receive
// fails for good.
func (r *run) poll(partition int) error {
	fetching := false
	defer func() {
		if fetching {
			r.fetching.Add(-1)
		}
	}()
	var health partitionHealth
	for r.ctx.Err() == nil {
		if !fetching {
			sent := r.now()
			msgs, more, err := r.receive(partition, r.idleShare(), r.cfg.Wait, &health)
			answered := r.now()
			if err != nil {
				if err := r.receiveFailed(partition, err, &health); err != nil {
					return err
				}
				continue
			}
			r.received(partition, &health)
			if !r.startAll(partition, msgs, 0, sent, answered) {
				return nil
			}
			if len(msgs) > 0 && more {
				fetching = true
				r.fetching.Add(1)
			}
			continue
		}
		n, ok := r.acquire()
		if !ok {
			return nil
		}
		asked := n + r.prefetchShare(n)
		sent := r.now()
		msgs, more, err := r.receive(partition, asked, 0, &health)
		answered := r.now()
		if err != nil {
			r.putSlots(n)
			if err := r.receiveFailed(partition, err, &health); err != nil {
				return err
			}
			continue
		}
		r.received(partition, &health)
		r.putSlots(max(n-len(msgs), 0))
		if !r.startAll(partition, msgs, n, sent, answered) { // beyond n: prefetched
			return nil
		}
		if len(msgs) < asked || !more {
			fetching = false
			r.fetching.Add(-1)
		}
	}
	return nil
}

// receive asks partition for up to maxMessages, waiting up to wait for the first; more reports
// that visible messages remained beyond those returned. A receive that leases is not cut short
// when the run stops: it gets up to SettleTimeout more, and what it leased is released (see
// Client.Receive). The client retries failed attempts for as long as the run lasts; once they
// have failed for UnreachableTimeout the receive gives up with an unreachableError.
func (r *run) receive(partition, maxMessages int, wait time.Duration, health *partitionHealth) (msgs []*orreryv1.QueueMessage, more bool, err error) {
	ctx, giveUp := context.WithCancelCause(r.ctx)
	defer giveUp(nil)
	observe := withRetryObserver(func(err error) {
		if unreachable := r.attemptFailed(partition, err, health); unreachable != nil {
			giveUp(unreachable)
		}
	})
	res, err := r.w.c.receive(ctx, partition, &orreryv1.Receive{
		Namespace:           r.cfg.Namespace,
		Queue:               r.cfg.Queue,
		Max:                 uint32(maxMessages),
		LeaseDurationMicros: r.cfg.LeaseDuration.Microseconds(),
		Owner:               r.cfg.Owner,
	}, wait, r.cfg.SettleTimeout, observe, withShortRetries())
	var unreachable *unreachableError
	if err != nil && r.ctx.Err() == nil && errors.As(context.Cause(ctx), &unreachable) {
		return nil, false, unreachable
	}
	return res.GetMessages(), res.GetMore(), err
}

// partitionHealth is a poller's view of its partition's reachability.
type partitionHealth struct {
	failures int       // failed receives in a row (the backoff of receiveFailed)
	since    time.Time // the first failed attempt of the current run of failures; zero: healthy
}

// unreachableError is how a receive gives up once its attempts have failed for
// UnreachableTimeout; it stops the run.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// attemptFailed records a failed receive attempt of partition and returns an unreachableError
// once its attempts have failed for UnreachableTimeout.
func (r *run) attemptFailed(partition int, err error, health *partitionHealth) *unreachableError {
	now := r.now()
	if health.since.IsZero() {
		health.since = now
		r.w.c.log.Debug("orrery worker: partition unreachable, retrying", "partition", partition, "err", err)
	}
	r.healthMu.Lock()
	r.failing[partition] = PartitionFailure{Queue: r.cfg.Queue, Partition: partition, Since: health.since, Err: err}
	r.logOutage(now, partition, err)
	r.healthMu.Unlock()
	bound := r.cfg.UnreachableTimeout
	if bound <= 0 || now.Sub(health.since) < bound {
		return nil
	}
	r.w.c.log.Error("orrery worker: partition unreachable, stopping", "namespace", r.cfg.Namespace, "queue", r.cfg.Queue,
		"partition", partition, "since", health.since, "err", err)
	return &unreachableError{orrery.Wrap(orrery.CodeUnavailable, err, "worker %s/%s: every receive attempt on partition %d failed for %v",
		r.cfg.Namespace, r.cfg.Queue, partition, now.Sub(health.since).Round(time.Millisecond))}
}

// receiveFailed decides what a failed receive means: nil to go on (the run is stopping, or the
// failure is retriable: it backs off first), or the error that stops the run (not retriable,
// or the partition unreachable for UnreachableTimeout).
func (r *run) receiveFailed(partition int, err error, health *partitionHealth) error {
	if r.ctx.Err() != nil {
		return nil
	}
	var unreachable *unreachableError
	if errors.As(err, &unreachable) {
		return unreachable.err
	}
	if !orrery.Retriable(orrery.CodeOf(err)) {
		r.w.c.log.Error("orrery worker: receive failed, stopping", "namespace", r.cfg.Namespace, "queue", r.cfg.Queue, "partition", partition, "err", err)
		return err
	}
	if unreachable := r.attemptFailed(partition, err, health); unreachable != nil {
		return unreachable.err
	}
	r.w.c.log.Debug("orrery worker: receive failed, backing off", "partition", partition, "err", err)
	backedOff, timer := r.w.c.after(r.w.c.retry.Delay(health.failures, r.w.c.retry.Jitter()))
	defer timer.Stop()
	health.failures++
	select {
	case <-r.ctx.Done():
	case <-backedOff:
	}
	return nil
}

// logOutage logs the worker's outage as a whole, one line per change of state: INFO when a
// first partition becomes unreachable, WARN once it has lasted unreachableWarnAfter (the lines
// of each partition are DEBUG). The caller holds healthMu and has just recorded partition's
// failure.
func (r *run) logOutage(now time.Time, partition int, err error) {
	if r.outageSince.IsZero() {
		r.outageSince = now
		r.w.c.log.Info("orrery worker: cluster unreachable, retrying", "namespace", r.cfg.Namespace, "queue", r.cfg.Queue,
			"partition", partition, "err", err)
	}
	if !r.outageWarned && now.Sub(r.outageSince) >= unreachableWarnAfter {
		r.outageWarned = true
		r.w.c.log.Warn("orrery worker: partitions unreachable, still retrying", "namespace", r.cfg.Namespace, "queue", r.cfg.Queue,
			"partitions", len(r.failing), "for", now.Sub(r.outageSince).Round(time.Second), "err", err)
	}
}

// received records a successful receive of partition: it is reachable. When it was the last
// failing one, the outage is over (one INFO line).
func (r *run) received(partition int, health *partitionHealth) {
	if health.since.IsZero() && health.failures == 0 {
		return
	}
	now := r.now()
	if !health.since.IsZero() {
		r.w.c.log.Debug("orrery worker: partition reachable again", "partition", partition, "after", now.Sub(health.since).Round(time.Millisecond))
	}
	*health = partitionHealth{}
	r.healthMu.Lock()
	defer r.healthMu.Unlock()
	delete(r.failing, partition)
	if len(r.failing) == 0 && !r.outageSince.IsZero() {
		r.w.c.log.Info("orrery worker: cluster reachable again", "namespace", r.cfg.Namespace, "queue", r.cfg.Queue,
			"after", now.Sub(r.outageSince).Round(time.Millisecond))
		r.outageSince, r.outageWarned = time.Time{}, false
	}
}

// acquire takes at least one free slot (waiting for it) and then, without waiting, up to
// MaxPerReceive and a fair share of Concurrency among the fetching partitions. It reports
// false when the run stops first.
func (r *run) acquire() (int, bool) {
	select {
	case <-r.slots:
	case <-r.ctx.Done():
		return 0, false
	}
	fetching := int(max(r.fetching.Load(), 1))
	share := (r.cfg.Concurrency + fetching - 1) / fetching
	limit := min(r.cfg.MaxPerReceive, share)
	n := 1
	for n < limit {
		select {
		case <-r.slots:
			n++
		default:
			return n, true
		}
	}
	return n, true
}

// startAll starts the handlers of msgs, received by a request sent at sent and answered at
// answered: the first held on slots the caller holds, each of the rest on a slot it waits for,
// its lease extended meanwhile. It reports false when the run stopped first; the messages
// still without a slot are then released.
func (r *run) startAll(partition int, msgs []*orreryv1.QueueMessage, held int, sent, answered time.Time) bool {
	for i, qm := range msgs {
		d := r.newDelivery(partition, qm, sent, answered)
		if i < held {
			r.start(d)
			continue
		}
		switch r.waitSlot(d) {
		case slotAcquired:
			r.start(d)
		case slotStopping:
			r.abandon(partition, msgs[i:])
			return false
		case slotLeaseLost: // no longer ours: drop it
		}
	}
	return true
}

// idleShare is how many messages an idle partition's long poll asks for: its share of
// Concurrency + Prefetch among all the partitions (at least 1, within MaxPerReceive), so that
// a burst landing on idle partitions is leased by their waiting receives at once rather than by
// fetches after them. What it leases beyond the free slots waits for one, as a prefetched
// message does.
func (r *run) idleShare() int {
	partitions := max(r.w.c.Partitions(), 1)
	return max(min((r.cfg.Concurrency+max(r.cfg.Prefetch, 0)+partitions-1)/partitions, r.cfg.MaxPerReceive), 1)
}

// prefetchShare is how many messages a fetch holding n slots may ask for beyond them: its
// share of Prefetch among the fetching partitions, within MaxPerReceive.
func (r *run) prefetchShare(n int) int {
	if r.cfg.Prefetch <= 0 {
		return 0
	}
	fetching := int(max(r.fetching.Load(), 1))
	return max(min((r.cfg.Prefetch+fetching-1)/fetching, r.cfg.MaxPerReceive-n), 0)
}

func (r *run) putSlots(n int) {
	for range n {
		r.slots <- struct{}{}
	}
}

// now is the time on the client's clock.
func (r *run) now() time.Time { return r.w.c.clock.Now() }
