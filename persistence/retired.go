package persistence

import (
	"encoding/binary"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/orreryhq/orrery"
)

// RetiredSilos returns the ids of the silos the store records as retired from its cluster
// (RecordRetired), ascending; nil when none.
func (s *SiloStore) RetiredSilos() []uint64 {
	s.retiredMu.Lock()
	defer s.retiredMu.Unlock()
	return slices.Clone(s.retired)
}

// RecordRetired adds ids to the silos the store records as retired, in one synced write: when
// it returns nil they survive a crash. The record only grows: ids already recorded are kept,
// and a call that adds none writes nothing. Zero is not an id.
func (s *SiloStore) RecordRetired(ids []uint64) error {
	if slices.Contains(ids, 0) {
		return orrery.Invalid("retired", "a silo id must not be zero")
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.lifeMu.RLock()
	defer s.lifeMu.RUnlock()
	s.retiredMu.Lock()
	merged := slices.Clone(s.retired)
	s.retiredMu.Unlock()
	before := len(merged)
	merged = append(merged, ids...)
	slices.Sort(merged)
	merged = slices.Compact(merged)
	if len(merged) == before {
		return nil
	}
	value := make([]byte, 0, 8*len(merged))
	for _, id := range merged {
		value = binary.BigEndian.AppendUint64(value, id)
	}
	at, err := s.write(func(txn *badger.Txn) error { return txn.Set(siloRetiredKey, value) })
	if err != nil {
		return orrery.Wrap(orrery.CodeOf(err), err, "silo store %s: write the retired silos", s.dir)
	}
	s.published(at)
	s.retiredMu.Lock()
	s.retired = merged
	s.retiredMu.Unlock()
	return nil
}

// loadRetired reads the recorded retired silos, if any, at open.
func (s *SiloStore) loadRetired(txn *badger.Txn) error {
	value, found, err := getRaw(txn, siloRetiredKey)
	if err != nil {
		return orrery.Wrap(orrery.CodeUnavailable, err, "silo store %s: read the retired silos", s.dir)
	}
	if !found {
		return nil
	}
	if len(value) == 0 || len(value)%8 != 0 {
		return orrery.Errorf(orrery.CodeInternal, "silo store %s: damaged retired silos (%d bytes)", s.dir, len(value))
	}
	ids := make([]uint64, 0, len(value)/8)
	for i := 0; i < len(value); i += 8 {
		ids = append(ids, binary.BigEndian.Uint64(value[i:]))
	}
	if !slices.IsSorted(ids) || slices.Contains(ids, 0) {
		return orrery.Errorf(orrery.CodeInternal, "silo store %s: damaged retired silos %x", s.dir, value)
	}
	s.retired = ids
	return nil
}
