package kv

import "bytes"

// MaxReadCacheKeys bounds how many keys one ReadCache remembers for its transaction; beyond
// it, reads of keys it does not hold go to the warm set or the parent (still correct).
const MaxReadCacheKeys = 1 << 16

// ReadCache is a View over a parent that remembers what Get returned, found or absent, and
// keeps what it remembers in step with the writes made through it (a key only written is not
// remembered). It is correct only while
// every write to the parent goes through it, which is how a partition's commit transaction
// uses it: then a key read by several mutations or commands of one group (a schedule loaded
// and re-read for its retained size, the partition's counters, the enqueue sequence) costs
// one read of the store. Scans go to the parent, which sees the writes.
//
// With a Warm set, reads also consult what earlier committed transactions read and wrote,
// and Promote hands this transaction's knowledge on once its parent has committed.
type ReadCache struct {
	parent View
	warm   *Warm
	seen   map[string]cachedRead
}

type cachedRead struct {
	value []byte
	found bool
}

// NewReadCache returns an empty cache over parent, consulting warm (nil: none).
func NewReadCache(parent View, warm *Warm) *ReadCache {
	return &ReadCache{parent: parent, warm: warm, seen: map[string]cachedRead{}}
}

// Get implements Reader.
func (c *ReadCache) Get(key []byte) ([]byte, bool, error) {
	r, ok := c.seen[string(key)]
	if !ok && c.warm != nil {
		r, ok = c.warm.entries[string(key)]
	}
	if ok {
		if !r.found {
			return nil, false, nil
		}
		return bytes.Clone(r.value), true, nil
	}
	value, found, err := c.parent.Get(key)
	if err == nil {
		c.remember(key, cachedRead{value: bytes.Clone(value), found: found})
	}
	return value, found, err
}

// Scan implements Reader.
func (c *ReadCache) Scan(start, end []byte, fn func(key, value []byte) (bool, error)) error {
	return c.parent.Scan(start, end, fn)
}

// Set implements View.
func (c *ReadCache) Set(key, value []byte) error {
	if err := c.parent.Set(key, value); err != nil {
		c.forget(key) // the parent's state is unknown now
		return err
	}
	if c.holds(key) {
		c.remember(key, cachedRead{value: bytes.Clone(value), found: true})
	}
	return nil
}

// Delete implements View.
func (c *ReadCache) Delete(key []byte) error {
	if err := c.parent.Delete(key); err != nil {
		c.forget(key)
		return err
	}
	if c.holds(key) {
		c.remember(key, cachedRead{})
	}
	return nil
}

// Promote moves what this cache knows into its Warm set. Call it only after the parent's
// writes are committed; a cache whose transaction failed is dropped instead.
func (c *ReadCache) Promote() {
	if c.warm == nil {
		return
	}
	for k, r := range c.seen {
		c.warm.put(k, r)
	}
	clear(c.seen)
}

// holds reports whether the cache has an entry for key, which a write must then keep
// current. Keys only written (new messages, index entries, ledger records) are not added:
// they would crowd out the keys that are read again.
func (c *ReadCache) holds(key []byte) bool {
	if _, held := c.seen[string(key)]; held {
		return true
	}
	if c.warm != nil {
		_, held := c.warm.entries[string(key)]
		return held
	}
	return false
}

func (c *ReadCache) remember(key []byte, r cachedRead) {
	if _, held := c.seen[string(key)]; held || len(c.seen) < MaxReadCacheKeys {
		c.seen[string(key)] = r
		return
	}
	c.forget(key)
}

// forget drops key from the cache and, since the warm set no longer describes the parent
// for it, from the warm set too.
func (c *ReadCache) forget(key []byte) {
	delete(c.seen, string(key))
	if c.warm != nil {
		c.warm.drop(string(key))
	}
}

// Warm is what committed transactions read and wrote, for the next transactions of the same
// single writer: the reads that recur (a schedule loaded at every occurrence, a lane's
// counters) then skip the store. It holds at most its byte bound of keys and values and
// starts over when full, so it costs nothing to maintain.
type Warm struct {
	entries  map[string]cachedRead
	bytes    int
	maxBytes int
}

// NewWarm returns an empty warm set of at most maxBytes of keys and values.
func NewWarm(maxBytes int) *Warm {
	return &Warm{entries: map[string]cachedRead{}, maxBytes: maxBytes}
}

// Len reports how many keys the warm set holds.
func (w *Warm) Len() int { return len(w.entries) }

// Reset empties the warm set (when the store it describes may have changed behind it).
func (w *Warm) Reset() {
	clear(w.entries)
	w.bytes = 0
}

func (w *Warm) put(key string, r cachedRead) {
	w.drop(key)
	size := len(key) + len(r.value)
	if size > w.maxBytes {
		return
	}
	if w.bytes+size > w.maxBytes {
		w.Reset()
	}
	w.entries[key] = r
	w.bytes += size
}

func (w *Warm) drop(key string) {
	if old, ok := w.entries[key]; ok {
		w.bytes -= len(key) + len(old.value)
		delete(w.entries, key)
	}
}
