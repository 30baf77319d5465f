package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/grains/kv"
)

// AppliedMark is how far a partition's state has applied its Raft log: the index of the last
// applied entry and that entry's logged time (Unix microseconds).
type AppliedMark struct {
	Index            uint64
	LoggedTimeMicros int64
}

// PartitionState is partition n's state in the silo store: the state machines' keys, under
// d/<n>/, and the mark of the last entry applied to them (r/<n>/applied), written in the same
// transaction as the entry's effects. Applies are not synced: they follow log entries that are
// durable already, and a crash that takes an apply back leaves its mark behind too, so the
// entries after the surviving mark are applied again. Applies of one partition are
// serialized; different partitions apply concurrently. Views read the last applied state.
type PartitionState struct {
	store      *SiloStore
	n          int
	prefix     []byte // d/<n>/
	appliedKey []byte // r/<n>/applied
	mu         sync.Mutex
	applied    atomic.Pointer[AppliedMark]
}

// openPartitionStates loads every partition's applied mark.
func openPartitionStates(s *SiloStore) ([]*PartitionState, error) {
	states := make([]*PartitionState, s.partitions)
	txn, done := s.read(s.versions.durable)
	defer done()
	for n := range s.partitions {
		p := &PartitionState{store: s, n: n, prefix: statePrefix(n), appliedKey: raftAppliedKey(n)}
		value, found, err := getRaw(txn, p.appliedKey)
		if err != nil {
			return nil, orrery.Wrap(orrery.CodeUnavailable, err, "silo store %s: partition %d: read the applied mark", s.dir, n)
		}
		mark := &AppliedMark{}
		if found {
			if len(value) != 16 {
				return nil, orrery.Errorf(orrery.CodeInternal, "silo store %s: partition %d: %q holds %d bytes, want 16", s.dir, n, p.appliedKey, len(value))
			}
			mark.Index = binary.BigEndian.Uint64(value)
			mark.LoggedTimeMicros = int64(binary.BigEndian.Uint64(value[8:]))
		}
		p.applied.Store(mark)
		states[n] = p
	}
	return states, nil
}

// Partition returns partition n's state.
func (s *SiloStore) Partition(n int) (*PartitionState, error) {
	if n < 0 || n >= len(s.states) {
		return nil, orrery.Errorf(orrery.CodeInternal, "partition %d: not a partition of the silo store (0 to %d)", n, len(s.states)-1)
	}
	return s.states[n], nil
}

// key is the store key of the state key k.
func (p *PartitionState) key(k []byte) []byte {
	return append(append(make([]byte, 0, len(p.prefix)+len(k)), p.prefix...), k...)
}

// Partition is the partition's number.
func (p *PartitionState) Partition() int { return p.n }

// Applied is the mark of the last entry applied to the state (the zero mark before any).
func (p *PartitionState) Applied() AppliedMark { return *p.applied.Load() }

// MaxBatchBytes bounds one Apply: its writes must stay strictly below it, in Badger's
// accounting of key + value + 12 bytes per write (keys include the partition's prefix of
// 7 bytes).
func (p *PartitionState) MaxBatchBytes() int64 { return p.store.db.MaxBatchSize() }

// MaxBatchWrites bounds one Apply: it must make strictly fewer writes than this.
func (p *PartitionState) MaxBatchWrites() int64 { return p.store.db.MaxBatchCount() }

// MaxValueBytes is the longest value a Txn accepts: every value stays inline in the LSM tree,
// below Options.ValueThresholdBytes, so the value log is never written.
func (p *PartitionState) MaxValueBytes() int64 { return p.store.opts.ValueThresholdBytes - 1 }

// Apply runs fn in one read-write transaction over the partition's state as last applied,
// and commits its writes with mark, which must be after the current one (a greater index and
// a logged time not earlier). When Apply returns nil the writes are applied: views read them.
// They are not synced (see PartitionState). If fn returns an error, nothing is written and
// Apply returns it unchanged; a refused write (ErrBatchTooBig, ErrValueTooBig) keeps the
// transaction from committing even if fn ignored it. A failed commit poisons the store
// (ErrCommitFailed).
func (p *PartitionState) Apply(mark AppliedMark, fn func(txn *Txn) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.store
	s.lifeMu.RLock()
	defer s.lifeMu.RUnlock()
	if err := s.usable(); err != nil {
		return err
	}
	last := p.Applied()
	if mark.Index <= last.Index || mark.LoggedTimeMicros < last.LoggedTimeMicros {
		return orrery.Errorf(orrery.CodeInternal, "partition %d: applied mark %+v does not follow %+v", p.n, mark, last)
	}
	readAt := s.versions.beginRead(true)
	defer s.versions.endRead(readAt)
	btxn := s.db.NewTransactionAt(readAt, true)
	defer btxn.Discard()
	t := &Txn{state: p, txn: btxn}
	err := fn(t)
	t.finished = true
	if err != nil {
		return err
	}
	if t.writeErr != nil {
		return t.writeErr
	}
	value := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, mark.Index), uint64(mark.LoggedTimeMicros))
	if err := btxn.Set(p.appliedKey, value); err != nil {
		if errors.Is(err, badger.ErrTxnTooBig) {
			return s.errBatchTooBig(err)
		}
		return orrery.Wrap(orrery.CodeInternal, err, "partition %d: write the applied mark", p.n)
	}
	if _, err := s.commit(btxn); err != nil {
		return err
	}
	p.applied.Store(&mark)
	return nil
}

// View runs fn over a read-only snapshot of the partition's state as last applied. Reads that
// must stay bounded wrap the reader with NewBudgetReader.
func (p *PartitionState) View(fn func(r kv.Reader) error) error {
	s := p.store
	s.lifeMu.RLock()
	defer s.lifeMu.RUnlock()
	if err := s.usable(); err != nil {
		return err
	}
	at := s.versions.beginRead(true)
	txn := s.db.NewTransactionAt(at, false)
	defer func() {
		txn.Discard()
		s.versions.endRead(at)
	}()
	r := &reader{txn: txn, prefix: p.prefix}
	defer func() { r.finished = true }()
	return fn(r)
}

// String names the partition state in logs.
func (p *PartitionState) String() string { return fmt.Sprintf("partition %d of %s", p.n, p.store.dir) }
