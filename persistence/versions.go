package persistence

import "sync"

// versions hands out the Badger versions of a store opened in managed mode: the store is the
// only writer of its database, so it numbers its own commits instead of asking Badger's
// oracle, which makes every new transaction wait until its watermark goroutine has caught up
// with the last commit (scheduled late under load). Here a transaction reads at once.
//
// A commit is applied (in Badger's memtable, readable) before it is durable (its write-ahead
// log synced). Partition state reads at the last applied version (it follows entries that are
// durable already); the Raft log reads at the version of its last durable write.
//
// Managed mode also leaves it to the store to tell Badger which old versions compaction may
// drop (SetDiscardTs): never past the last durable version nor past the oldest version an open
// read uses.
type versions struct {
	mu      sync.Mutex
	last    uint64         // the last applied version
	durable uint64         // the last durable version (≤ last)
	active  map[uint64]int // versions open reads use, with their counts
}

// beginRead returns the version a new transaction reads at, the last applied one (applied) or
// the last durable one, and holds it until endRead.
func (v *versions) beginRead(applied bool) uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.active == nil {
		v.active = map[uint64]int{}
	}
	at := v.durable
	if applied {
		at = v.last
	}
	v.active[at]++
	return at
}

// hold holds version at, which a new transaction reads at, until endRead.
func (v *versions) hold(at uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.active == nil {
		v.active = map[uint64]int{}
	}
	v.active[at]++
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

// applied records a commit at version at that Badger has accepted (readable, not yet durable).
func (v *versions) applied(at uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.last = max(v.last, at)
}

// synced records that every version up to at is durable and returns the version at or below
// which compaction may now drop overwritten and deleted entries.
func (v *versions) synced(at uint64) (discard uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.durable = max(v.durable, at)
	discard = v.durable
	for read := range v.active {
		discard = min(discard, read)
	}
	return discard
}
