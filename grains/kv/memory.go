package kv

import (
	"bytes"
	"slices"
	"sort"
)

// Memory is an in-memory View: the twin of a partition's Badger store in tests and tools.
// It is not safe for concurrent use.
type Memory struct {
	values map[string][]byte
	keys   []string // sorted; rebuilt lazily when dirty
	dirty  bool
}

// NewMemory returns an empty store.
func NewMemory() *Memory { return &Memory{values: map[string][]byte{}} }

// Get implements Reader.
func (m *Memory) Get(key []byte) ([]byte, bool, error) {
	v, ok := m.values[string(key)]
	if !ok {
		return nil, false, nil
	}
	return bytes.Clone(v), true, nil
}

// Set implements View.
func (m *Memory) Set(key, value []byte) error {
	if _, ok := m.values[string(key)]; !ok {
		m.dirty = true
	}
	m.values[string(key)] = bytes.Clone(value)
	return nil
}

// Delete implements View.
func (m *Memory) Delete(key []byte) error {
	if _, ok := m.values[string(key)]; ok {
		delete(m.values, string(key))
		m.dirty = true
	}
	return nil
}

// Scan implements Reader. Writes from inside fn are allowed; the scan sees the keys present
// when it started.
func (m *Memory) Scan(start, end []byte, fn func(key, value []byte) (bool, error)) error {
	keys := m.sorted()
	i := sort.SearchStrings(keys, string(start))
	for ; i < len(keys); i++ {
		k := keys[i]
		if end != nil && k >= string(end) {
			break
		}
		v, ok := m.values[k]
		if !ok {
			continue
		}
		more, err := fn([]byte(k), v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// Len reports the number of keys.
func (m *Memory) Len() int { return len(m.values) }

// Clone returns an independent copy.
func (m *Memory) Clone() *Memory {
	c := NewMemory()
	for k, v := range m.values {
		c.values[k] = bytes.Clone(v)
	}
	c.dirty = true
	return c
}

// Equal reports whether two stores hold the same keys and values.
func (m *Memory) Equal(o *Memory) bool {
	if len(m.values) != len(o.values) {
		return false
	}
	for k, v := range m.values {
		if w, ok := o.values[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

func (m *Memory) sorted() []string {
	if m.dirty || m.keys == nil {
		m.keys = m.keys[:0]
		for k := range m.values {
			m.keys = append(m.keys, k)
		}
		slices.Sort(m.keys)
		m.dirty = false
	}
	return slices.Clone(m.keys)
}
