package schedule

import (
	"bytes"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// MaxLedgerRead bounds one ReadLedger.
const MaxLedgerRead = 1000

// ledgerKey is the key of a ledger entry.
func ledgerKey(lane *orreryv1.Lane, entry *orreryv1.LedgerRecord) []byte {
	if entry.GetBackfill() {
		return keys.LedgerKeyOfKind(lane, entry.GetScheduleId(), entry.GetNominalDueAtUnixMicros(), entry.GetGeneration(), keys.LedgerBackfill, entry.GetOrdinal())
	}
	return keys.LedgerKey(lane, entry.GetScheduleId(), entry.GetNominalDueAtUnixMicros(), entry.GetGeneration(), entry.GetManual(), entry.GetOrdinal())
}

// writeLedger stores (or overwrites) the outcome of one nominal instant, stamped with the
// logged time, and keeps its age index in step.
func writeLedger(v kv.View, lane *orreryv1.Lane, entry *orreryv1.LedgerRecord, loggedNowMicros int64) error {
	key := ledgerKey(lane, entry)
	old := &orreryv1.LedgerRecord{}
	found, err := record.Load(v, key, old)
	if err != nil {
		return err
	}
	if found {
		if err := v.Delete(keys.LedgerAgeKey(old.GetRecordedAtUnixMicros(), key)); err != nil {
			return err
		}
	}
	return writeFreshLedger(v, lane, entry, loggedNowMicros)
}

// writeFreshLedger is writeLedger for an ordinal passed for the first time, which has no
// record yet (the watermark passes each ordinal once and schedule ids are never reused): it
// skips the read of the record it would replace.
func writeFreshLedger(v kv.View, lane *orreryv1.Lane, entry *orreryv1.LedgerRecord, loggedNowMicros int64) error {
	key := ledgerKey(lane, entry)
	entry.RecordedAtUnixMicros = loggedNowMicros
	if _, err := record.Store(v, key, entry); err != nil {
		return err
	}
	return v.Set(keys.LedgerAgeKey(loggedNowMicros, key), nil)
}

// ledgerEntry starts the ledger record of ordinal of the record's generation.
func ledgerEntry(rec *orreryv1.ScheduleRecord, ordinal uint64, nominalMicros int64, outcome orreryv1.LedgerOutcome) *orreryv1.LedgerRecord {
	return &orreryv1.LedgerRecord{
		ScheduleId:             rec.GetDefinition().GetScheduleId(),
		Generation:             rec.GetGeneration(),
		Ordinal:                ordinal,
		NominalDueAtUnixMicros: nominalMicros,
		Outcome:                outcome,
	}
}

// LedgerQuery is one bounded read of a schedule's ledger.
type LedgerQuery struct {
	// FromMicros and ToMicros bound the nominal instants read, both inclusive.
	FromMicros, ToMicros int64
	// MaxRecords is the most records returned (1..MaxLedgerRead).
	MaxRecords int
	// After resumes a previous read: pass its continuation.
	After []byte
}

// ReadLedger reads a schedule's ledger records whose nominal instants lie in the query's
// range, newest instant first (within one instant: newest generation, then recurring before
// manual, then highest ordinal). It is never silently partial: continuation is set when more
// records remain in the range, and resumes the read as LedgerQuery.After.
func ReadLedger(r kv.Reader, lane *orreryv1.Lane, scheduleID string, q LedgerQuery) (entries []*orreryv1.LedgerRecord, continuation []byte, err error) {
	if err := input.Lane("lane", lane, false); err != nil {
		return nil, nil, err
	}
	if err := input.UUID("schedule_id", scheduleID); err != nil {
		return nil, nil, err
	}
	if q.MaxRecords <= 0 || q.MaxRecords > MaxLedgerRead {
		return nil, nil, orrery.Invalid("max_records", "must be between 1 and %d, got %d", MaxLedgerRead, q.MaxRecords)
	}
	if q.FromMicros == 0 {
		q.FromMicros = 1 // no lower bound
	}
	if err := input.Instant("from", q.FromMicros); err != nil {
		return nil, nil, err
	}
	if err := input.Instant("to", q.ToMicros); err != nil {
		return nil, nil, err
	}
	if q.FromMicros > q.ToMicros {
		return nil, nil, orrery.Invalid("from", "is after to (%d > %d)", q.FromMicros, q.ToMicros)
	}
	start := keys.LedgerInstantKey(lane, scheduleID, q.ToMicros)
	end := kv.PrefixEnd(keys.LedgerInstantKey(lane, scheduleID, q.FromMicros))
	if q.After != nil {
		if bytes.Compare(q.After, start) < 0 || bytes.Compare(q.After, end) >= 0 {
			return nil, nil, orrery.Invalid("after", "is not a continuation of this schedule's ledger in this range")
		}
		start = append(bytes.Clone(q.After), 0)
	}
	var last []byte
	more := false
	var decodeErr error
	err = r.Scan(start, end, func(key, value []byte) (bool, error) {
		if len(entries) == q.MaxRecords {
			more = true
			return false, nil
		}
		entry := &orreryv1.LedgerRecord{}
		if err := proto.Unmarshal(value, entry); err != nil {
			decodeErr = orrery.Wrap(orrery.CodeInternal, err, "decode ledger record")
			return false, nil
		}
		entries = append(entries, entry)
		last = bytes.Clone(key)
		return true, nil
	})
	if err != nil {
		return nil, nil, err
	}
	if decodeErr != nil {
		return nil, nil, decodeErr
	}
	if more {
		continuation = last
	}
	return entries, continuation, nil
}

// PruneLedger removes, oldest first and at most maxRecords, the ledger records last written
// at or before recordedBefore. It reports how many it removed and whether more remain.
func PruneLedger(v kv.View, recordedBeforeMicros int64, maxRecords int) (removed int, more bool, err error) {
	if recordedBeforeMicros < 0 {
		return 0, false, nil
	}
	return kv.DeleteIndexed(v, keys.Of(keys.LedgerAge, nil), keys.LedgerAgeUpTo(recordedBeforeMicros), maxRecords, func(age []byte) ([]byte, error) {
		entry, err := keys.LedgerFromAge(age)
		if err != nil {
			return nil, orrery.Wrap(orrery.CodeInternal, err, "ledger age index %x", age)
		}
		return entry, nil
	})
}
