package replication

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/persistence"
)

// errCrashed is what a crash point returns: the replica's process is gone from there on.
var errCrashed = errors.New("crashed (test crash point)")

// A replica's state machine: per group, an ordered map from log index to the entry applied
// there, which survives restarts (it stands for the durable state). Its snapshots are the
// map's records, encoded one after another in chunks of at most cluster.chunkBytes.

// Apply implements StateMachine: it records the entries and reports them applied, or with
// deferApply queues them for finishApplies, as an asynchronous state machine would.
func (r *replica) Apply(c Committed, applied func(error)) error {
	r.mu.Lock()
	r.events = append(r.events, event{kind: "apply", writes: len(c.Entries)})
	if r.deferApply || r.deferGroups[c.Group] {
		r.deferred = append(r.deferred, deferredApply{c, applied})
		r.mu.Unlock()
		return nil
	}
	r.apply(c)
	r.mu.Unlock()
	applied(nil)
	return nil
}

// deferredApply is a hand-over Apply queued (deferApply) and the callback that ends it.
type deferredApply struct {
	c       Committed
	applied func(error)
}

// apply records c's entries; r.mu is held.
func (r *replica) apply(c Committed) {
	r.applied[c.Group] = append(r.applied[c.Group], c.Entries...)
	a := r.index[c.Group]
	a.Index = c.AppliedIndex
	if n := len(c.Entries); n > 0 {
		a.LoggedTimeMicros = c.Entries[n-1].GetLoggedTimeUnixMicros()
	}
	r.index[c.Group] = a
}

// finishApplies records the entries Apply deferred and reports them applied; it reports
// whether there were any.
func (r *replica) finishApplies() bool {
	r.mu.Lock()
	deferred := r.deferred
	r.deferred = nil
	for _, d := range deferred {
		r.apply(d.c)
	}
	r.mu.Unlock()
	for _, d := range deferred {
		d.applied(nil)
	}
	return len(deferred) > 0
}

// Settle implements StateMachine: it records the outcomes.
func (r *replica) Settle(outcomes []Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes = append(r.outcomes, outcomes...)
}

// Snapshot implements StateMachine: a copy of the group's map, read in chunks.
func (r *replica) Snapshot(group int) (SnapshotReader, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &mapReader{entries: slices.Clone(r.applied[group]), index: r.index[group].Index, chunkBytes: r.chunkBytes}, nil
}

// Install implements StateMachine: it decodes every chunk into a staged map, and only then
// replaces the group's map and applied index with it; a crash point or a failed chunk leaves
// the old ones.
func (r *replica) Install(group int, meta SnapshotMeta, chunks Chunks) error {
	r.mu.Lock()
	crashAfter := r.crashInstallAfter
	r.mu.Unlock()
	var staged []Entry
	for n := 0; ; n++ {
		if crashAfter >= 0 && n == crashAfter {
			r.mu.Lock()
			r.crashed = true
			r.crashInstallAfter = -1
			r.mu.Unlock()
			return errCrashed
		}
		chunk, err := chunks.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read chunk %d: %w", n, err)
		}
		ents, err := decodeChunk(chunk)
		if err != nil {
			return err
		}
		staged = append(staged, ents...)
	}
	if n := len(staged); n > 0 && staged[n-1].Index > meta.Index {
		return fmt.Errorf("snapshot at %d holds entry %d", meta.Index, staged[n-1].Index)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied[group] = staged
	r.index[group] = Applied{Index: meta.Index, LoggedTimeMicros: meta.LoggedTimeMicros}
	r.installs[group]++
	return nil
}

// crashPersist is the replica's Persist crash point.
func (r *replica) crashPersist(writes []persistence.RaftWrite) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.crashBeforeRestorePersist {
		return false
	}
	for _, w := range writes {
		if w.Snapshot != nil {
			r.crashBeforeRestorePersist = false
			r.crashed = true
			return true
		}
	}
	return false
}

func (r *replica) isCrashed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.crashed
}

func (r *replica) installsOf(group int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.installs[group]
}

// appliedOf returns group's state: the entries applied, by index.
func (r *replica) appliedOf(group int) []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Entry(nil), r.applied[group]...)
}

// mapReader reads a copy of a group's map in chunks.
type mapReader struct {
	entries    []Entry
	index      uint64
	chunkBytes int
}

func (m *mapReader) AppliedIndex() uint64 { return m.index }
func (m *mapReader) Close() error         { return nil }

func (m *mapReader) Next() ([]byte, error) {
	if len(m.entries) == 0 {
		return nil, io.EOF
	}
	var chunk []byte
	for len(m.entries) > 0 {
		record := encodeRecord(m.entries[0])
		if len(chunk) > 0 && len(chunk)+len(record) > m.chunkBytes {
			break
		}
		chunk = append(chunk, record...)
		m.entries = m.entries[1:]
	}
	return chunk, nil
}

// encodeRecord is one map record: index, term, and the PartitionEntry's length and bytes.
func encodeRecord(e Entry) []byte {
	pe, err := proto.Marshal(e.PartitionEntry)
	if err != nil {
		panic(err)
	}
	b := binary.AppendUvarint(nil, e.Index)
	b = binary.AppendUvarint(b, e.Term)
	b = binary.AppendUvarint(b, uint64(len(pe)))
	return append(b, pe...)
}

func decodeChunk(chunk []byte) ([]Entry, error) {
	var ents []Entry
	for len(chunk) > 0 {
		var fields [3]uint64
		for i := range fields {
			v, n := binary.Uvarint(chunk)
			if n <= 0 {
				return nil, errors.New("corrupt chunk")
			}
			fields[i], chunk = v, chunk[n:]
		}
		if uint64(len(chunk)) < fields[2] {
			return nil, errors.New("corrupt chunk")
		}
		pe := &orreryv1.PartitionEntry{}
		if err := proto.Unmarshal(chunk[:fields[2]], pe); err != nil {
			return nil, err
		}
		chunk = chunk[fields[2]:]
		ents = append(ents, Entry{Index: fields[0], Term: fields[1], PartitionEntry: pe})
	}
	return ents, nil
}
