package engine

import (
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/kv"
)

// DueRecorder passes writes through to its View and remembers every due-index write and the
// earliest due entry written, for an Applied event (the engine keeps its due head and due floor
// exact with them).
type DueRecorder struct {
	kv.View
	// MinDue is the earliest due-index entry written (0: none).
	MinDue int64
	// Writes are the due-index writes, in order.
	Writes []DueWrite
}

// Set implements kv.View.
func (d *DueRecorder) Set(key, value []byte) error {
	if at, ok := due.DueAtOfKey(key); ok {
		if at > 0 && (d.MinDue == 0 || at < d.MinDue) {
			d.MinDue = at
		}
		d.Writes = append(d.Writes, DueWrite{Key: key, Value: value})
	}
	return d.View.Set(key, value)
}

// Delete implements kv.View.
func (d *DueRecorder) Delete(key []byte) error {
	if _, ok := due.DueAtOfKey(key); ok {
		d.Writes = append(d.Writes, DueWrite{Key: key})
	}
	return d.View.Delete(key)
}
