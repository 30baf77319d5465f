package engine

import (
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// Recorder passes writes through to its View and remembers what the engine keeps from an
// apply, for an Applied event: every due-index write and the earliest due entry written (the
// engine keeps its due head and due floor exact with them), and the earliest visibility-index
// entry set per queue (the engine's hints of when a waited queue next has a visible message),
// a resumed queue's included, and a capped queue's whose share or counted leases changed.
type Recorder struct {
	kv.View
	// MinDue is the earliest due-index entry written (0: none).
	MinDue int64
	// Writes are the due-index writes, in order.
	Writes []DueWrite
	// Visible are the earliest visibility-index entries set, one per queue, in the order the
	// queues were first written.
	Visible []VisibleSet
}

// VisibleSet is the earliest visibility-index entry an apply set in a queue: Queue is the
// queue's keys.QueuePrefix.
type VisibleSet struct {
	Queue    string
	AtMicros int64
}

// Set implements kv.View.
func (d *Recorder) Set(key, value []byte) error {
	if at, ok := due.DueAtOfKey(key); ok {
		if at > 0 && (d.MinDue == 0 || at < d.MinDue) {
			d.MinDue = at
		}
		d.Writes = append(d.Writes, DueWrite{Key: key, Value: value})
	} else if queue, ok := keys.VisibilityQueuePrefix(key); ok {
		if at, err := keys.VisibilityInstant(queue, key); err == nil {
			d.visible(string(queue), at)
		}
	} else if queue, ok := keys.QueueShareQueuePrefix(key); ok {
		d.visible(string(queue), 0) // the queue's share changed: its waiting receives look again
	}
	return d.View.Set(key, value)
}

// visible lowers queue's earliest set entry to at.
func (d *Recorder) visible(queue string, at int64) {
	for i := range d.Visible {
		if d.Visible[i].Queue == queue {
			d.Visible[i].AtMicros = min(d.Visible[i].AtMicros, at)
			return
		}
	}
	d.Visible = append(d.Visible, VisibleSet{Queue: queue, AtMicros: at})
}

// Delete implements kv.View. The deletion of a queue's pause record (a resume), of its share or
// of a lease entry its share counts (a lease ended by a command) counts as a visibility entry
// set at the beginning of time: the queue's waiting receives look again.
func (d *Recorder) Delete(key []byte) error {
	if _, ok := due.DueAtOfKey(key); ok {
		d.Writes = append(d.Writes, DueWrite{Key: key})
	} else if queue, ok := keys.QueuePauseQueuePrefix(key); ok {
		d.visible(string(queue), 0)
	} else if queue, ok := keys.QueueShareQueuePrefix(key); ok {
		d.visible(string(queue), 0) // a lease the queue's share counts ended (ack, release)
	}
	return d.View.Delete(key)
}
