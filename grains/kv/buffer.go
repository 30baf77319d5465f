package kv

import (
	"bytes"
	"slices"
)

// Buffer collects writes over a parent view. Reads see the buffer's own writes over the
// parent's state; nothing reaches the parent until Commit. Discarding a Buffer (dropping it)
// leaves the parent untouched, which is how a failing mutation leaves no writes.
type Buffer struct {
	parent View
	writes map[string]write
}

type write struct {
	value   []byte
	deleted bool
}

// NewBuffer returns an empty buffer over parent.
func NewBuffer(parent View) *Buffer {
	return &Buffer{parent: parent, writes: map[string]write{}}
}

// Get implements Reader.
func (b *Buffer) Get(key []byte) ([]byte, bool, error) {
	if w, ok := b.writes[string(key)]; ok {
		if w.deleted {
			return nil, false, nil
		}
		return bytes.Clone(w.value), true, nil
	}
	return b.parent.Get(key)
}

// Set implements View.
func (b *Buffer) Set(key, value []byte) error {
	b.writes[string(key)] = write{value: bytes.Clone(value)}
	return nil
}

// Delete implements View.
func (b *Buffer) Delete(key []byte) error {
	b.writes[string(key)] = write{deleted: true}
	return nil
}

// Len reports how many keys the buffer would write or delete.
func (b *Buffer) Len() int { return len(b.writes) }

// Scan implements Reader, merging the buffer's writes with the parent's keys.
func (b *Buffer) Scan(start, end []byte, fn func(key, value []byte) (bool, error)) error {
	own := b.sortedKeys(start, end)
	next := 0
	stopped := false
	// emitOwnBefore emits buffered keys strictly below limit (all of them when limit is nil).
	emitOwnBefore := func(limit []byte) error {
		for next < len(own) && (limit == nil || own[next] < string(limit)) {
			w := b.writes[own[next]]
			next++
			if w.deleted {
				continue
			}
			more, err := fn([]byte(own[next-1]), w.value)
			if err != nil {
				return err
			}
			if !more {
				stopped = true
				return nil
			}
		}
		return nil
	}
	err := b.parent.Scan(start, end, func(key, value []byte) (bool, error) {
		if err := emitOwnBefore(key); err != nil || stopped {
			return false, err
		}
		if next < len(own) && own[next] == string(key) {
			w := b.writes[own[next]]
			next++
			if w.deleted {
				return true, nil
			}
			return fn(key, w.value)
		}
		more, err := fn(key, value)
		if !more {
			stopped = true
		}
		return more, err
	})
	if err != nil || stopped {
		return err
	}
	return emitOwnBefore(nil)
}

// Commit writes the buffered changes to the parent and empties the buffer: into a parent
// Buffer by merging maps (the smaller into the larger, so a batch of many small mutations
// does not copy its growing set of writes again and again), into any other view one key at a
// time (in no particular order: a view's state does not depend on it).
func (b *Buffer) Commit() error {
	if parent, ok := b.parent.(*Buffer); ok {
		if len(b.writes) > len(parent.writes) {
			for k, w := range parent.writes {
				if _, own := b.writes[k]; !own {
					b.writes[k] = w
				}
			}
			parent.writes, b.writes = b.writes, parent.writes
		} else {
			for k, w := range b.writes {
				parent.writes[k] = w // the buffer gives up its copies; nothing else holds them
			}
		}
		clear(b.writes)
		return nil
	}
	for k, w := range b.writes {
		var err error
		if w.deleted {
			err = b.parent.Delete([]byte(k))
		} else {
			err = b.parent.Set([]byte(k), w.value)
		}
		if err != nil {
			return err
		}
	}
	clear(b.writes)
	return nil
}

func (b *Buffer) sortedKeys(start, end []byte) []string {
	keys := make([]string, 0, len(b.writes))
	for k := range b.writes {
		if start == nil || inRange([]byte(k), start, end) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
