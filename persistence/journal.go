package persistence

import (
	"bytes"
	"encoding/binary"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// JournalKey is the key of the journal record of one batch: "p/journal/" + applied index,
// 8-byte big-endian, so the journal iterates in applied-index order.
func JournalKey(appliedIndex uint64) []byte {
	return binary.BigEndian.AppendUint64(bytes.Clone(journalPrefix), appliedIndex)
}

// SetLoggedTime records the batch's logged time (Unix microseconds; see NextLoggedTime). It
// refuses a time earlier than the last committed one: logged time never goes backward.
func (t *Txn) SetLoggedTime(micros int64) error {
	if last := t.store.LoggedTime(); micros < last {
		return orrery.Errorf(orrery.CodeInternal,
			"partition %s: logged time %d is earlier than the last committed %d", t.store.dir, micros, last)
	}
	if err := t.set(loggedTimeKey, binary.BigEndian.AppendUint64(nil, uint64(micros))); err != nil {
		return err
	}
	t.loggedTime, t.setLoggedTime = micros, true
	return nil
}

// SetAppliedIndex records the batch's applied index, which must be greater than the last
// committed one.
func (t *Txn) SetAppliedIndex(index uint64) error {
	if last := t.store.AppliedIndex(); index <= last {
		return orrery.Errorf(orrery.CodeInternal,
			"partition %s: applied index %d is not after the last committed %d", t.store.dir, index, last)
	}
	if err := t.set(appliedIndexKey, binary.BigEndian.AppendUint64(nil, index)); err != nil {
		return err
	}
	t.appliedIndex, t.setAppliedIndex = index, true
	return nil
}

// AppendJournal writes rec under JournalKey(rec.AppliedIndex), deterministically encoded. The
// index must be after the last committed one and equal to the batch's SetAppliedIndex when
// that was called. A zero ActivationEpoch is stamped with the store's epoch; another epoch is
// refused (a record of another activation is a bug).
func (t *Txn) AppendJournal(rec *orreryv1.JournalRecord) error {
	index := rec.GetAppliedIndex()
	switch {
	case index <= t.store.AppliedIndex():
		return orrery.Errorf(orrery.CodeInternal,
			"partition %s: journal index %d is not after the last committed %d", t.store.dir, index, t.store.AppliedIndex())
	case t.setAppliedIndex && index != t.appliedIndex:
		return orrery.Errorf(orrery.CodeInternal,
			"partition %s: journal index %d differs from the batch's applied index %d", t.store.dir, index, t.appliedIndex)
	case rec.GetActivationEpoch() != 0 && rec.GetActivationEpoch() != t.store.Epoch():
		return orrery.Errorf(orrery.CodeInternal,
			"partition %s: journal record of epoch %d written in epoch %d", t.store.dir, rec.GetActivationEpoch(), t.store.Epoch())
	}
	if rec.GetActivationEpoch() == 0 {
		rec = proto.CloneOf(rec)
		rec.ActivationEpoch = t.store.Epoch()
	}
	b, err := record.Marshal(rec)
	if err != nil {
		return err
	}
	return t.set(JournalKey(index), b)
}

// TrimJournal deletes at most maxRecords journal records with an applied index below
// belowIndex, oldest first, and reports how many it deleted. Retention runs it as a bounded
// housekeeping batch.
//
// The walk starts at the store's journal floor, the index below which everything is already
// deleted (learnt from the first walk after open and raised by every committed trim), so it
// reads live records only.
func (t *Txn) TrimJournal(belowIndex uint64, maxRecords int) (int, error) {
	if maxRecords <= 0 {
		return 0, nil
	}
	floor := max(t.store.journalFloor.Load(), t.journalFloor)
	if floor >= belowIndex {
		return 0, nil
	}
	start := journalPrefix
	if floor > 0 {
		start = JournalKey(floor)
	}
	var doomed [][]byte
	next := belowIndex // the floor after this trim, if it reaches belowIndex
	err := iterate(t.txn, start, JournalKey(belowIndex), false, func(key, _ []byte) (bool, error) {
		if len(doomed) == maxRecords {
			next = journalIndexOfKey(key)
			return false, nil
		}
		doomed = append(doomed, bytes.Clone(key))
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	for _, key := range doomed {
		if err := t.txn.Delete(key); err != nil {
			return 0, t.writeError(err, key)
		}
		t.writes++
	}
	t.journalFloor = next
	return len(doomed), nil
}

// journalIndexOfKey is the applied index a JournalKey encodes.
func journalIndexOfKey(key []byte) uint64 {
	return binary.BigEndian.Uint64(key[len(journalPrefix):])
}

// ScanJournal calls fn for every journal record with an applied index ≥ fromIndex, in
// applied-index order, over a read-only snapshot. fn returns false to stop.
func (s *Store) ScanJournal(fromIndex uint64, fn func(rec *orreryv1.JournalRecord) (bool, error)) error {
	s.lifeMu.RLock()
	defer s.lifeMu.RUnlock()
	if s.closed {
		return s.errClosed()
	}
	if err := s.failure(); err != nil {
		return err
	}
	txn, done := s.newTxn(false)
	defer done()
	return iterate(txn, JournalKey(fromIndex), kv.PrefixEnd(journalPrefix), false, func(key, value []byte) (bool, error) {
		rec := &orreryv1.JournalRecord{}
		if err := proto.Unmarshal(value, rec); err != nil {
			return false, orrery.Wrap(orrery.CodeInternal, err, "partition %s: decode journal record %x", s.dir, key)
		}
		return fn(rec)
	})
}
