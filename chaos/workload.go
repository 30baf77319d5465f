package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/route"
)

// A workload is a run's load on the cluster, through one client, in one namespace: Every-1s
// schedules (some paused and resumed now and then, some cancelled early) and At timers created
// all along, in a queue a worker consumes, receiving and acking every message (releasing one
// in fifty); a probe per partition that enqueues a message every second (and measures how long
// the partition went without a successful enqueue), alternately into that queue and into
// leaseQueue, whose consumers never ack one message in three they receive, so that its lease
// expires and it is delivered again; sagas (runSagas) whose timeouts go to the worker's queue.
// Every delivery, every saga call and every replayed command is recorded. Each schedule, each
// timer and each saga is alone in its lane.
type workload struct {
	c          *client.Client
	namespace  string
	queue      string
	partitions int
	log        *deliveryLog
	logf       func(format string, args ...any)

	mu          sync.Mutex
	schedules   []tickSchedule
	crons       []tickSchedule // cron schedules in cronZone, every 2 s in cronHours (first unused)
	cronHours   cronHours
	churn       map[string]bool // lane key → paused and resumed now and then
	replaced    map[string]bool // lane key → replaced and triggered now and then (runReplaces)
	generations map[string][]generationSpan
	triggers    map[string]int
	pausedEver  map[string]bool // lane key → a pause was sent
	cancelling  map[string]time.Time
	early       map[string]bool // lane key → cancelled during the faults
	next        map[string]uint64
	cancelledAt map[string]time.Time
	excused     map[string]map[uint64]bool
	timers      []timer
	unconfirmed int // timers whose creation did not return success
	enqueued    map[string]string
	longestGap  []time.Duration // per partition: longest time between successful probe enqueues
	lastProbeOK []time.Time
	sagaRuns    []*sagaRun
	sagas       *sagaLog
	// scheduleCalls are the schedule calls at an expected revision and the reads of a
	// schedule's revision (schedulehistory.go).
	scheduleCalls *scheduleLog

	ops       atomic.Int64
	opsFailed atomic.Int64
	handled   atomic.Int64 // the worker's deliveries, so that one in fifty is released

	loadStop      context.CancelFunc
	loadDone      sync.WaitGroup
	workerStop    context.CancelFunc
	workerErr     chan error
	consumersDone sync.WaitGroup
}

// leaseQueue is the queue whose consumers leave one message in three unacked.
const leaseQueue = "leases"

// leaseDuration is the lease of leaseQueue's receives.
const leaseDuration = 2 * time.Second

// workloadTickers is how many Every-1s schedules a workload runs per partition.
const workloadTickers = 2

// probeEvery is how often each partition's probe enqueues a message.
const probeEvery = time.Second

// callTimeout bounds each call of the workload (the client retries within it).
const callTimeout = 5 * time.Second

// startWorkload configures the schedules (each retried until it succeeds, within 60 s) and
// starts the worker; startLoad starts the rest.
func startWorkload(ctx context.Context, c *client.Client, seed uint64, logf func(string, ...any)) (*workload, error) {
	w := &workload{c: c, namespace: fmt.Sprintf("chaos-%016x", seed)[:14] + "-" + uuid.NewString()[:8], queue: "work",
		partitions: c.Partitions(), log: &deliveryLog{}, sagas: &sagaLog{}, scheduleCalls: &scheduleLog{}, logf: logf,
		churn: map[string]bool{}, replaced: map[string]bool{}, generations: map[string][]generationSpan{}, triggers: map[string]int{}, pausedEver: map[string]bool{}, cancelling: map[string]time.Time{}, early: map[string]bool{},
		next: map[string]uint64{}, cancelledAt: map[string]time.Time{}, excused: map[string]map[uint64]bool{},
		enqueued: map[string]string{}}
	w.longestGap = make([]time.Duration, w.partitions)
	w.lastProbeOK = make([]time.Time, w.partitions)
	first := time.Now().Add(3 * time.Second).Truncate(time.Second)
	for p := range w.partitions {
		for k := range workloadTickers {
			lane := &orreryv1.Lane{Namespace: w.namespace, Queue: w.queue, Key: keyOn(w.namespace, "s-"+uuid.NewString(), p, w.partitions)}
			s := tickSchedule{lane: lane, id: uuid.NewString(), partition: p, first: first}
			def := &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: s.id, Spec: client.Every(time.Second, first),
				Template: &orreryv1.MessageTemplate{PayloadJson: `{"tick":true}`}}
			if err := w.create(ctx, def); err != nil {
				return nil, fmt.Errorf("configure a schedule on partition %d: %w", p, err)
			}
			w.schedules = append(w.schedules, s)
			switch {
			case k == 0 && p%2 == 0:
				w.churn[lane.GetKey()] = true
			case k == 1 && p%2 == 1:
				w.replaced[lane.GetKey()] = true
			}
		}
	}
	if err := w.configureCrons(ctx); err != nil {
		return nil, err
	}
	wk := c.NewWorker(client.WorkerConfig{Namespace: w.namespace, Queue: w.queue, Handler: w.handle,
		Concurrency: 16, LeaseDuration: 5 * time.Second, Wait: 2 * time.Second, UnreachableTimeout: -1})
	workerCtx, stop := context.WithCancel(ctx)
	w.workerStop, w.workerErr = stop, make(chan error, 1)
	go func() { w.workerErr <- wk.Run(workerCtx) }()
	for p := range w.partitions {
		rng := rand.New(rand.NewPCG(seed, uint64(100+p)))
		w.consumersDone.Go(func() { w.consumeLeases(workerCtx, p, rng) })
	}
	return w, nil
}

// configureCrons configures one cron schedule in cronZone per partition, due every 2 s in this
// hour of the zone and the one three hours later (cronHours), each alone in its lane, each
// retried until it succeeds within 60 s.
func (w *workload) configureCrons(ctx context.Context) error {
	zone, err := cronZoneLocation()
	if err != nil {
		return err
	}
	w.cronHours = cronHours{zone: zone, first: time.Now().In(zone).Hour()}
	for p := range w.partitions {
		lane := &orreryv1.Lane{Namespace: w.namespace, Queue: w.queue, Key: keyOn(w.namespace, "c-"+uuid.NewString(), p, w.partitions)}
		s := tickSchedule{lane: lane, id: uuid.NewString(), partition: p}
		def := &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: s.id, Template: &orreryv1.MessageTemplate{PayloadJson: `{"cron":true}`},
			Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Cron{Cron: &orreryv1.CronSpec{Expression: w.cronHours.expression(), TimeZone: cronZone}}}}
		if err := w.create(ctx, def); err != nil {
			return fmt.Errorf("configure a cron schedule on partition %d: %w", p, err)
		}
		w.crons = append(w.crons, s)
	}
	return nil
}

// keyOn is a lane key starting with prefix whose lane (of namespace) routes to partition.
func keyOn(namespace, prefix string, partition, partitions int) string {
	key := prefix
	for i := 0; route.PartitionOf(namespace, key, partitions) != partition; i++ {
		key = fmt.Sprintf("%s-%d", prefix, i)
	}
	return key
}

// handle records a delivery and acks it, or, one in fifty, releases it for redelivery.
func (w *workload) handle(ctx context.Context, m *client.Message) error {
	w.log.handle(ctx, m)
	if w.handled.Add(1)%50 == 0 {
		return errors.New("released by the chaos workload")
	}
	return nil
}

// untilDone calls call, each attempt within callTimeout, until it succeeds, fails for a reason
// a retry cannot change, or within has passed; each attempt counts as an op.
func (w *workload) untilDone(ctx context.Context, within time.Duration, call func(context.Context) error) error {
	deadline := time.Now().Add(within)
	for {
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		err := call(callCtx)
		cancel()
		w.ops.Add(1)
		if err == nil {
			return nil
		}
		w.opsFailed.Add(1)
		if !retriable(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// retriable reports whether another attempt of a call that failed with err may succeed.
func retriable(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || orrery.Retriable(orrery.CodeOf(err))
}

// startLoad starts the churn of schedules (runChurn and runPauses), the timers, the sagas and
// the probes, each with its own random source drawn from seed; stopLoad stops them.
func (w *workload) startLoad(ctx context.Context, seed uint64) {
	ctx, w.loadStop = context.WithCancel(ctx)
	for i, run := range []func(context.Context, *rand.Rand){w.runChurn, w.runTimers, w.runPauses, w.runReplaces} {
		rng := rand.New(rand.NewPCG(seed, uint64(i+1)))
		w.loadDone.Go(func() { run(ctx, rng) })
	}
	for i := range sagaRunners {
		rng := rand.New(rand.NewPCG(seed, uint64(10+i)))
		w.loadDone.Go(func() { w.runSagas(ctx, rng) })
	}
	for p := range w.partitions {
		w.loadDone.Go(func() { w.runProbe(ctx, p) })
	}
}

// stopLoad stops what startLoad started and waits for it.
func (w *workload) stopLoad() {
	if w.loadStop != nil {
		w.loadStop()
	}
	w.loadDone.Wait()
}

// sleep waits d or until ctx ends, reporting whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// between is a random duration in [low, high).
func between(rng *rand.Rand, low, high time.Duration) time.Duration {
	if high <= low {
		return low
	}
	return low + time.Duration(rng.Int64N(int64(high-low)))
}

// runChurn, every 2–6 s, pauses or resumes one of the churn schedules at the revision it reads
// (pauseOrResume) or (one time in six, while no more than a quarter are) cancels one of the
// others.
func (w *workload) runChurn(ctx context.Context, rng *rand.Rand) {
	var churn, others []tickSchedule
	for _, s := range w.schedules {
		switch key := s.lane.GetKey(); {
		case w.churn[key]:
			churn = append(churn, s)
		case !w.replaced[key]: // a replacement would configure a cancelled schedule again
			others = append(others, s)
		}
	}
	for sleep(ctx, between(rng, 2*time.Second, 6*time.Second)) {
		if rng.IntN(6) == 0 && len(others) > 0 && len(w.earlyCancelled()) < len(w.schedules)/4 {
			w.cancel(ctx, others[rng.IntN(len(others))], true) // nothing when cancelled before
			continue
		}
		if len(churn) > 0 {
			w.pauseOrResume(ctx, rng, churn[rng.IntN(len(churn))])
		}
	}
}

// earlyCancelled lists the lane keys of the schedules cancelled during the faults.
func (w *workload) earlyCancelled() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for key := range w.early {
		out = append(out, key)
	}
	return out
}

// cancel cancels s at the revision it reads, and reads it back, until a read finds it
// cancelled (within 90 s; untilRead), and keeps that read's next ordinal; cancelledAt is when
// the first attempt was sent. early marks a cancel during the faults. It reports whether a read
// found s cancelled.
func (w *workload) cancel(ctx context.Context, s tickSchedule, early bool) bool {
	key := s.lane.GetKey()
	w.mu.Lock()
	if _, ok := w.next[key]; ok {
		w.mu.Unlock()
		return true
	}
	if early {
		w.early[key] = true
	}
	if _, ok := w.cancelling[key]; !ok {
		w.cancelling[key] = time.Now()
	}
	w.mu.Unlock()
	rec := w.untilRead(ctx, s, 90*time.Second, (*orreryv1.ScheduleRecord).GetCancelled, scheduleCancel)
	if rec == nil {
		w.logf("workload: cancel schedule %s (partition %d) and read it back cancelled: not within 90 s", s.id, s.partition)
		return false
	}
	next := rec.GetNextOrdinal()
	w.mu.Lock()
	w.next[key], w.cancelledAt[key] = next, w.cancelling[key]
	w.mu.Unlock()
	return true
}

// runTimers, every 1–3 s, creates an At timer due 1–15 s later, alone in its lane, and one time
// in four replays the creation of an earlier timer the partition answered (by then it has
// usually fired, so applying it again would be refused: only the inbox gives the first
// receipt back).
func (w *workload) runTimers(ctx context.Context, rng *rand.Rand) {
	var answered []answeredCommand
	for sleep(ctx, between(rng, time.Second, 3*time.Second)) {
		if len(answered) > 0 && rng.IntN(4) == 0 {
			w.replay(ctx, answered[rng.IntN(len(answered))])
		}
		p := rng.IntN(w.partitions)
		lane := &orreryv1.Lane{Namespace: w.namespace, Queue: w.queue, Key: keyOn(w.namespace, "t-"+uuid.NewString(), p, w.partitions)}
		due := time.UnixMicro(time.Now().Add(between(rng, time.Second, 15*time.Second)).UnixMicro())
		tm := timer{lane: lane, id: uuid.NewString(), partition: p, due: due}
		def := &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: tm.id, Spec: client.At(due),
			Template: &orreryv1.MessageTemplate{PayloadJson: `{"timer":true}`}}
		var receipt client.Receipt
		callCtx, cancel := context.WithTimeout(ctx, 3*callTimeout)
		_, err := w.c.ConfigureSchedule(callCtx, def, 0, client.WithCommandID("timer-"+tm.id), client.WithReceipt(&receipt))
		cancel()
		w.ops.Add(1)
		if receipt.Bytes != nil {
			answered = append(answered, answeredCommand{commandID: "timer-" + tm.id, what: "ConfigureSchedule of timer " + tm.id, receipt: receipt.Bytes,
				send: func(ctx context.Context, opts ...client.CallOption) error {
					_, err := w.c.ConfigureSchedule(ctx, def, 0, opts...)
					return err
				}})
		}
		w.mu.Lock()
		if err == nil {
			w.timers = append(w.timers, tm)
		} else {
			w.opsFailed.Add(1)
			w.unconfirmed++
		}
		w.mu.Unlock()
	}
}

// runProbe enqueues a message into a lane of partition every probeEvery, alternately into the
// worker's queue and leaseQueue, each call within callTimeout, and keeps the longest time
// between two successful enqueues.
func (w *workload) runProbe(ctx context.Context, partition int) {
	key := keyOn(w.namespace, fmt.Sprintf("m-%d", partition), partition, w.partitions)
	lanes := []*orreryv1.Lane{{Namespace: w.namespace, Queue: w.queue, Key: key}, {Namespace: w.namespace, Queue: leaseQueue, Key: key}}
	pace := time.NewTicker(probeEvery)
	defer pace.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-pace.C:
		}
		lane := lanes[n%2]
		id := uuid.NewString()
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := w.c.Enqueue(callCtx, &orreryv1.Enqueue{Lane: lane, Id: id, PayloadJson: `{"probe":true}`}, client.WithCommandID("enqueue-"+id))
		cancel()
		w.ops.Add(1)
		if err != nil {
			w.opsFailed.Add(1)
			continue
		}
		now := time.Now()
		w.mu.Lock()
		w.enqueued[id] = lane.GetKey()
		if last := w.lastProbeOK[partition]; !last.IsZero() {
			w.longestGap[partition] = max(w.longestGap[partition], now.Sub(last))
		}
		w.lastProbeOK[partition] = now
		w.mu.Unlock()
	}
}

// consumeLeases receives leaseQueue's messages of partition (long polls of 2 s, leases of 2 s)
// until ctx ends, and acks two in three of them; the third is never acked, so that its lease
// expires and it is delivered again.
func (w *workload) consumeLeases(ctx context.Context, partition int, rng *rand.Rand) {
	for ctx.Err() == nil {
		callCtx, cancel := context.WithTimeout(ctx, callTimeout+2*time.Second)
		msgs, err := w.c.Receive(callCtx, partition, &orreryv1.Receive{Namespace: w.namespace, Queue: leaseQueue, Max: 4,
			LeaseDurationMicros: leaseDuration.Microseconds(), Owner: "chaos-lease-consumer"}, 2*time.Second)
		cancel()
		if err != nil {
			sleep(ctx, 250*time.Millisecond)
			continue
		}
		for _, m := range msgs {
			d := deliveryOf(m, partition, time.Now())
			d.dropped = rng.IntN(3) == 0
			w.log.add(d)
			if d.dropped {
				continue
			}
			ackCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
			_, _ = w.c.Ack(ackCtx, m.GetLane(), m.GetId(), m.GetLease().GetToken()) // a failed ack: the lease expires
			cancel()
		}
	}
}

// settle resumes every churn schedule left paused, at the revision it reads, until a read
// finds it running (within 90 s each; untilRead).
func (w *workload) settle(ctx context.Context) {
	running := func(r *orreryv1.ScheduleRecord) bool { return !r.GetPaused() || r.GetCancelled() }
	for _, s := range w.schedules {
		if w.churn[s.lane.GetKey()] && w.untilRead(ctx, s, 90*time.Second, running, scheduleResume) == nil {
			w.logf("workload: resume schedule %s and read it back running: not within 90 s", s.id)
		}
	}
}

// cancelAll cancels every schedule not cancelled yet; it reports the schedules it could not.
func (w *workload) cancelAll(ctx context.Context) int {
	failed := 0
	for _, s := range append(slices.Clone(w.schedules), w.crons...) {
		if !w.cancel(ctx, s, false) {
			failed++
		}
	}
	return failed
}

// drain waits until no message of either queue is visible, leased or delayed in any
// partition, or within has passed; it returns the messages dead-lettered, and an error if the
// queues did not drain.
func (w *workload) drain(ctx context.Context, within time.Duration) (deadLettered uint64, err error) {
	deadline := time.Now().Add(within)
	for {
		left, dead, complete := uint64(0), uint64(0), true
		for _, queue := range []string{w.queue, leaseQueue} {
			callCtx, cancel := context.WithTimeout(ctx, callTimeout)
			stats, statsErr := w.c.QueueStats(callCtx, w.namespace, queue, "")
			cancel()
			if err = statsErr; err != nil {
				break
			}
			for _, s := range stats {
				left += s.Stats.GetVisible() + s.Stats.GetLeased() + s.Stats.GetDelayed()
				dead += s.Stats.GetDeadLettered()
				complete = complete && s.Stats.GetComplete()
			}
		}
		if err == nil {
			if left == 0 && complete {
				return dead, nil
			}
			err = fmt.Errorf("%d messages still visible, leased or delayed", left)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the queue did not drain within %v: %w", within, err)
		}
		if !sleep(ctx, 500*time.Millisecond) {
			return 0, ctx.Err()
		}
	}
}

// stopWorker stops the worker and leaseQueue's consumers and returns what the worker's Run
// returned.
func (w *workload) stopWorker() error {
	w.workerStop()
	w.consumersDone.Wait()
	return <-w.workerErr
}

// readLedgers reads the ledger of every schedule a pause was sent to and records the ordinals
// it holds PAUSED.
func (w *workload) readLedgers(ctx context.Context) error {
	for _, s := range w.schedules {
		key := s.lane.GetKey()
		if !w.pausedEver[key] {
			continue
		}
		excused := map[uint64]bool{}
		var after []byte
		for {
			var page []*orreryv1.LedgerRecord
			if err := w.untilDone(ctx, time.Minute, func(ctx context.Context) error {
				var err error
				page, after, err = w.c.ReadLedger(ctx, s.lane, s.id, client.LedgerQuery{After: after})
				return err
			}); err != nil {
				return fmt.Errorf("read the ledger of schedule %s: %w", s.id, err)
			}
			for _, r := range page {
				if r.GetOutcome() == orreryv1.LedgerOutcome_LEDGER_OUTCOME_PAUSED && !r.GetManual() {
					excused[r.GetOrdinal()] = true
				}
			}
			if after == nil {
				break
			}
		}
		w.excused[key] = excused
	}
	return nil
}

// history is what the workload recorded and read back, closed at end. A schedule that could
// not be cancelled and read back is left out (Run reports it as a problem).
func (w *workload) history(end time.Time, recoveryBound time.Duration) history {
	w.mu.Lock()
	defer w.mu.Unlock()
	enqueued := make(map[string]string, len(w.enqueued))
	for id, key := range w.enqueued {
		enqueued[id] = key
	}
	paused := map[string]bool{}
	for key := range w.pausedEver {
		paused[key] = true
	}
	early := map[string]bool{}
	for key := range w.early {
		early[key] = true
	}
	var schedules []tickSchedule // those whose next ordinal was read back after their cancel
	for _, s := range w.schedules {
		if _, ok := w.next[s.lane.GetKey()]; ok {
			schedules = append(schedules, s)
		}
	}
	var crons []tickSchedule
	for _, s := range w.crons {
		if _, ok := w.next[s.lane.GetKey()]; ok {
			crons = append(crons, s)
		}
	}
	sagaOps, replays := w.sagas.snapshot()
	return history{schedules: schedules, crons: crons, cronHours: w.cronHours, next: w.next, generations: w.generations, triggers: w.triggers,
		cancelledAt: w.cancelledAt, paused: paused, excused: w.excused,
		cancelledEarly: early, timers: w.timers, enqueued: enqueued, deliveries: w.log.snapshot(), sagaOps: sagaOps, replays: replays,
		scheduleOps: w.scheduleCalls.snapshot(), end: end, recoveryBound: recoveryBound}
}

// longestUnavailable is the longest time any partition went without a successful probe
// enqueue, less the probe period.
func (w *workload) longestUnavailable() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var longest time.Duration
	for _, gap := range w.longestGap {
		longest = max(longest, gap-probeEvery)
	}
	return longest
}
