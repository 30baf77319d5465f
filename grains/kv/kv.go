// Package kv owns the narrow key-value view the state machines apply through: the View
// interface, a write Buffer that merges into its parent only on success, Memory, the
// in-memory twin of a partition's store, and the views a partition's commit transaction reads
// through: ReadCache (with Warm) and FloorView (with Floors).
package kv

import "bytes"

// Reader reads a sorted key space.
type Reader interface {
	// Get returns the value stored under key. The caller may keep the returned slice.
	Get(key []byte) (value []byte, found bool, err error)
	// Scan calls fn for every key in [start, end) in ascending byte order; a nil end means no
	// upper bound. fn returns false to stop. Key and value are valid only during the call.
	// Whether writes made from inside fn are seen by the same scan is unspecified (the Badger
	// view reads a snapshot, Memory and Buffer do not): collect first, then write.
	Scan(start, end []byte, fn func(key, value []byte) (bool, error)) error
}

// View is a Reader that can be written.
type View interface {
	Reader
	// Set stores value under key. The view may keep both slices; callers must not reuse them.
	Set(key, value []byte) error
	// Delete removes key; deleting an absent key is not an error.
	Delete(key []byte) error
}

// PrefixEnd returns the smallest key greater than every key with the given prefix, or nil if
// there is none (the prefix is all 0xff).
func PrefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// ScanPrefix calls fn for every key with the given prefix, in ascending order.
func ScanPrefix(r Reader, prefix []byte, fn func(key, value []byte) (bool, error)) error {
	return r.Scan(prefix, PrefixEnd(prefix), fn)
}

func inRange(key, start, end []byte) bool {
	return bytes.Compare(key, start) >= 0 && (end == nil || bytes.Compare(key, end) < 0)
}
