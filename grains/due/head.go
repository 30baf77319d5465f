package due

import (
	"bytes"
	"math"
	"slices"

	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// Head is an in-memory copy of the front of a partition's due index: every entry due before
// its horizon, and nothing else. A partition keeps one so that the due coordinator's scans,
// thousands a second under load, are answered without a store transaction (with Badger, a
// new read transaction first waits for the commit in flight, fsync included).
//
// The copy stays exact because the partition is the only writer of its index: it loads the
// head from the store, then applies every due-index write of each committed batch. Writes at
// or beyond the horizon are not kept; when the head would grow past its bound, the latest
// instants are dropped and the horizon comes down to them. A Head is not safe for concurrent
// use.
type Head struct {
	maxEntries int
	loaded     bool
	// horizon: every entry due before it is in entries (math.MaxInt64: the whole index).
	horizon int64
	// keepBefore is the until of the last Load: an entry written at or after it lowers the
	// horizon to its instant instead of being kept, so the head holds near entries only.
	keepBefore int64
	entries    []headEntry // sorted by key
}

type headEntry struct {
	key, value []byte
	dueAt      int64
}

// NewHead returns an empty, unloaded head that keeps at most maxEntries entries.
func NewHead(maxEntries int) *Head {
	return &Head{maxEntries: max(maxEntries, 1)}
}

// Covers reports whether the head holds every entry due at or before nowMicros, so that a
// scan up to nowMicros can be answered from it.
func (h *Head) Covers(nowMicros int64) bool { return h.loaded && nowMicros < h.horizon }

// Len reports how many entries the head holds.
func (h *Head) Len() int { return len(h.entries) }

// Horizon is the instant before which the head holds every entry (math.MaxInt64: the whole
// index; meaningless before Load).
func (h *Head) Horizon() int64 { return h.horizon }

// Reset forgets the head; the next scan must Load it again.
func (h *Head) Reset() {
	h.loaded, h.entries, h.horizon = false, nil, 0
}

// Load replaces the head with the entries of r's due index due before untilMicros, reading
// from fromMicros (an instant no entry is earlier than; zero: the start), at most the head's
// bound. The horizon becomes the due instant of the first entry left out, so it is exact when
// Load returns, and math.MaxInt64 when nothing was left out.
func (h *Head) Load(r kv.Reader, fromMicros, untilMicros int64) error {
	h.Reset()
	start := keys.Of(keys.Due, nil)
	if fromMicros > 0 {
		start = keys.AppendUint64(start, uint64(fromMicros))
	}
	var entries []headEntry
	horizon := int64(math.MaxInt64)
	full := false
	err := r.Scan(start, kv.PrefixEnd(keys.Due), func(key, value []byte) (bool, error) {
		at, ok := DueAtOfKey(key)
		if !ok {
			return true, nil
		}
		if at >= untilMicros || len(entries) == h.maxEntries {
			horizon, full = at, len(entries) == h.maxEntries
			return false, nil
		}
		entries = append(entries, headEntry{key: bytes.Clone(key), value: bytes.Clone(value), dueAt: at})
		return true, nil
	})
	if err != nil {
		return err
	}
	if full { // the bound split an instant: its entries must all be in, or all out
		entries = entries[:h.firstAtOrAfter(entries, horizon)]
	}
	h.entries, h.horizon, h.keepBefore, h.loaded = entries, horizon, untilMicros, true
	return nil
}

// Set takes one committed write of a due-index entry; the head keeps key and value. Writes
// of other keys, and entries at or beyond the horizon, are ignored; a new entry at or after
// the last Load's until is not kept either: the horizon comes down to it.
func (h *Head) Set(key, value []byte) {
	at, i, found, ok := h.locate(key)
	if !ok {
		return
	}
	if found {
		h.entries[i].value = value
		return
	}
	if at >= h.keepBefore { // far ahead: the head ends before it
		h.horizon = at
		h.entries = h.entries[:h.firstAtOrAfter(h.entries, at)]
		return
	}
	h.entries = slices.Insert(h.entries, i, headEntry{key: key, value: value, dueAt: at})
	if len(h.entries) > h.maxEntries {
		h.horizon = h.entries[h.maxEntries].dueAt
		h.entries = h.entries[:h.firstAtOrAfter(h.entries, h.horizon)]
	}
}

// Delete takes one committed delete of a due-index entry.
func (h *Head) Delete(key []byte) {
	if _, i, found, ok := h.locate(key); ok && found {
		h.entries = slices.Delete(h.entries, i, i+1)
	}
}

// locate finds key in a loaded head: its due instant, its index (or insertion point) and
// whether it is there. ok is false for keys the head does not keep.
func (h *Head) locate(key []byte) (at int64, i int, found, ok bool) {
	if !h.loaded {
		return 0, 0, false, false
	}
	at, ok = DueAtOfKey(key)
	if !ok || at >= h.horizon {
		return 0, 0, false, false
	}
	i, found = slices.BinarySearchFunc(h.entries, key, func(e headEntry, k []byte) int { return bytes.Compare(e.key, k) })
	return at, i, found, true
}

// firstAtOrAfter is the index of the first entry due at or after at.
func (h *Head) firstAtOrAfter(entries []headEntry, at int64) int {
	i, _ := slices.BinarySearchFunc(entries, at, func(e headEntry, t int64) int {
		if e.dueAt < t {
			return -1
		}
		return 1
	})
	return i
}

// Scan answers ScanDue from the head, when it covers loggedNowMicros or when the budget cuts
// the scan inside the head (a backlog of more due entries than the head holds is then served
// from the head until it drains); ok is false otherwise (Load it, or scan the store). When the
// head holds nothing after the returned refs, the next due instant reported is the horizon: no
// entry is earlier, and one was there at Load.
func (h *Head) Scan(loggedNowMicros int64, budget Budget) (res *Result, ok bool, err error) {
	if !h.loaded {
		return nil, false, nil
	}
	res, err = ScanDue(headReader{h}, loggedNowMicros, budget)
	if err != nil {
		return nil, true, err
	}
	if !h.Covers(loggedNowMicros) {
		// Exact only if the budget stopped the scan at an entry the head holds: every entry
		// before it is in the head, and the index has more due from there on.
		return res, res.More, nil
	}
	if !res.More && res.NextDueAtMicros == 0 && h.horizon != math.MaxInt64 {
		res.NextDueAtMicros = h.horizon
	}
	return res, true, nil
}

// headReader reads the head as a kv.Reader (ScanDue's input).
type headReader struct{ h *Head }

func (r headReader) Get(key []byte) ([]byte, bool, error) {
	i, found := slices.BinarySearchFunc(r.h.entries, key, func(e headEntry, k []byte) int { return bytes.Compare(e.key, k) })
	if !found {
		return nil, false, nil
	}
	return bytes.Clone(r.h.entries[i].value), true, nil
}

func (r headReader) Scan(start, end []byte, fn func(key, value []byte) (bool, error)) error {
	i, _ := slices.BinarySearchFunc(r.h.entries, start, func(e headEntry, k []byte) int { return bytes.Compare(e.key, k) })
	for ; i < len(r.h.entries); i++ {
		e := r.h.entries[i]
		if end != nil && bytes.Compare(e.key, end) >= 0 {
			return nil
		}
		more, err := fn(e.key, e.value)
		if err != nil || !more {
			return err
		}
	}
	return nil
}
