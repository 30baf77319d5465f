package client

import (
	"context"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/audit"
)

// AuditQuery names one page of the cluster's audit log (package grains/audit).
type AuditQuery struct {
	// From and To bound the logged times read, both inclusive; a zero From or To means no
	// bound.
	From, To time.Time
	// MaxRecords is the page size (0: DefaultListMax; at most MaxListMax).
	MaxRecords int
	// After resumes a previous read with its continuation, under the same bounds.
	After []byte
}

// AuditEntry is one audit record and the partition that holds it.
type AuditEntry struct {
	Partition int
	Record    *orreryv1.AuditRecord
}

// ReadAudit reads one page of the audit log of every partition, merged oldest first (by
// logged time, then principal, command id and sequence; audit.Position), for a principal
// holding PolicyAdmin on "*" (Unauthorized otherwise). A grant change is applied by every
// partition, so it is listed once for each. Like ListSchedules it is never silently partial:
// continuation is non-nil when more may follow; pass it as AuditQuery.After with the same
// bounds and partition count.
func (c *Client) ReadAudit(ctx context.Context, q AuditQuery) (page []AuditEntry, continuation []byte, err error) {
	items, next, err := c.list(ctx, q.MaxRecords, q.After, func(p int, after []byte, max uint32) ([]listItem, []byte, error) {
		read := &orreryv1.ReadAudit{MaxRecords: max, After: after}
		if !q.From.IsZero() {
			read.FromUnixMicros = q.From.UnixMicro()
		}
		if !q.To.IsZero() {
			read.ToUnixMicros = q.To.UnixMicro()
		}
		reply, err := c.inspect(ctx, p, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Audit{Audit: read}})
		if err != nil {
			return nil, nil, err
		}
		var out []listItem
		for _, rec := range reply.GetAuditRecords() {
			out = append(out, listItem{position: audit.Position(rec), value: AuditEntry{Partition: p, Record: rec}})
		}
		return out, reply.GetListContinuation(), nil
	})
	for _, item := range items {
		page = append(page, item.value.(AuditEntry))
	}
	return page, next, err
}
