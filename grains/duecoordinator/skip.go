package duecoordinator

import (
	"slices"
	"sync"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// Backoff of refs that failed for a lasting reason.
const (
	skipBackoffInitial = time.Second
	skipBackoffMax     = 5 * time.Minute
	// skipForget drops an entry this long after its retry instant if the ref was not seen
	// again (its record moved on, or it lies beyond the pages rounds read); a ref seen again
	// later starts over at skipBackoffInitial.
	skipForget = 2 * skipBackoffMax
	// maxSkipsPerPartition bounds the memory of one partition's skip set; refs beyond it are
	// not remembered and are dispatched again every round.
	maxSkipsPerPartition = 1 << 16
	// maxStuckDue bounds the due instants of skipped refs kept for Notify.
	maxStuckDue = 64
)

// refKey names one due-index entry at one CAS token: a new generation or revision of the
// same record is a different ref and is never skipped because of the old one.
type refKey struct {
	kind                  orreryv1.DueKind
	namespace, queue, key string
	id                    string
	token                 uint64
}

func keyOf(ref *orreryv1.DueRef) refKey {
	lane := ref.GetLane()
	return refKey{ref.GetKind(), lane.GetNamespace(), lane.GetQueue(), lane.GetKey(), ref.GetId(), ref.GetToken()}
}

// skipEntry is one ref on backoff.
type skipEntry struct {
	dueAtMicros int64
	retryAt     time.Time
	attempts    int
}

// skipSet remembers refs whose last dispatch failed for a lasting reason, so rounds page past
// them until their backoff ends instead of sending them again and again. It is safe for
// concurrent use: a partition's rounds read it while the replies of its earlier dispatches
// update it.
type skipSet struct {
	mu      sync.Mutex
	entries map[refKey]*skipEntry
}

// filter returns the refs not on backoff at now.
func (s *skipSet) filter(refs []*orreryv1.DueRef, now time.Time) []*orreryv1.DueRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*orreryv1.DueRef
	for _, ref := range refs {
		if e := s.entries[keyOf(ref)]; e != nil && e.retryAt.After(now) {
			continue
		}
		out = append(out, ref)
	}
	return out
}

// skip puts ref on backoff, doubling the wait each time it fails again.
func (s *skipSet) skip(ref *orreryv1.DueRef, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := keyOf(ref)
	e := s.entries[k]
	if e == nil {
		if len(s.entries) >= maxSkipsPerPartition {
			return
		}
		if s.entries == nil {
			s.entries = map[refKey]*skipEntry{}
		}
		e = &skipEntry{}
		s.entries[k] = e
	}
	e.attempts++
	e.dueAtMicros = ref.GetDueAtUnixMicros()
	wait := skipBackoffInitial
	for i := 1; i < e.attempts && wait < skipBackoffMax; i++ {
		wait *= 2
	}
	e.retryAt = now.Add(min(wait, skipBackoffMax))
}

// clear forgets ref after a dispatch that succeeded.
func (s *skipSet) clear(ref *orreryv1.DueRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.entries, keyOf(ref))
}

// prune forgets entries skipForget past their retry instant.
func (s *skipSet) prune(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.entries {
		if now.Sub(e.retryAt) > skipForget {
			delete(s.entries, k)
		}
	}
}

// nextRetry is the earliest retry instant after now (zero if none).
func (s *skipSet) nextRetry(now time.Time) time.Time {
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

// stuckDue returns the sorted, distinct due instants of the refs on backoff at now (at most
// maxStuckDue, the earliest ones).
func (s *skipSet) stuckDue(now time.Time) []int64 {
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
	if len(out) > maxStuckDue {
		out = out[:maxStuckDue]
	}
	return out
}

// len reports how many refs are remembered.
func (s *skipSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}
