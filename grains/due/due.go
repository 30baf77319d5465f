// Package due owns the due index (d/<dueAt>/<kind>/<lane>/<id>) that schedules and sagas
// maintain as they change, and ScanDue, the bounded oldest-first read the due coordinators
// use to find work.
package due

import (
	"encoding/binary"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// Put records that ref's record is due at ref.DueAtUnixMicros with CAS token ref.Token.
func Put(v kv.View, ref *orreryv1.DueRef) error {
	_, err := record.Store(v, keys.DueKey(ref.GetDueAtUnixMicros(), ref.GetKind(), ref.GetLane(), ref.GetId()), ref)
	return err
}

// Remove deletes the due entry of a record at dueAt (a no-op if there is none).
func Remove(v kv.View, dueAtMicros int64, kind orreryv1.DueKind, lane *orreryv1.Lane, id string) error {
	return v.Delete(keys.DueKey(dueAtMicros, kind, lane, id))
}

// Move replaces the entry at oldDueAt (if non-zero) by ref (if its due time is non-zero).
func Move(v kv.View, oldDueAtMicros int64, ref *orreryv1.DueRef) error {
	if oldDueAtMicros != 0 {
		if err := Remove(v, oldDueAtMicros, ref.GetKind(), ref.GetLane(), ref.GetId()); err != nil {
			return err
		}
	}
	if ref.GetDueAtUnixMicros() == 0 {
		return nil
	}
	return Put(v, ref)
}

// Budget bounds one ScanDue.
type Budget struct {
	// MaxRefs is the most refs returned; it must be positive.
	MaxRefs int
	// MaxBytes bounds the encoded size of the returned refs; zero means no byte bound.
	MaxBytes int
	// After resumes a previous scan: only keys strictly after it are read (a continuation).
	After []byte
	// FromMicros, when positive and After is nil, starts the scan at that due instant: a
	// caller that knows no entry is earlier (the partition tracks its earliest) skips the
	// deleted entries an LSM store keeps at the front of a queue-like index until compaction.
	FromMicros int64
}

// Result is a ScanDue answer. It is never silently partial: when the budget stopped the scan
// before every due ref was read, More is set and Continuation resumes it.
type Result struct {
	// Refs are the refs due at or before the logged time, oldest first.
	Refs []*orreryv1.DueRef
	// More is set when due refs remain beyond the budget.
	More bool
	// Continuation is the Budget.After that resumes the scan when More is set.
	Continuation []byte
	// NextDueAtMicros is the earliest due instant not returned: a due-now ref left by the
	// budget, or the first future one; zero when the index holds nothing else.
	NextDueAtMicros int64
}

// ScanDue reads the due index oldest first up to loggedNow, within budget.
func ScanDue(v kv.Reader, loggedNowMicros int64, budget Budget) (*Result, error) {
	if budget.MaxRefs <= 0 {
		return nil, orrery.Invalid("budget.max_refs", "must be positive, got %d", budget.MaxRefs)
	}
	start := keys.Of(keys.Due, nil)
	if budget.FromMicros > 0 {
		start = keys.AppendUint64(start, uint64(budget.FromMicros))
	}
	if budget.After != nil {
		start = append(append([]byte(nil), budget.After...), 0)
	}
	res := &Result{}
	bytes := 0
	var decodeErr error
	err := v.Scan(start, kv.PrefixEnd(keys.Due), func(key, value []byte) (bool, error) {
		if at, ok := DueAtOfKey(key); ok && at > loggedNowMicros { // the key says: no decoding
			res.NextDueAtMicros = at
			return false, nil
		}
		ref := &orreryv1.DueRef{}
		if err := proto.Unmarshal(value, ref); err != nil {
			decodeErr = orrery.Wrap(orrery.CodeInternal, err, "decode due ref")
			return false, nil
		}
		if ref.GetDueAtUnixMicros() > loggedNowMicros {
			res.NextDueAtMicros = ref.GetDueAtUnixMicros()
			return false, nil
		}
		if len(res.Refs) >= budget.MaxRefs || (budget.MaxBytes > 0 && len(res.Refs) > 0 && bytes+len(value) > budget.MaxBytes) {
			res.More = true
			res.NextDueAtMicros = ref.GetDueAtUnixMicros()
			return false, nil
		}
		bytes += len(value)
		res.Refs = append(res.Refs, ref)
		res.Continuation = append(res.Continuation[:0], key...)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if decodeErr != nil {
		return nil, decodeErr
	}
	if !res.More {
		res.Continuation = nil
	}
	return res, nil
}

// DueAtOfKey decodes the due instant of a due-index key, reporting false for other keys.
func DueAtOfKey(key []byte) (int64, bool) {
	if len(key) < len(keys.Due)+8 || string(key[:len(keys.Due)]) != string(keys.Due) {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(key[len(keys.Due):])), true
}

// Mutations turns due refs into the mutations that act on them, with their CAS tokens:
// EmitOccurrences (at most emitMax occurrences each) for schedules, ExpireSaga for sagas. Refs
// of other kinds are left out.
func Mutations(refs []*orreryv1.DueRef, emitMax uint32) []*orreryv1.Mutation {
	out := make([]*orreryv1.Mutation, 0, len(refs))
	for _, ref := range refs {
		switch ref.GetKind() {
		case orreryv1.DueKind_DUE_KIND_SAGA:
			out = append(out, &orreryv1.Mutation{Kind: &orreryv1.Mutation_ExpireSaga{ExpireSaga: &orreryv1.ExpireSaga{
				Lane: ref.GetLane(), SagaId: ref.GetId(), ExpectedRevision: ref.GetToken(),
			}}})
		case orreryv1.DueKind_DUE_KIND_SCHEDULE:
			out = append(out, &orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{
				Lane: ref.GetLane(), ScheduleId: ref.GetId(), ExpectedGeneration: ref.GetToken(), Max: emitMax,
			}}})
		}
	}
	return out
}
