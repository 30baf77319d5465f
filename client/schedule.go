package client

import (
	"context"
	"github.com/orreryhq/orrery"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// Schedule and saga calls take their wire mutation message, which the client sends as it is
// and never modifies; ConfigureSchedule takes the definition and the expected revision. Each
// call goes to the partition of the lane it names. The client has no call for EmitOccurrences
// or ExpireSaga: the silos' due coordinators alone send them, in due commands.

// ConfigureSchedule creates (expectedRevision 0) or replaces (the exact current revision) a
// schedule definition. Replacement starts a new generation at ordinal 0.
func (c *Client) ConfigureSchedule(ctx context.Context, def *orreryv1.ScheduleDefinition, expectedRevision uint64, opts ...CallOption) (*orreryv1.ScheduleResult, error) {
	if def.GetScheduleId() == "" && def.GetName() == "" {
		return nil, orrery.Invalid("definition.name", "a schedule needs an id or a name: set ScheduleId (client.NewID()), or a name (NamedSchedule with a non-empty name, Schedules.Create)")
	}
	m := &orreryv1.ConfigureSchedule{Definition: def, ExpectedRevision: expectedRevision}
	return c.scheduleCall(ctx, def.GetLane(), &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: m}}, opts)
}

// CancelSchedule stops a schedule at the expected revision, or at whatever revision it is
// with m.AnyRevision (m.ExpectedRevision must then be 0); only a new ConfigureSchedule
// revives its id:
//
//	c.CancelSchedule(ctx, &orreryv1.CancelSchedule{Lane: lane, ScheduleId: id, AnyRevision: true})
func (c *Client) CancelSchedule(ctx context.Context, m *orreryv1.CancelSchedule, opts ...CallOption) (*orreryv1.ScheduleResult, error) {
	return c.scheduleCall(ctx, m.GetLane(), &orreryv1.Mutation{Kind: &orreryv1.Mutation_CancelSchedule{CancelSchedule: m}}, opts)
}

// DeleteSchedule removes a schedule at the expected revision, or at whatever revision it is
// with m.AnyRevision (m.ExpectedRevision must then be 0), and tombstones its id for good:
//
//	c.DeleteSchedule(ctx, &orreryv1.DeleteSchedule{Lane: lane, ScheduleId: id, AnyRevision: true})
func (c *Client) DeleteSchedule(ctx context.Context, m *orreryv1.DeleteSchedule, opts ...CallOption) (*orreryv1.ScheduleResult, error) {
	return c.scheduleCall(ctx, m.GetLane(), &orreryv1.Mutation{Kind: &orreryv1.Mutation_DeleteSchedule{DeleteSchedule: m}}, opts)
}

// PauseSchedule stops a schedule's emission durably at the expected revision. Every emitted
// occurrence bumps the revision, so an operator who does not hold the current one sets
// m.AnyRevision instead (m.ExpectedRevision must then be 0):
//
//	c.PauseSchedule(ctx, &orreryv1.PauseSchedule{Lane: lane, ScheduleId: id, AnyRevision: true})
//
// A schedule that is already paused, or cancelled, cannot be paused (Suspended).
func (c *Client) PauseSchedule(ctx context.Context, m *orreryv1.PauseSchedule, opts ...CallOption) (*orreryv1.ScheduleResult, error) {
	return c.scheduleCall(ctx, m.GetLane(), &orreryv1.Mutation{Kind: &orreryv1.Mutation_PauseSchedule{PauseSchedule: m}}, opts)
}

// ResumeSchedule restarts a paused schedule's emission from the first occurrence after the
// resume's logged time (minus the definition's catch-up window); the instants passed while
// paused are recorded PAUSED in the ledger. m.AnyRevision resumes whatever the revision is
// (m.ExpectedRevision must then be 0):
//
//	c.ResumeSchedule(ctx, &orreryv1.ResumeSchedule{Lane: lane, ScheduleId: id, AnyRevision: true})
//
// A schedule that is not paused, or is cancelled, cannot be resumed (Suspended).
func (c *Client) ResumeSchedule(ctx context.Context, m *orreryv1.ResumeSchedule, opts ...CallOption) (*orreryv1.ScheduleResult, error) {
	return c.scheduleCall(ctx, m.GetLane(), &orreryv1.Mutation{Kind: &orreryv1.Mutation_ResumeSchedule{ResumeSchedule: m}}, opts)
}

// SkipExpired passes, in one command, up to the partition's bound of the expired occurrences a
// schedule stopped at (see orreryv1.ExpiredPolicy); res.PassedWithoutMessage counts them, and
// 0 means none was left. ScheduleHandle.SkipExpired repeats it until none is.
func (c *Client) SkipExpired(ctx context.Context, m *orreryv1.SkipExpired, opts ...CallOption) (*orreryv1.ScheduleResult, error) {
	return c.scheduleCall(ctx, m.GetLane(), &orreryv1.Mutation{Kind: &orreryv1.Mutation_SkipExpired{SkipExpired: m}}, opts)
}

// BackfillSchedule runs, in one command, up to the partition's bound of a schedule's instants in
// [m.FromUnixMicros, m.ToUnixMicros] now (see orreryv1.BackfillSchedule);
// res.BackfillResumeFromUnixMicros is where the next command resumes, 0 when the range is done.
// ScheduleHandle.Backfill repeats it to the end.
func (c *Client) BackfillSchedule(ctx context.Context, m *orreryv1.BackfillSchedule, opts ...CallOption) (*orreryv1.ScheduleResult, error) {
	return c.scheduleCall(ctx, m.GetLane(), &orreryv1.Mutation{Kind: &orreryv1.Mutation_BackfillSchedule{BackfillSchedule: m}}, opts)
}

// TriggerSchedule enqueues one manual occurrence now; it is refused while the schedule is
// paused.
func (c *Client) TriggerSchedule(ctx context.Context, m *orreryv1.TriggerSchedule, opts ...CallOption) (*orreryv1.ScheduleResult, error) {
	return c.scheduleCall(ctx, m.GetLane(), &orreryv1.Mutation{Kind: &orreryv1.Mutation_TriggerSchedule{TriggerSchedule: m}}, opts)
}

func (c *Client) scheduleCall(ctx context.Context, lane *orreryv1.Lane, m *orreryv1.Mutation, opts []CallOption) (*orreryv1.ScheduleResult, error) {
	r, err := c.mutate(ctx, lane, m, opts)
	if err != nil {
		return nil, err
	}
	if r.GetSchedule() == nil {
		return nil, unexpected("schedule", r)
	}
	return r.GetSchedule(), nil
}

// CompareExchangeSaga creates (expected revision 0, Waiting) or updates a saga by exact CAS on
// its revision.
func (c *Client) CompareExchangeSaga(ctx context.Context, m *orreryv1.CompareExchangeSaga, opts ...CallOption) (*orreryv1.SagaResult, error) {
	return c.sagaCall(ctx, m.GetLane(), &orreryv1.Mutation{Kind: &orreryv1.Mutation_CompareExchangeSaga{CompareExchangeSaga: m}}, opts)
}

func (c *Client) sagaCall(ctx context.Context, lane *orreryv1.Lane, m *orreryv1.Mutation, opts []CallOption) (*orreryv1.SagaResult, error) {
	r, err := c.mutate(ctx, lane, m, opts)
	if err != nil {
		return nil, err
	}
	if r.GetSaga() == nil {
		return nil, unexpected("saga", r)
	}
	return r.GetSaga(), nil
}
