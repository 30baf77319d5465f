package audit

import (
	"bytes"
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

// Write stores the collected records of the command (principal, commandID) logged at
// loggedAtMicros, numbered in order. When the command's writes rolled back (applied false) it
// stores the denials only. v must be the command's own view, outside any buffer the rollback
// discards.
func (t *Trail) Write(v kv.View, principal, commandID string, loggedAtMicros int64, applied bool) error {
	sequence := uint32(0)
	for _, rec := range t.records {
		if !applied && rec.GetKind() != orreryv1.AuditKind_AUDIT_KIND_DENIED {
			continue
		}
		rec.LoggedTimeUnixMicros, rec.Principal, rec.CommandId, rec.Sequence = loggedAtMicros, principal, commandID, sequence
		if _, err := record.Store(v, keys.AuditKey(loggedAtMicros, principal, commandID, sequence), rec); err != nil {
			return err
		}
		sequence++
	}
	return nil
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

// Prune deletes at most maxRecords records logged at or before loggedBeforeMicros, oldest
// first, and reports whether more remain.
func Prune(v kv.View, loggedBeforeMicros int64, maxRecords int) (removed int, more bool, err error) {
	if loggedBeforeMicros < 0 || maxRecords <= 0 {
		return 0, maxRecords <= 0 && loggedBeforeMicros >= 0, nil
	}
	var doomed [][]byte
	err = v.Scan(keys.AuditFrom(0), keys.AuditUpTo(loggedBeforeMicros), func(key, _ []byte) (bool, error) {
		if len(doomed) == maxRecords {
			more = true
			return false, nil
		}
		doomed = append(doomed, bytes.Clone(key))
		return true, nil
	})
	if err != nil {
		return 0, false, err
	}
	for _, key := range doomed {
		if err := v.Delete(key); err != nil {
			return 0, false, err
		}
	}
	return len(doomed), more, nil
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
