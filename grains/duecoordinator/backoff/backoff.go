// Package backoff owns the backoff of due refs that failed for a lasting reason (an expired
// occurrence, a full lane, ...): the wall-clock waits after which the due coordinator tries
// them again. It is infrastructure, not core: it reads no store and its instants are
// wall-clock ones.
package backoff

import (
	"slices"
	"sync"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// Backoff of refs that failed for a lasting reason: the first wait is BackoffInitial, each
// further failure doubles it, up to BackoffMax.
const (
	BackoffInitial = time.Second
	BackoffMax     = 5 * time.Minute
	// BackoffForget drops an entry this long after its retry instant if the ref was not seen
	// again (its record moved on, or it lies beyond the pages rounds read); a ref seen again
	// later starts over at BackoffInitial.
	BackoffForget = 2 * BackoffMax
	// MaxBackoffRefs bounds the memory of one partition's Backoff; refs beyond it are not
	// remembered and are dispatched again every time.
	MaxBackoffRefs = 1 << 16
	// MaxStuckDue bounds the due instants of skipped refs kept for Notify.
	MaxStuckDue = 64
)

// RefKey names one due-index entry at one CAS token: a new generation or revision of the
// same record is a different ref and is never skipped because of the old one.
type RefKey struct {
	kind                  orreryv1.DueKind
	namespace, queue, key string
	id                    string
	token                 uint64
}

// KeyOf returns the RefKey of ref.
func KeyOf(ref *orreryv1.DueRef) RefKey {
	lane := ref.GetLane()
	return RefKey{ref.GetKind(), lane.GetNamespace(), lane.GetQueue(), lane.GetKey(), ref.GetId(), ref.GetToken()}
}

// backoffEntry is one ref on backoff.
type backoffEntry struct {
	dueAtMicros int64
	retryAt     time.Time
	attempts    int
}

// Backoff remembers refs whose last dispatch failed for a lasting reason, so that scans pass
// them by until their backoff ends instead of sending them again and again. It is safe for
// concurrent use (a coordinator's rounds read it while the replies of its earlier dispatches
// update it). The zero value is empty and ready.
type Backoff struct {
	mu      sync.Mutex
	entries map[RefKey]*backoffEntry
}

// Filter returns the refs not on backoff at now.
func (s *Backoff) Filter(refs []*orreryv1.DueRef, now time.Time) []*orreryv1.DueRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*orreryv1.DueRef
	for _, ref := range refs {
		if e := s.entries[KeyOf(ref)]; e != nil && e.retryAt.After(now) {
			continue
		}
		out = append(out, ref)
	}
	return out
}

// RetryAt returns when ref's backoff ends, if it is on backoff.
func (s *Backoff) RetryAt(ref *orreryv1.DueRef) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[KeyOf(ref)]; e != nil {
		return e.retryAt, true
	}
	return time.Time{}, false
}

// Skip puts ref on backoff, doubling the wait each time it fails again.
func (s *Backoff) Skip(ref *orreryv1.DueRef, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := KeyOf(ref)
	e := s.entries[k]
	if e == nil {
		if len(s.entries) >= MaxBackoffRefs {
			return
		}
		if s.entries == nil {
			s.entries = map[RefKey]*backoffEntry{}
		}
		e = &backoffEntry{}
		s.entries[k] = e
	}
	e.attempts++
	e.dueAtMicros = ref.GetDueAtUnixMicros()
	wait := BackoffInitial
	for i := 1; i < e.attempts && wait < BackoffMax; i++ {
		wait *= 2
	}
	e.retryAt = now.Add(min(wait, BackoffMax))
}

// Clear forgets ref after a dispatch that succeeded.
func (s *Backoff) Clear(ref *orreryv1.DueRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.entries, KeyOf(ref))
}

// Prune forgets entries BackoffForget past their retry instant.
func (s *Backoff) Prune(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.entries {
		if now.Sub(e.retryAt) > BackoffForget {
			delete(s.entries, k)
		}
	}
}

// NextRetry is the earliest retry instant after now (zero if none).
func (s *Backoff) NextRetry(now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first time.Time
	for _, e := range s.entries {
		if e.retryAt.After(now) && (first.IsZero() || e.retryAt.Before(first)) {
			first = e.retryAt
		}
	}
	return first
}

// StuckDue returns the sorted, distinct due instants of the refs on backoff at now (at most
// MaxStuckDue, the earliest ones).
func (s *Backoff) StuckDue(now time.Time) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for _, e := range s.entries {
		if e.retryAt.After(now) {
			out = append(out, e.dueAtMicros)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxStuckDue {
		out = out[:MaxStuckDue]
	}
	return out
}

// Len reports how many refs are remembered.
func (s *Backoff) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}
