package kv

import "bytes"

// Floors remembers, for each member of a family of queue-like indexes, a floor key: no key of
// the index sorts between the index's prefix and its floor. Queue-like indexes are written
// at the back and deleted at the front, and an LSM store keeps every deleted key as a
// tombstone until compaction, so a scan from the front of such an index steps over all of
// them; a scan that starts at the floor does not.
//
// The floors are knowledge about committed state. A transaction works through a FloorView,
// which starts its scans at the floor, learns new floors from what its scans see and lowers
// them on its writes, and hands what it learnt to the Floors with Promote once the
// transaction has committed (an abandoned transaction's floors are dropped with it). A
// Floors is used by one transaction at a time (a partition's commit goroutine), like Warm.
type Floors struct {
	prefixOf   func(key []byte) ([]byte, bool)
	maxIndexes int
	floors     map[string][]byte
}

// NewFloors returns empty floors for the indexes prefixOf recognizes: for a key of such an
// index it returns the index's prefix. At most maxIndexes floors are kept; beyond, all are
// forgotten (they are an optimization, never needed for a correct scan).
func NewFloors(prefixOf func(key []byte) ([]byte, bool), maxIndexes int) *Floors {
	return &Floors{prefixOf: prefixOf, maxIndexes: max(maxIndexes, 1), floors: map[string][]byte{}}
}

// View returns a view of one transaction over parent, which must see the committed state
// the floors describe plus the transaction's own writes. Every write of the transaction
// must go through the view.
func (f *Floors) View(parent View) *FloorView {
	return &FloorView{View: parent, floors: f, staged: map[string][]byte{}, lowered: map[string]uint64{}}
}

// FloorView is one transaction's View through Floors.
type FloorView struct {
	View
	floors  *Floors
	staged  map[string][]byte // floors learnt or lowered in this transaction
	lowered map[string]uint64 // per index, how many writes lowered its floor
}

func (v *FloorView) floor(prefix string) []byte {
	if f, ok := v.staged[prefix]; ok {
		return f
	}
	return v.floors.floors[prefix]
}

// Scan implements Reader. A scan of one index, from its front or its floor or anywhere
// before the floor, starts at the floor and teaches the view a new one: the first key it
// sees, or its end when it sees none.
func (v *FloorView) Scan(start, end []byte, fn func(key, value []byte) (bool, error)) error {
	prefix, ok := v.floors.prefixOf(end)
	if !ok || !bytes.HasPrefix(start, prefix) {
		return v.View.Scan(start, end, fn)
	}
	p := string(prefix)
	floor := v.floor(p)
	switch {
	case floor != nil && bytes.Compare(start, floor) <= 0:
		start = floor
	case floor == nil && bytes.Equal(start, prefix):
	default: // from inside the index: nothing to learn
		return v.View.Scan(start, end, fn)
	}
	if bytes.Compare(start, end) >= 0 {
		return nil
	}
	lowered := v.lowered[p]
	var first []byte
	err := v.View.Scan(start, end, func(key, value []byte) (bool, error) {
		if first == nil {
			first = bytes.Clone(key)
		}
		return fn(key, value)
	})
	if err != nil || v.lowered[p] != lowered {
		return err // a write during the scan lowered the floor: keep that one
	}
	if first == nil {
		first = bytes.Clone(end)
	}
	v.staged[p] = first
	return nil
}

// Set implements View: a key written below its index's floor lowers the floor.
func (v *FloorView) Set(key, value []byte) error {
	if prefix, ok := v.floors.prefixOf(key); ok {
		p := string(prefix)
		if floor := v.floor(p); floor != nil && bytes.Compare(key, floor) < 0 {
			v.staged[p] = bytes.Clone(key)
			v.lowered[p]++
		}
	}
	return v.View.Set(key, value)
}

// Promote hands the floors this transaction learnt to its Floors; call it only once the
// transaction has committed. It returns what changed, for Floors.Adopt of a replica.
func (v *FloorView) Promote() Promoted {
	f := v.floors
	for p, floor := range v.staged {
		f.floors[p] = floor
	}
	if len(f.floors) > f.maxIndexes {
		clear(f.floors)
		return Promoted{reset: true}
	}
	return Promoted{floors: v.staged}
}

// Promoted is what one Promote changed.
type Promoted struct {
	floors map[string][]byte
	reset  bool
}

// Adopt applies what a Promote of another Floors changed, so that f is a replica of it: a
// reader elsewhere (see Reader) then starts its scans where the writer's transactions do.
func (f *Floors) Adopt(p Promoted) {
	if p.reset {
		clear(f.floors)
	}
	for prefix, floor := range p.floors {
		f.floors[prefix] = floor
	}
	if len(f.floors) > f.maxIndexes {
		clear(f.floors)
	}
}

// Reader returns a reader over r that starts a scan of an index from its front at the
// index's floor, and learns nothing. r must read a state at or after the one the floors
// describe, without writes below a floor since: a key written below a floor after the floors
// were adopted is not seen until the floors that account for it are.
func (f *Floors) Reader(r Reader) Reader { return floorReader{Reader: r, floors: f} }

type floorReader struct {
	Reader
	floors *Floors
}

// Scan implements Reader.
func (r floorReader) Scan(start, end []byte, fn func(key, value []byte) (bool, error)) error {
	if prefix, ok := r.floors.prefixOf(end); ok && bytes.HasPrefix(start, prefix) {
		if floor := r.floors.floors[string(prefix)]; floor != nil && bytes.Compare(start, floor) < 0 {
			start = floor
		}
	}
	if end != nil && bytes.Compare(start, end) >= 0 {
		return nil
	}
	return r.Reader.Scan(start, end, fn)
}
