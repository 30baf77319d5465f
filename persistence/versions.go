package persistence

import "sync"

// versions hands out the Badger versions of a store opened in managed mode: the store is the
// only writer of its database, so it numbers its own commits instead of asking Badger's
// oracle. The oracle makes every new transaction wait until its watermark goroutine has
// caught up with the last commit; under load that goroutine is scheduled late, and each
// group commit waited about 2 ms for it (measured in BenchmarkDueLateness at 10,000
// occurrences a second). Here a transaction reads at the last committed version at once.
//
// Managed mode also leaves it to the store to tell Badger which old versions compaction may
// drop (SetDiscardTs): the oldest version a read still uses, or the last committed one.
type versions struct {
	mu     sync.Mutex
	last   uint64         // the last committed version
	active map[uint64]int // versions open reads use, with their counts
}

// beginRead returns the version a new transaction reads at and holds it until endRead.
func (v *versions) beginRead() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.active == nil {
		v.active = map[uint64]int{}
	}
	v.active[v.last]++
	return v.last
}

// endRead releases a version beginRead returned.
func (v *versions) endRead(at uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.active[at]--; v.active[at] <= 0 {
		delete(v.active, at)
	}
}

// next is the version the next commit writes at; only the single writer calls it.
func (v *versions) next() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.last + 1
}

// committed records a durable commit at version at and returns the version at or below
// which compaction may now drop overwritten and deleted entries: no read is older.
func (v *versions) committed(at uint64) (discard uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.last = max(v.last, at)
	discard = v.last
	for read := range v.active {
		discard = min(discard, read)
	}
	return discard
}
