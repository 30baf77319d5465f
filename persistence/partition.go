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
// d/<n>/<gen>/ (gen the state's generation, r/<n>/generation), and the mark of the last entry
// applied to them (r/<n>/applied), written in the same transaction as the entry's effects.
// Applies are not synced: they follow log entries that are durable already, and a crash that
// takes an apply back leaves its mark behind too, so the entries after the surviving mark are
// applied again. Applies of one partition are serialized; different partitions apply
// concurrently. Views read the last applied state. Snapshot reads the whole state, and Install
// replaces it with a snapshot's under the next generation (snapshot.go, install.go).
type PartitionState struct {
	store         *SiloStore
	n             int
	appliedKey    []byte // r/<n>/applied
	generationKey []byte // r/<n>/generation
	// mu serializes Apply and Install.
	mu sync.Mutex
	// genMu guards gen and prefix. Install changes them under mu and holds genMu exclusively
	// around the commit of its switch, so a View takes its prefix and its read version
	// together: both before the switch or both after it.
	genMu   sync.RWMutex
	gen     uint64
	prefix  []byte // d/<n>/<gen>/
	applied atomic.Pointer[AppliedMark]
	// installHook, set by tests, is called after each step of an Install (installStep); true
	// stops the Install there, as a crash would.
	installHook func(installStep) bool
}

// openPartitionStates loads every partition's applied mark and generation, and deletes the
// keys of the generations a crashed Install left (see PartitionState.Install).
func openPartitionStates(s *SiloStore) ([]*PartitionState, error) {
	states := make([]*PartitionState, s.partitions)
	txn, done := s.read(s.versions.durable)
	for n := range s.partitions {
		p := &PartitionState{store: s, n: n, appliedKey: raftAppliedKey(n), generationKey: raftGenerationKey(n)}
		mark, gen, err := p.load(txn)
		if err != nil {
			done()
			return nil, err
		}
		p.applied.Store(&mark)
		p.gen, p.prefix = gen, generationPrefix(n, gen)
		states[n] = p
	}
	done()
	for _, p := range states {
		if err := p.deleteOrphans(); err != nil {
			return nil, err
		}
	}
	return states, nil
}

// load reads the partition's applied mark and generation in txn.
func (p *PartitionState) load(txn *badger.Txn) (AppliedMark, uint64, error) {
	s := p.store
	var mark AppliedMark
	value, found, err := getRaw(txn, p.appliedKey)
	if err != nil {
		return mark, 0, orrery.Wrap(orrery.CodeUnavailable, err, "silo store %s: partition %d: read the applied mark", s.dir, p.n)
	}
	if found {
		if len(value) != 16 {
			return mark, 0, orrery.Errorf(orrery.CodeInternal, "silo store %s: partition %d: %q holds %d bytes, want 16", s.dir, p.n, p.appliedKey, len(value))
		}
		mark.Index = binary.BigEndian.Uint64(value)
		mark.LoggedTimeMicros = int64(binary.BigEndian.Uint64(value[8:]))
	}
	value, found, err = getRaw(txn, p.generationKey)
	if err != nil {
		return mark, 0, orrery.Wrap(orrery.CodeUnavailable, err, "silo store %s: partition %d: read the state's generation", s.dir, p.n)
	}
	var gen uint64
	if found {
		if len(value) != 8 {
			return mark, 0, orrery.Errorf(orrery.CodeInternal, "silo store %s: partition %d: %q holds %d bytes, want 8", s.dir, p.n, p.generationKey, len(value))
		}
		gen = binary.BigEndian.Uint64(value)
	}
	return mark, gen, nil
}

// encodeMark is mark as stored under r/<n>/applied.
func encodeMark(mark AppliedMark) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, mark.Index), uint64(mark.LoggedTimeMicros))
}

// Partition returns partition n's state.
func (s *SiloStore) Partition(n int) (*PartitionState, error) {
	if n < 0 || n >= len(s.states) {
		return nil, orrery.Errorf(orrery.CodeInternal, "partition %d: not a partition of the silo store (0 to %d)", n, len(s.states)-1)
	}
	return s.states[n], nil
}

// Partition is the partition's number.
func (p *PartitionState) Partition() int { return p.n }

// Applied is the mark of the last entry applied to the state (the zero mark before any).
func (p *PartitionState) Applied() AppliedMark { return *p.applied.Load() }

// MaxBatchBytes bounds one Apply: its writes must stay strictly below it, in Badger's
// accounting of key + value + 12 bytes per write (keys include the prefix of the partition
// and generation, 16 bytes).
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
	t := &Txn{state: p, prefix: p.prefix, txn: btxn}
	err := fn(t)
	t.finished = true
	if err != nil {
		return err
	}
	if t.writeErr != nil {
		return t.writeErr
	}
	encoded := encodeMark(mark)
	if err := btxn.Set(p.appliedKey, encoded); err != nil {
		if errors.Is(err, badger.ErrTxnTooBig) {
			return s.errBatchTooBig(err)
		}
		return orrery.Wrap(orrery.CodeInternal, err, "partition %d: write the applied mark", p.n)
	}
	if _, err := s.commit(btxn); err != nil {
		return err
	}
	s.written.addState(t.keys+1, t.bytes+len(p.appliedKey)+len(encoded))
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
	p.genMu.RLock()
	prefix := p.prefix
	at := s.versions.beginRead(true)
	p.genMu.RUnlock()
	txn := s.db.NewTransactionAt(at, false)
	defer func() {
		txn.Discard()
		s.versions.endRead(at)
	}()
	r := &reader{txn: txn, prefix: prefix}
	defer func() { r.finished = true }()
	return fn(r)
}

// String names the partition state in logs.
func (p *PartitionState) String() string { return fmt.Sprintf("partition %d of %s", p.n, p.store.dir) }
