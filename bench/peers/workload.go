package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// clientLog receives the clients' log lines (Orrery's client and River's): none, unless -v.
var clientLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// workloadConfig is the scale of the workloads (the flags).
type workloadConfig struct {
	handlers int // handlers (workers) on each side

	timers int           // A: timers
	spread time.Duration // A: the timers' due instants spread over this
	lead   time.Duration // A, C: from the start of creation to the first due instant
	grace  time.Duration // A, C: how long after the last due instant a missing occurrence is waited for

	backlog int           // B: the most messages enqueued and not yet completed
	warmup  time.Duration // B: before the window
	window  time.Duration // B: the measured window

	schedules int // C: recurring schedules
	seconds   int // C: seconds of occurrences measured
}

// timerDueInstants returns A's due instants (microsecond precision, as both sides store them):
// cfg.timers instants spread evenly over cfg.spread, the first cfg.lead after created.
func timerDueInstants(created time.Time, cfg workloadConfig) []time.Time {
	base := created.Add(cfg.lead)
	due := make([]time.Time, cfg.timers)
	for i := range due {
		due[i] = base.Add(cfg.spread * time.Duration(i) / time.Duration(cfg.timers)).Truncate(time.Microsecond)
	}
	return due
}

// indexes returns 0..n-1: the timers A expects.
func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// occurrence identifies one occurrence of C: its schedule and its nominal instant.
type occurrence struct {
	schedule     int
	dueUnixMicro int64
}

// expectedOccurrences returns C's expected occurrences: each of schedules at each of the
// seconds whole seconds from base on.
func expectedOccurrences(schedules, seconds int, base time.Time) []occurrence {
	out := make([]occurrence, 0, schedules*seconds)
	for i := range schedules {
		for s := range seconds {
			out = append(out, occurrence{i, base.Add(time.Duration(s) * time.Second).UnixMicro()})
		}
	}
	return out
}

// timersNote is A's progress detail.
func timersNote(s latenessSummary, n int, created time.Time, creation time.Duration, firstDue time.Time, peakMiB float64) string {
	return fmt.Sprintf("lateness p50 %.1f ms, p99 %.1f ms, max %.1f ms; early %d, missing %d, duplicate %d of %d timers; created in %v%s; server peak PSS %s MiB",
		s.p50, s.p99, s.max, s.early, s.missing, s.dup, n, creation.Round(time.Millisecond), lateCreation(created, creation, firstDue), num(peakMiB, 0))
}

// burstNote is C's progress detail.
func burstNote(s latenessSummary, n int, created time.Time, creation time.Duration, base time.Time, peakMiB float64) string {
	return fmt.Sprintf("lateness p50 %.1f ms, p99 %.1f ms, max %.1f ms; early %d, missing %d, duplicate %d of %d occurrences (%d schedules); created in %v%s; server peak PSS %s MiB",
		s.p50, s.p99, s.max, s.early, s.missing, s.dup, s.expectedTotal, n, creation.Round(time.Millisecond), lateCreation(created, creation, base), num(peakMiB, 0))
}

// lateCreation warns when creating the timers or schedules ended after the first due instant
// (raise -lead): the first ones were then late for that reason.
func lateCreation(created time.Time, creation time.Duration, firstDue time.Time) string {
	if over := created.Add(creation).Sub(firstDue); over > 0 {
		return fmt.Sprintf(" (WARNING: %v after the first due instant: raise -lead)", over.Round(time.Millisecond))
	}
	return ""
}

// closedLoop is B's bookkeeping: producers reserve batches of sequence numbers while the
// backlog (reserved − completed) leaves room for one, handlers report completions.
type closedLoop struct {
	backlog, batch int64
	reserved       atomic.Int64 // sequence numbers handed to producers: 0 … reserved−1
	enqueuedN      atomic.Int64 // messages the producers' calls created
	completedN     atomic.Int64 // handler returns
	maxBacklog     atomic.Int64 // the largest enqueued − completed seen
	room           chan struct{}
	stopping       chan struct{}
	stopOnce       sync.Once

	mu     sync.Mutex
	counts []uint8 // deliveries per sequence number (saturating)
}

// newClosedLoop returns a loop keeping at most backlog messages outstanding, reserved in
// batches of batch.
func newClosedLoop(backlog, batch int) *closedLoop {
	return &closedLoop{backlog: int64(backlog), batch: int64(batch), room: make(chan struct{}, 1), stopping: make(chan struct{})}
}

// reserve waits until the backlog has room for a batch and returns its first sequence number,
// or false once the loop stops.
func (l *closedLoop) reserve() (int64, bool) {
	for {
		select {
		case <-l.stopping:
			return 0, false
		default:
		}
		r := l.reserved.Load()
		if r+l.batch-l.completedN.Load() > l.backlog {
			select {
			case <-l.room:
			case <-l.stopping:
				return 0, false
			}
			continue
		}
		if l.reserved.CompareAndSwap(r, r+l.batch) {
			return r, true
		}
	}
}

// enqueued records that a producer's call created n messages.
func (l *closedLoop) enqueued(n int) {
	backlog := l.enqueuedN.Add(int64(n)) - l.completedN.Load()
	for old := l.maxBacklog.Load(); backlog > old && !l.maxBacklog.CompareAndSwap(old, backlog); old = l.maxBacklog.Load() {
	}
}

// completed records, from a handler, that message seq was handled.
func (l *closedLoop) completed(seq int64) {
	l.mu.Lock()
	if seq >= int64(len(l.counts)) {
		l.counts = append(l.counts, make([]uint8, seq+1-int64(len(l.counts))+1<<16)...)
	}
	if l.counts[seq] < 255 {
		l.counts[seq]++
	}
	l.mu.Unlock()
	l.completedN.Add(1)
	select {
	case l.room <- struct{}{}:
	default:
	}
}

// measure waits warmup, then returns the completions per second over window.
func (l *closedLoop) measure(ctx context.Context, warmup, window time.Duration) (float64, error) {
	if err := sleep(ctx, warmup); err != nil {
		return 0, err
	}
	from, start := l.completedN.Load(), time.Now()
	if err := sleep(ctx, window); err != nil {
		return 0, err
	}
	return float64(l.completedN.Load()-from) / time.Since(start).Seconds(), nil
}

// stop makes reserve return false from now on.
func (l *closedLoop) stop() { l.stopOnce.Do(func() { close(l.stopping) }) }

// enqueuedTotal is the messages the producers created.
func (l *closedLoop) enqueuedTotal() int64 { return l.enqueuedN.Load() }

// handledAndDuplicates returns how many messages were handled, and how many more than once.
func (l *closedLoop) handledAndDuplicates() (handled, duplicates int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.counts {
		if n > 0 {
			handled++
		}
		if n > 1 {
			duplicates++
		}
	}
	return handled, duplicates
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
