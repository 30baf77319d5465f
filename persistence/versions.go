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
// Several commits may be in Badger at once (SiloStore.commit hands them over in version order
// and waits outside the lock, so that Badger's writer takes them as one batch). Badger applies
// them in the order they were handed over: one goroutine writes the requests (DB.doWrites
// runs one writeRequests at a time, pendingCh), and each batch's requests are marked done
// once all of them are in the memtable. So when the commit at a version ends, every commit
// before it has too, and reads at that version see them all, even if their callers have not
// heard yet.
//
// Managed mode also leaves it to the store to tell Badger which old versions compaction may
// drop (SetDiscardTs): never past the last durable version nor past the oldest version an open
// read uses.
type versions struct {
	mu       sync.Mutex
	last     uint64         // the last applied version: every version up to it is applied
	assigned uint64         // the last version next handed out (≤ last when none is in Badger)
	durable  uint64         // the last durable version (≤ last)
	active   map[uint64]int // versions open reads use, with their counts
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
// Versions are handed out in the order commits reach Badger (under SiloStore.commitMu).
func (v *versions) next() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.assigned = max(v.assigned, v.last) + 1
	return v.assigned
}

// applied records a commit at version at that Badger has applied (readable, not yet durable),
// and with it every version before (see the type's doc).
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
