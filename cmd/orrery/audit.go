package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// audit prints one page of the cluster's audit log (client.ReadAudit), oldest first, and the
// continuation of the next: grant changes and denied mutations, with who, what and when.
func (c *command) audit(ctx context.Context, args []string) error {
	fs := c.flagSet("audit")
	var since time.Duration
	var maxRecords int
	var afterToken string
	fs.DurationVar(&since, "since", 0, "only records logged within this long before now (0: all)")
	fs.IntVar(&maxRecords, "max", 0, fmt.Sprintf("page size (0: %d; at most %d)", client.DefaultListMax, client.MaxListMax))
	fs.StringVar(&afterToken, "after", "", "continue a previous page (its next_after)")
	if _, err := c.parse(fs, args, false); err != nil {
		return err
	}
	if since < 0 {
		return usagef("since: must not be negative, got %v", since)
	}
	if maxRecords < 0 || maxRecords > client.MaxListMax {
		return usagef("max: must be 0..%d, got %d", client.MaxListMax, maxRecords)
	}
	after, err := decodeToken(afterToken)
	if err != nil {
		return err
	}
	q := client.AuditQuery{MaxRecords: maxRecords, After: after}
	if since > 0 {
		q.From = time.Now().Add(-since)
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	page, next, err := cl.ReadAudit(ctx, q)
	if err != nil {
		return fmt.Errorf("read the audit log: %w", err)
	}
	if c.output == "json" {
		items := make([]map[string]any, 0, len(page))
		for _, e := range page {
			rec, err := protoValue(e.Record)
			if err != nil {
				return err
			}
			items = append(items, map[string]any{"partition": e.Partition, "record": rec})
		}
		return writeJSON(c.stdout, map[string]any{"records": items, "next_after": encodeToken(next)})
	}
	t := newTable(c.stdout, "LOGGED", "PARTITION", "PRINCIPAL", "KIND", "MUTATION", "WHERE", "DETAIL")
	for _, e := range page {
		r := e.Record
		where := r.GetNamespace()
		if r.GetQueue() != "" {
			where += "/" + r.GetQueue()
		}
		detail := r.GetMessage()
		if n := r.GetRepeats(); n > 0 {
			detail += fmt.Sprintf(" (and %d more times until %s)", n, instant(r.GetLastLoggedTimeUnixMicros()))
		}
		if r.GetKind() != orreryv1.AuditKind_AUDIT_KIND_DENIED {
			detail = fmt.Sprintf("%s: %s -> %s", r.GetTargetPrincipal(), r.GetOldRules(), r.GetNewRules())
		}
		t.row(instant(r.GetLoggedTimeUnixMicros()), strconv.Itoa(e.Partition), r.GetPrincipal(), enumName(r.GetKind().String(), "AUDIT_KIND_"),
			r.GetMutation(), where, detail)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if token := encodeToken(next); token != nil {
		fmt.Fprintf(c.stdout, "next page: --after %s\n", *token)
	}
	return nil
}
