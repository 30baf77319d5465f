package duecoordinator

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/duecoordinator/backoff"
)

// stuckHintDelay is how long a hint naming the due instant of a ref on backoff is deferred: a
// partition reports its earliest due instant after every commit, and while a stuck ref sits at
// the head of its due index that instant says nothing new, so such hints are coalesced into at
// most one scan per stuckHintDelay instead of one per commit.
const stuckHintDelay = time.Second

// Coordinator is one silo's due coordinator. Its methods are safe for concurrent use.
type Coordinator struct {
	cfg Config

	mu       sync.Mutex
	work     *sync.Cond // signalled when ready grows or the coordinator stops
	owned    map[int]*partition
	ready    []*partition // round-robin queue of partitions waiting for a worker
	busy     int          // rounds in progress
	sending  int          // dispatches awaiting their receipts
	started  bool
	stopped  bool
	cancel   context.CancelFunc
	idleSubs []chan struct{} // closed when ready is empty and no round or dispatch runs

	workers sync.WaitGroup
	// ownPool is set when the pool is the coordinator's own (Config.Pool nil): Stop closes it.
	ownPool bool
	nextID  atomic.Uint64
	counts  counters
	watch   *watchdog
}

// counters are the Stats counters, updated without the lock.
type counters struct {
	rounds, scans, commands, refs, stale, skipped, retries, errors atomic.Uint64
}

// partition is the coordinator's state for one owned partition. The scheduling fields are
// guarded by Coordinator.mu; round is touched only by the worker serving the partition (at
// most one at a time; the hand-over goes through mu).
type partition struct {
	id int

	queued, inFlight bool
	timer            stopper
	timerAt          time.Time
	timerGen         uint64
	pendingHint      time.Time // earliest hint received during a round
	nextDueAt        time.Time
	epoch            uint64
	stuckDue         []int64 // sorted due instants of the refs on backoff
	failures         int
	skippedRefs      int
	// sending holds the refs of dispatches awaiting their receipts: rounds pass them by,
	// since their commands are applied or about to be. slots bounds those dispatches.
	sending map[backoff.RefKey]bool
	slots   chan struct{}
	// rescanOnReply asks for a round once a dispatch returns: a round found nothing to send
	// but refs in flight, and more may be due behind them.
	rescanOnReply bool
	// dispatchErr is the error of a dispatch that failed, for the next round to back off on.
	dispatchErr error

	round roundState
}

// maxSendingPerPartition bounds one partition's dispatches awaiting receipts; a round that
// would exceed it waits for the oldest.
const maxSendingPerPartition = 2

// stopper is the part of clock.Timer the coordinator uses.
type stopper interface{ Stop() bool }

// New returns a stopped coordinator owning no partition.
func New(cfg Config) *Coordinator {
	ownPool := cfg.Pool == nil
	cfg = cfg.withDefaults()
	c := &Coordinator{cfg: cfg, ownPool: ownPool, owned: map[int]*partition{}, watch: newWatchdog(cfg.LateAfter, cfg.Logger)}
	c.work = sync.NewCond(&c.mu)
	return c
}

// Start starts the workers. They run until Stop or until ctx ends. A second Start does
// nothing; a stopped coordinator cannot be restarted.
func (c *Coordinator) Start(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.stopped {
		return
	}
	c.started = true
	ctx, c.cancel = context.WithCancel(ctx)
	context.AfterFunc(ctx, c.halt)
	for range c.cfg.Workers {
		c.workers.Add(1)
		go c.worker(ctx)
	}
}

// Stop stops every timer and worker and waits for the workers and dispatches to return; a
// round or dispatch in progress is cancelled through its context.
func (c *Coordinator) Stop() {
	c.mu.Lock()
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	c.halt()
	c.workers.Wait()
	if c.ownPool {
		c.cfg.Pool.Close()
	}
}

// halt marks the coordinator stopped, stops its timers and wakes its workers.
func (c *Coordinator) halt() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	for _, p := range c.owned {
		c.stopTimerLocked(p)
	}
	c.ready = nil
	c.work.Broadcast()
	c.signalIdleLocked()
}

// SetOwned replaces the set of partitions this silo coordinates. Partitions no longer owned
// lose their timers and state (a round in progress finishes but is then dropped); newly owned
// ones are queued for a scan at once, which activates them.
func (c *Coordinator) SetOwned(partitions []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	want := map[int]bool{}
	for _, id := range partitions {
		want[id] = true
	}
	for id, p := range c.owned {
		if !want[id] {
			c.stopTimerLocked(p)
			delete(c.owned, id)
			c.watch.forget(id)
		}
	}
	c.ready = slices.DeleteFunc(c.ready, func(p *partition) bool { return c.owned[p.id] != p })
	added := slices.Sorted(func(yield func(int) bool) {
		for id := range want {
			if c.owned[id] == nil && !yield(id) {
				return
			}
		}
	})
	for _, id := range added {
		p := &partition{id: id, sending: map[backoff.RefKey]bool{}, slots: make(chan struct{}, maxSendingPerPartition)}
		c.owned[id] = p
		c.enqueueLocked(p)
	}
	c.signalIdleLocked()
}

// Notify takes a partition's next-due hint. It never blocks on I/O: an earlier instant moves
// the partition's timer, a due-now instant queues the partition, a later one is ignored (the
// timer then fires early and the scan re-arms it). Hints for partitions not owned are dropped.
func (c *Coordinator) Notify(n *orreryv1.NextDueNotice) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.owned[int(n.GetPartition())]
	if p == nil || c.stopped {
		return
	}
	if n.GetActivationEpoch() != 0 {
		p.epoch = n.GetActivationEpoch()
	}
	if n.GetNextDueAtUnixMicros() == 0 {
		return
	}
	hint := time.UnixMicro(n.GetNextDueAtUnixMicros())
	p.nextDueAt = hint
	c.hintLocked(p, hint, true)
}

// hintLocked wants p served at hint: a queued partition is served anyway, one in a round
// remembers the hint for the round's end, and otherwise an earlier hint moves the timer.
// deferStuck defers hints naming refs on backoff (see deferStuckLocked).
func (c *Coordinator) hintLocked(p *partition, hint time.Time, deferStuck bool) {
	switch {
	case p.queued:
	case p.inFlight:
		if p.pendingHint.IsZero() || hint.Before(p.pendingHint) {
			p.pendingHint = hint
		}
	default:
		if deferStuck {
			hint = c.deferStuckLocked(p, hint)
		}
		if p.timer == nil || hint.Before(p.timerAt) {
			c.armLocked(p, hint)
		}
	}
}

// deferStuckLocked moves a due-now hint that names a ref on backoff stuckHintDelay ahead.
func (c *Coordinator) deferStuckLocked(p *partition, hint time.Time) time.Time {
	now := c.cfg.Clock.Now()
	if hint.After(now) {
		return hint
	}
	if _, stuck := slices.BinarySearch(p.stuckDue, hint.UnixMicro()); stuck {
		return now.Add(stuckHintDelay)
	}
	return hint
}

// Stats returns the counters and the state of every owned partition.
func (c *Coordinator) Stats() Stats {
	s := Stats{
		Rounds:         c.counts.rounds.Load(),
		Scans:          c.counts.scans.Load(),
		CommandsSent:   c.counts.commands.Load(),
		RefsDispatched: c.counts.refs.Load(),
		StaleIgnored:   c.counts.stale.Load(),
		RefsSkipped:    c.counts.skipped.Load(),
		Retries:        c.counts.retries.Load(),
		Errors:         c.counts.errors.Load(),

		LivenessChanges: c.watch.changes.Load(),
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.owned {
		ps := PartitionStats{
			Partition: p.id, NextDueAt: p.nextDueAt, Queued: p.queued, InFlight: p.inFlight,
			ConsecutiveFailures: p.failures, SkippedRefs: p.skippedRefs, ActivationEpoch: p.epoch,
		}
		if p.timer != nil {
			ps.TimerAt = p.timerAt
		}
		ps.LateRecords, ps.FailingRecords = c.watch.counts(p.id)
		s.Partitions = append(s.Partitions, ps)
	}
	slices.SortFunc(s.Partitions, func(a, b PartitionStats) int { return a.Partition - b.Partition })
	return s
}

// Liveness returns the records of the owned partitions that are late or failing (docs/design.md §5
// liveness), by partition, lane and id. Each change of a record's state is logged once.
func (c *Coordinator) Liveness() []Liveness { return c.watch.list() }

// LivenessOf returns the report of one due record, if it is late or failing.
func (c *Coordinator) LivenessOf(kind orreryv1.DueKind, lane *orreryv1.Lane, id string) (Liveness, bool) {
	return c.watch.find(recordKey{kind, lane.GetNamespace(), lane.GetQueue(), lane.GetKey(), id})
}

// worker serves queued partitions, one round each, until the coordinator stops.
func (c *Coordinator) worker(ctx context.Context) {
	defer c.workers.Done()
	for {
		c.mu.Lock()
		for len(c.ready) == 0 && !c.stopped {
			c.work.Wait()
		}
		if c.stopped {
			c.mu.Unlock()
			return
		}
		p := c.ready[0]
		c.ready = c.ready[1:]
		p.queued, p.inFlight = false, true
		c.busy++
		c.mu.Unlock()

		out := c.serve(ctx, p)

		c.mu.Lock()
		c.busy--
		p.inFlight = false
		c.finishLocked(p, out)
		c.signalIdleLocked()
		c.mu.Unlock()
	}
}

// finishLocked records a round's outcome and decides when the partition is served next: at the
// back of the queue if it has more due now, else at its timer.
func (c *Coordinator) finishLocked(p *partition, out roundOutcome) {
	if c.stopped || c.owned[p.id] != p {
		return
	}
	now := c.cfg.Clock.Now()
	p.failures, p.skippedRefs, p.stuckDue = out.failures, out.skippedRefs, out.stuckDue
	if out.epoch != 0 {
		p.epoch = out.epoch
	}
	if out.scanned {
		p.nextDueAt = out.nextDueAt
	}
	wake := now.Add(c.cfg.SafetyRescan)
	if !out.wakeAt.IsZero() && out.wakeAt.Before(wake) {
		wake = out.wakeAt
	}
	if hint := p.pendingHint; !hint.IsZero() {
		p.pendingHint = time.Time{}
		if hint = c.deferStuckLocked(p, hint); hint.Before(wake) {
			wake = hint
		}
	}
	if out.again || !wake.After(now) {
		c.enqueueLocked(p)
		return
	}
	c.armLocked(p, wake)
}

// enqueueLocked puts p at the back of the round-robin queue unless it is already there or
// in a round.
func (c *Coordinator) enqueueLocked(p *partition) {
	if p.queued || p.inFlight || c.stopped {
		return
	}
	c.stopTimerLocked(p)
	p.queued = true
	c.ready = append(c.ready, p)
	c.work.Signal()
}

// armLocked sets p's timer to at, replacing any other; an instant not in the future queues p.
func (c *Coordinator) armLocked(p *partition, at time.Time) {
	c.stopTimerLocked(p)
	delay := at.Sub(c.cfg.Clock.Now())
	if delay <= 0 {
		c.enqueueLocked(p)
		return
	}
	p.timerGen++
	gen := p.timerGen
	p.timerAt = at
	p.timer = c.cfg.Clock.AfterFunc(delay, func() { c.fire(p, gen) })
}

// fire is a timer callback: it queues p if the timer is still p's current one.
func (c *Coordinator) fire(p *partition, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owned[p.id] != p || p.timerGen != gen || p.timer == nil {
		return
	}
	p.timer = nil
	c.enqueueLocked(p)
}

// stopTimerLocked cancels p's timer, if any.
func (c *Coordinator) stopTimerLocked(p *partition) {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.timerGen++
}

// idle returns a channel that is closed once no partition is queued or being served and no
// dispatch awaits its receipts (or the coordinator has stopped). Tests use it to let the workers settle before moving a fake clock.
func (c *Coordinator) idle() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	c.idleSubs = append(c.idleSubs, ch)
	c.signalIdleLocked()
	return ch
}

// signalIdleLocked closes the idle channels when the coordinator is idle.
func (c *Coordinator) signalIdleLocked() {
	if len(c.idleSubs) == 0 || (!c.stopped && (len(c.ready) > 0 || c.busy > 0 || c.sending > 0)) {
		return
	}
	for _, ch := range c.idleSubs {
		close(ch)
	}
	c.idleSubs = nil
}
