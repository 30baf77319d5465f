package client

import (
	"context"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// ScheduleInspection reads what an operator sees of a schedule: its record, its next (at most
// 10) fire times, its last (at most 10) ledger outcomes and any suspension reason; NotFound
// when there is none.
func (c *Client) ScheduleInspection(ctx context.Context, lane *orreryv1.Lane, scheduleID string) (*orreryv1.ScheduleInspection, error) {
	reply, err := c.inspectLane(ctx, lane, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Schedule{
		Schedule: &orreryv1.InspectSchedule{Lane: lane, ScheduleId: scheduleID},
	}})
	if err != nil {
		return nil, err
	}
	if !reply.GetFound() || reply.GetInspection() == nil {
		return nil, orrery.FieldErrorf(orrery.CodeNotFound, "schedule_id", "no schedule %q in lane %s", scheduleID, laneName(lane))
	}
	return reply.GetInspection(), nil
}

// LedgerQuery is one bounded read of a schedule's occurrence ledger.
type LedgerQuery struct {
	// From and To bound the nominal instants read, both inclusive; a zero To means no bound.
	From, To time.Time
	// MaxRecords is the most records returned (0: the partition's bound, 1000).
	MaxRecords int
	// After resumes a previous read with its continuation.
	After []byte
}

// ReadLedger reads a schedule's ledger records, newest nominal instant first. It is never
// silently partial: continuation is non-nil when more records remain in the range; pass it
// as LedgerQuery.After.
func (c *Client) ReadLedger(ctx context.Context, lane *orreryv1.Lane, scheduleID string, q LedgerQuery) (records []*orreryv1.LedgerRecord, continuation []byte, err error) {
	req := &orreryv1.InspectLedger{Lane: lane, ScheduleId: scheduleID, MaxRecords: uint32(max(q.MaxRecords, 0)), After: q.After}
	if !q.From.IsZero() {
		req.FromUnixMicros = q.From.UnixMicro()
	}
	if !q.To.IsZero() {
		req.ToUnixMicros = q.To.UnixMicro()
	}
	reply, err := c.inspectLane(ctx, lane, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Ledger{Ledger: req}})
	if err != nil {
		return nil, nil, err
	}
	return reply.GetLedger(), reply.GetLedgerContinuation(), nil
}
