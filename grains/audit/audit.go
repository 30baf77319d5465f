package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/route"
)

// Trail collects the audit records of one command while it applies, in mutation order; Write
// stores them once the command's outcome is known.
type Trail struct {
	records []*orreryv1.AuditRecord
}

// Denied records that mutation m (its kind's field name, at index in the batch) was denied
// with e, an Unauthorized error; other errors are not recorded. A denied grant change names
// its target principal.
func (t *Trail) Denied(index int, kind string, m *orreryv1.Mutation, e *orrery.Error) {
	if e == nil || e.Code != orrery.CodeUnauthorized {
		return
	}
	namespace, queue := where(m)
	t.records = append(t.records, &orreryv1.AuditRecord{Kind: orreryv1.AuditKind_AUDIT_KIND_DENIED,
		Mutation: kind, MutationIndex: uint32(index), Namespace: namespace, Queue: queue, Message: e.Message,
		TargetPrincipal: m.GetPutGrant().GetPrincipal() + m.GetDeleteGrant().GetPrincipal()})
}

// GrantChanged records that mutation m at index (a PutGrant or a DeleteGrant) applied, over
// the target's old grant (nil: none).
func (t *Trail) GrantChanged(index int, kind string, m *orreryv1.Mutation, old *orreryv1.GrantRecord) {
	rec := &orreryv1.AuditRecord{Mutation: kind, MutationIndex: uint32(index), OldRules: SummarizeRules(old.GetRules())}
	switch k := m.GetKind().(type) {
	case *orreryv1.Mutation_PutGrant:
		rec.Kind, rec.TargetPrincipal, rec.NewRules = orreryv1.AuditKind_AUDIT_KIND_GRANT_PUT, k.PutGrant.GetPrincipal(), SummarizeRules(k.PutGrant.GetRules())
	case *orreryv1.Mutation_DeleteGrant:
		rec.Kind, rec.TargetPrincipal, rec.NewRules = orreryv1.AuditKind_AUDIT_KIND_GRANT_DELETE, k.DeleteGrant.GetPrincipal(), SummarizeRules(nil)
	default:
		return
	}
	t.records = append(t.records, rec)
}

// Len is the number of records collected.
func (t *Trail) Len() int { return len(t.records) }

// Bounds of a bounded log (Trail.Write's bounded).
const (
	// MaxRecords bounds a partition's audit log: a write that takes it past the bound removes
	// the oldest records, so that a principal denied over and over (with a new namespace each
	// time, say) cannot grow it without limit between two housekeeping passes.
	MaxRecords = 100_000
	// DenialWindowMicros is how long the repeats of a denial (the same principal denied the
	// same mutation kind, in the same namespace and queue, with the same message) count on the
	// record of its first time instead of each writing one (AuditRecord.repeats).
	DenialWindowMicros = 60_000_000
)

// maxRecords is MaxRecords, lowered by tests.
var maxRecords = MaxRecords

// Write stores the collected records of the command (principal, commandID) logged at
// loggedAtMicros, numbered in order. When the command's writes rolled back (applied false) it
// stores the denials only. v must be the command's own view, outside any buffer the rollback
// discards.
//
// Bounded (from batch.ApplyVersionAuditBound), a denial whose signature has a record written
// within DenialWindowMicros is counted on that record (repeats, last logged time) instead of
// written, and a write that takes the log past MaxRecords removes its oldest records (the
// records written before the log was bounded are not counted, and leave by age only).
func (t *Trail) Write(v kv.View, principal, commandID string, loggedAtMicros int64, applied, bounded bool) error {
	sequence := uint32(0)
	written := 0
	for _, rec := range t.records {
		if !applied && rec.GetKind() != orreryv1.AuditKind_AUDIT_KIND_DENIED {
			continue
		}
		rec.LoggedTimeUnixMicros, rec.Principal, rec.CommandId = loggedAtMicros, principal, commandID
		if bounded && rec.GetKind() == orreryv1.AuditKind_AUDIT_KIND_DENIED {
			counted, err := countRepeat(v, rec)
			if err != nil || counted {
				if err != nil {
					return err
				}
				continue
			}
		}
		rec.Sequence = sequence
		key := keys.AuditKey(loggedAtMicros, principal, commandID, sequence)
		if _, err := record.Store(v, key, rec); err != nil {
			return err
		}
		if bounded && rec.GetKind() == orreryv1.AuditKind_AUDIT_KIND_DENIED {
			if err := v.Set(denialKey(rec), binary.BigEndian.AppendUint64(bytes.Clone(key), uint64(loggedAtMicros))); err != nil {
				return err
			}
		}
		sequence++
		written++
	}
	if !bounded || written == 0 {
		return nil
	}
	count, err := loadCount(v)
	if err != nil {
		return err
	}
	count += uint64(written)
	if excess := int(count) - maxRecords; excess > 0 {
		removed, _, err := prune(v, keys.AuditFrom(0), kv.PrefixEnd(keys.Audit), excess)
		if err != nil {
			return err
		}
		count -= uint64(removed)
	}
	return v.Set(keys.AuditCount, binary.BigEndian.AppendUint64(nil, count))
}

// denialKey is the index key of a denial's window: its principal, mutation kind, namespace,
// queue and message.
func denialKey(rec *orreryv1.AuditRecord) []byte {
	sum := sha256.Sum256([]byte(rec.GetMessage()))
	k := keys.AppendString(keys.AppendString(keys.AppendString(keys.AppendString(keys.Of(keys.AuditDenial, nil),
		rec.GetPrincipal()), rec.GetMutation()), rec.GetNamespace()), rec.GetQueue())
	return append(k, sum[:16]...)
}

// countRepeat counts rec on the record of its denial's window when one was written within
// DenialWindowMicros of rec and is still there, and reports whether it did.
func countRepeat(v kv.View, rec *orreryv1.AuditRecord) (bool, error) {
	index, found, err := v.Get(denialKey(rec))
	if err != nil || !found || len(index) < 8 {
		return false, err
	}
	key, opened := index[:len(index)-8], int64(binary.BigEndian.Uint64(index[len(index)-8:]))
	if rec.GetLoggedTimeUnixMicros()-opened >= DenialWindowMicros {
		return false, nil
	}
	first := &orreryv1.AuditRecord{}
	if found, err := record.Load(v, key, first); err != nil || !found {
		return false, err
	}
	first.Repeats++
	first.LastLoggedTimeUnixMicros = rec.GetLoggedTimeUnixMicros()
	_, err = record.Store(v, bytes.Clone(key), first)
	return err == nil, err
}

// loadCount is the number of records the bounded log counts (0 before it was bounded).
func loadCount(r kv.Reader) (uint64, error) {
	value, found, err := r.Get(keys.AuditCount)
	if err != nil || !found || len(value) != 8 {
		return 0, err
	}
	return binary.BigEndian.Uint64(value), nil
}

// where is the namespace and queue a mutation acts in (empty for a grant change).
func where(m *orreryv1.Mutation) (namespace, queue string) {
	if r := m.GetReceive(); r != nil {
		return r.GetNamespace(), r.GetQueue()
	}
	lane := route.MutationLane(m)
	return lane.GetNamespace(), lane.GetQueue()
}

// SummarizeRules is a grant's rules in one line: "namespace[/queue]:capabilities", with the
// number of field policies when there are any, joined by "; ", or "none".
func SummarizeRules(rules []*orreryv1.GrantRule) string {
	if len(rules) == 0 {
		return "none"
	}
	parts := make([]string, len(rules))
	for i, rule := range rules {
		scope := rule.GetNamespace()
		if rule.GetQueue() != "" {
			scope += "/" + rule.GetQueue()
		}
		parts[i] = scope + ":" + grants.Capability(rule.GetCapabilities()).String()
		if n := len(rule.GetFields()); n > 0 {
			parts[i] += fmt.Sprintf(" (%d field policies)", n)
		}
	}
	return strings.Join(parts, "; ")
}

// Position is a record's place in the log (its key without the prefix): logged time, then
// principal, command id and sequence. Byte order is the log's order.
func Position(rec *orreryv1.AuditRecord) []byte {
	return keys.AuditKey(rec.GetLoggedTimeUnixMicros(), rec.GetPrincipal(), rec.GetCommandId(), rec.GetSequence())[len(keys.Audit):]
}

// DefaultReadRecords and MaxReadRecords are ReadAudit.max_records's default and bound;
// MaxPageBytes bounds the encoded records of one page (at least one record is returned).
const (
	DefaultReadRecords = 100
	MaxReadRecords     = 1000
	MaxPageBytes       = 1 << 20
)

// Read returns the records of q, oldest first, and the continuation (the Position of the last
// record returned) when more may remain in its range.
func Read(r kv.Reader, q *orreryv1.ReadAudit) (records []*orreryv1.AuditRecord, next []byte, err error) {
	limit := int(q.GetMaxRecords())
	if limit == 0 {
		limit = DefaultReadRecords
	}
	if limit > MaxReadRecords {
		return nil, nil, orrery.Invalid("max_records", "must be at most %d, got %d", MaxReadRecords, limit)
	}
	if q.GetFromUnixMicros() < 0 || q.GetToUnixMicros() < 0 {
		return nil, nil, orrery.Invalid("from_unix_micros", "from and to must not be negative")
	}
	start, end := keys.AuditFrom(q.GetFromUnixMicros()), kv.PrefixEnd(keys.Audit)
	if to := q.GetToUnixMicros(); to != 0 {
		end = keys.AuditUpTo(to)
	}
	if after := q.GetAfter(); len(after) > 0 {
		// Just past the key of after.
		if resume := append(keys.Of(keys.Audit, after), 0); bytes.Compare(resume, start) > 0 {
			start = resume
		}
	}
	size := 0
	err = r.Scan(start, end, func(key, value []byte) (bool, error) {
		if len(records) == limit || (len(records) > 0 && size+len(value) > MaxPageBytes) {
			next = bytes.Clone(key[len(keys.Audit):])
			return false, nil
		}
		rec := &orreryv1.AuditRecord{}
		if err := record.Unmarshal(value, rec); err != nil {
			return false, err
		}
		size += len(value)
		records = append(records, rec)
		return true, nil
	})
	if err != nil || next == nil {
		return records, nil, err
	}
	return records, Position(records[len(records)-1]), nil
}

// Prune deletes at most limit records logged at or before loggedBeforeMicros, oldest first,
// with the denial windows they hold and from the bounded log's count, and reports whether more
// remain.
func Prune(v kv.View, loggedBeforeMicros int64, limit int) (removed int, more bool, err error) {
	if loggedBeforeMicros < 0 || limit <= 0 {
		return 0, limit <= 0 && loggedBeforeMicros >= 0, nil
	}
	removed, more, err = prune(v, keys.AuditFrom(0), keys.AuditUpTo(loggedBeforeMicros), limit)
	if err != nil || removed == 0 {
		return removed, more, err
	}
	value, counted, err := v.Get(keys.AuditCount)
	if err != nil || !counted || len(value) != 8 {
		return removed, more, err
	}
	count := binary.BigEndian.Uint64(value)
	return removed, more, v.Set(keys.AuditCount, binary.BigEndian.AppendUint64(nil, count-min(count, uint64(removed))))
}

// prune deletes at most limit records in [start, end), oldest first, each with the index of
// its denial window when that names it, and reports whether more remain there.
func prune(v kv.View, start, end []byte, limit int) (removed int, more bool, err error) {
	type doomed struct{ key, value []byte }
	var gone []doomed
	err = v.Scan(start, end, func(key, value []byte) (bool, error) {
		if len(gone) == limit {
			more = true
			return false, nil
		}
		gone = append(gone, doomed{bytes.Clone(key), bytes.Clone(value)})
		return true, nil
	})
	if err != nil {
		return 0, false, err
	}
	for _, d := range gone {
		if err := v.Delete(d.key); err != nil {
			return 0, false, err
		}
		rec := &orreryv1.AuditRecord{}
		if err := record.Unmarshal(d.value, rec); err != nil {
			return 0, false, err
		}
		if rec.GetKind() != orreryv1.AuditKind_AUDIT_KIND_DENIED {
			continue
		}
		window := denialKey(rec)
		index, found, err := v.Get(window)
		if err != nil {
			return 0, false, err
		}
		if found && len(index) >= 8 && bytes.Equal(index[:len(index)-8], d.key) {
			if err := v.Delete(window); err != nil {
				return 0, false, err
			}
		}
	}
	return len(gone), more, nil
}

// PruneDue reports whether a record logged at or before loggedBeforeMicros remains.
func PruneDue(r kv.Reader, loggedBeforeMicros int64) (bool, error) {
	if loggedBeforeMicros < 0 {
		return false, nil
	}
	due := false
	err := r.Scan(keys.AuditFrom(0), keys.AuditUpTo(loggedBeforeMicros), func(_, _ []byte) (bool, error) {
		due = true
		return false, nil
	})
	return due, err
}
