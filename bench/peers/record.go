package main

import (
	"slices"
	"sync"
	"time"
)

// delivery is what the handlers saw of one occurrence: its first delivery's lateness, how
// often it was delivered, and whether any delivery started before its nominal instant.
type delivery struct {
	lateness   time.Duration
	deliveries int
	early      bool
}

// latenessRecorder collects, from the handlers of A or C, the deliveries of each occurrence
// (a timer, or a schedule's nominal instant), identified by K.
type latenessRecorder[K comparable] struct {
	mu   sync.Mutex
	seen map[K]*delivery
}

// newLatenessRecorder returns an empty recorder.
func newLatenessRecorder[K comparable]() *latenessRecorder[K] {
	return &latenessRecorder[K]{seen: map[K]*delivery{}}
}

// record notes that a handler started at started for occurrence k, nominally due at due.
func (r *latenessRecorder[K]) record(k K, due, started time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.seen[k]
	if d == nil {
		d = &delivery{lateness: started.Sub(due)}
		r.seen[k] = d
	}
	d.deliveries++
	d.early = d.early || started.Before(due)
}

// allHandled reports whether every occurrence of expected was handled at least once. It reads
// the map only once as many occurrences as expected holds were handled (any of them): a scan
// of every expected occurrence under the lock the handlers record under, at every poll of a
// run, would take the CPU and the lock from the system under test.
func (r *latenessRecorder[K]) allHandled(expected []K) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) < len(expected) {
		return false
	}
	for _, k := range expected {
		if r.seen[k] == nil {
			return false
		}
	}
	return true
}

// waitHandled waits until every occurrence of expected was handled, or until deadline.
func (r *latenessRecorder[K]) waitHandled(expected []K, deadline time.Time, stop <-chan struct{}) {
	for !r.allHandled(expected) && time.Now().Before(deadline) {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// latenessSummary is what a lateness workload reports.
type latenessSummary struct {
	p50, p99, max          float64 // lateness, ms, over first deliveries
	early, missing, dup    int
	handled, expectedTotal int
}

// summary summarises the deliveries of the expected occurrences; others (a recurring schedule's
// occurrences after the measured seconds) are left out.
func (r *latenessRecorder[K]) summary(expected []K) latenessSummary {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := latenessSummary{expectedTotal: len(expected)}
	var late []time.Duration
	for _, k := range expected {
		d := r.seen[k]
		if d == nil {
			s.missing++
			continue
		}
		s.handled++
		late = append(late, d.lateness)
		if d.early {
			s.early++
		}
		if d.deliveries > 1 {
			s.dup++
		}
	}
	s.p50, s.p99, s.max = percentiles(late)
	return s
}

// metrics returns the summary as the figures of workload w.
func (s latenessSummary) metrics(w string) metrics {
	return metrics{
		w + ".p50": s.p50, w + ".p99": s.p99, w + ".max": s.max,
		w + ".early": float64(s.early), w + ".missing": float64(s.missing), w + ".dup": float64(s.dup),
	}
}

// percentiles returns the nearest-rank p50, p99 and max of samples, in milliseconds.
func percentiles(samples []time.Duration) (p50, p99, maxMS float64) {
	if len(samples) == 0 {
		return 0, 0, 0
	}
	slices.Sort(samples)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	n := len(samples)
	return ms(samples[(n-1)/2]), ms(samples[min(n-1, (n*99+99)/100-1)]), ms(samples[n-1])
}

// timerBook holds A's due instants: set once the consumers run, read by their handlers.
type timerBook struct {
	mu  sync.RWMutex
	due []time.Time
}

// set records the due instants, timer i's at due[i].
func (b *timerBook) set(due []time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.due = due
}

// get returns timer i's due instant, or false for an unknown timer.
func (b *timerBook) get(i int) (time.Time, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if i < 0 || i >= len(b.due) {
		return time.Time{}, false
	}
	return b.due[i], true
}
