package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"

	"github.com/dgraph-io/badger/v4"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/grains/kv"
)

// maxStateKeyBytes is the longest state key a snapshot's stream may hold (Badger's largest key).
const maxStateKeyBytes = 65000

// writeOverheadBytes is what Badger counts for one write beside its key and value.
const writeOverheadBytes = 12

// installStep is a step of an Install, after which its test hook runs.
type installStep int

const (
	// stepStaged: a transaction of the new generation's keys committed.
	stepStaged installStep = iota
	// stepSwitched: the switch to the new generation is durable.
	stepSwitched
	// stepDeleted: a transaction deleting keys of a replaced or abandoned generation committed.
	stepDeleted
)

// errInstallStopped is what Install returns when its test hook stopped it, as a crash would.
var errInstallStopped = errors.New("install stopped by its test hook")

// step runs the test hook after step s.
func (p *PartitionState) step(s installStep) error {
	if p.installHook != nil && p.installHook(s) {
		return errInstallStopped
	}
	return nil
}

// Install replaces the partition's whole state with a snapshot's: the records of chunks (a
// StateSnapshot's stream, read until io.EOF) as its keys, and mark as its applied mark (it
// need not follow the current one). It is atomic across crashes: until it returns nil, Views,
// Applies and a reopened store see the old state and mark; once it returns nil, they see the
// new ones, durably.
//
// The state may be far larger than one transaction, so the records are written under the next
// generation (d/<n>/<gen+1>/), which nothing reads, in as many unsynced transactions as they
// need. Then one synced transaction switches r/<n>/generation and r/<n>/applied to the new
// generation and mark; its sync makes the staged transactions durable too, since the
// write-ahead log is one sequence. Then the old generation's keys are deleted, in bounded
// transactions. A crash before the switch leaves staged keys of a generation nothing
// references, a crash after it the old generation's keys: the next open deletes both (they are
// the generations just after and just before the current one).
//
// If chunks fails, Install deletes what it staged and returns an error wrapping the chunks'
// error, and the state is the old one; a stream that does not decode fails the same way, with
// an Internal error. If the staged keys cannot be deleted then, or the old generation's keys
// after the switch, it returns that error: the store must be closed and opened again, which
// deletes them, before the next Install. Install excludes the partition's Applies while it
// runs; Views and Snapshots go on, each reading one generation.
func (p *PartitionState) Install(mark AppliedMark, chunks Chunks) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	old, next := p.gen, p.gen+1
	prefix := generationPrefix(p.n, next)
	if err := p.stage(prefix, chunks); err != nil {
		if errors.Is(err, errInstallStopped) {
			return err
		}
		if cleanup := p.deleteGeneration(next); cleanup != nil {
			return orrery.Wrap(orrery.CodeOf(cleanup), cleanup, "partition %d: delete the keys staged for a failed install", p.n)
		}
		return err
	}
	if err := p.switchTo(next, prefix, mark); err != nil {
		return err
	}
	if err := p.step(stepSwitched); err != nil {
		return err
	}
	if err := p.deleteGeneration(old); err != nil {
		return orrery.Wrap(orrery.CodeOf(err), err, "partition %d: delete the state generation %d an install replaced", p.n, old)
	}
	return nil
}

// stage writes the records of chunks under prefix, in unsynced transactions of about half the
// store's limit each.
func (p *PartitionState) stage(prefix []byte, chunks Chunks) error {
	dec := snapshotDecoder{maxKey: maxStateKeyBytes - len(prefix), maxValue: p.MaxValueBytes()}
	limitBytes, limitWrites := p.MaxBatchBytes()/2, p.MaxBatchWrites()/2
	var batch []storeWrite
	var batchBytes int64
	flush := func() error {
		err := p.commitWrites(batch, stepStaged)
		batch, batchBytes = batch[:0], 0
		return err
	}
	for n := 0; ; n++ {
		chunk, err := chunks.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return orrery.Wrap(orrery.CodeUnavailable, err, "partition %d: install: snapshot chunk %d", p.n, n)
		}
		err = dec.feed(chunk, func(key, value []byte) error {
			w := storeWrite{key: append(bytes.Clone(prefix), key...), value: bytes.Clone(value)}
			batch = append(batch, w)
			batchBytes += int64(len(w.key)+len(w.value)) + writeOverheadBytes
			if batchBytes >= limitBytes || int64(len(batch)) >= limitWrites {
				return flush()
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if err := dec.finish(); err != nil {
		return err
	}
	return flush()
}

// switchTo makes generation gen (its keys under prefix) the partition's state at mark, in one
// synced transaction, and shows it to Views and Applies.
func (p *PartitionState) switchTo(gen uint64, prefix []byte, mark AppliedMark) error {
	s := p.store
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.lifeMu.RLock()
	defer s.lifeMu.RUnlock()
	p.genMu.Lock()
	defer p.genMu.Unlock()
	at, err := s.write(func(txn *badger.Txn) error {
		if err := txn.Set(p.generationKey, binary.BigEndian.AppendUint64(nil, gen)); err != nil {
			return err
		}
		return txn.Set(p.appliedKey, encodeMark(mark))
	})
	if err != nil {
		return orrery.Wrap(orrery.CodeOf(err), err, "partition %d: install: switch to state generation %d at %+v", p.n, gen, mark)
	}
	s.published(at)
	p.gen, p.prefix = gen, prefix
	p.applied.Store(&mark)
	return nil
}

// deleteOrphans deletes the keys of the generations a crashed Install left (the one before
// the current generation and the one after it), then refuses a state with keys of any other.
func (p *PartitionState) deleteOrphans() error {
	if p.gen > 0 {
		if err := p.deleteGeneration(p.gen - 1); err != nil {
			return err
		}
	}
	if err := p.deleteGeneration(p.gen + 1); err != nil {
		return err
	}
	s := p.store
	all := statePrefix(p.n)
	for _, r := range [][2][]byte{{all, p.prefix}, {kv.PrefixEnd(p.prefix), kv.PrefixEnd(all)}} {
		txn, done := s.readApplied()
		var stray []byte
		err := iterate(txn, r[0], r[1], func(key, _ []byte) (bool, error) {
			stray = bytes.Clone(key)
			return false, nil
		})
		done()
		if err != nil {
			return err
		}
		if stray != nil {
			return orrery.Errorf(orrery.CodeInternal, "silo store %s: partition %d: key %q is not of its state generation %d (%q): a store of another layout",
				s.dir, p.n, stray, p.gen, p.prefix)
		}
	}
	return nil
}

// deleteGeneration deletes partition's keys of generation gen, in unsynced transactions of a
// bounded size; a crash before they are all gone leaves the rest to the next open.
func (p *PartitionState) deleteGeneration(gen uint64) error {
	s := p.store
	prefix := generationPrefix(p.n, gen)
	end := kv.PrefixEnd(prefix)
	limitBytes, limitWrites := p.MaxBatchBytes()/2, p.MaxBatchWrites()/2
	from := prefix
	for {
		var batch []storeWrite
		var batchBytes int64
		err := func() error {
			s.lifeMu.RLock()
			defer s.lifeMu.RUnlock()
			if err := s.usable(); err != nil {
				return err
			}
			txn, done := s.readApplied()
			defer done()
			return iterate(txn, from, end, func(key, _ []byte) (bool, error) {
				batch = append(batch, storeWrite{key: bytes.Clone(key), delete: true})
				batchBytes += int64(len(key)) + writeOverheadBytes
				return batchBytes < limitBytes && int64(len(batch)) < limitWrites, nil
			})
		}()
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			return nil
		}
		if err := p.commitWrites(batch, stepDeleted); err != nil {
			return err
		}
		from = append(batch[len(batch)-1].key, 0)
	}
}

// storeWrite is one write of a store key: a set of value, or a delete.
type storeWrite struct {
	key, value []byte
	delete     bool
}

// commitWrites commits writes in as many unsynced transactions as Badger's limits need,
// running the test hook after each.
func (p *PartitionState) commitWrites(writes []storeWrite, step installStep) error {
	for len(writes) > 0 {
		n, err := p.store.commitUnsynced(writes)
		if err != nil {
			return err
		}
		writes = writes[n:]
		if err := p.step(step); err != nil {
			return err
		}
	}
	return nil
}
