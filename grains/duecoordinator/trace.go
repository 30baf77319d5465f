package duecoordinator

import (
	"context"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/schedule"
	"github.com/orreryhq/orrery/tracing"
)

// traceEmitted records an emission span (package tracing) for each occurrence a schedule ref's
// result says its mutation enqueued, from sentAt, when the command was sent, to now.
func (c *Coordinator) traceEmitted(partitionID int, ref *orreryv1.DueRef, res *orreryv1.ScheduleResult, sentAt time.Time) {
	if c.cfg.TracerProvider == nil || len(res.GetEnqueuedIds()) == 0 {
		return
	}
	tracer := c.cfg.TracerProvider.Tracer(tracing.ScopeName)
	now := c.cfg.Clock.Now()
	nominals := res.GetEnqueuedNominalDueAtUnixMicros()
	for i, id := range res.GetEnqueuedIds() {
		o := tracing.Occurrence{
			MessageID: id, Lane: ref.GetLane(), Partition: partitionID,
			ScheduleID: ref.GetId(), Name: res.GetName(), Generation: res.GetGeneration(),
		}
		o.Ordinal, _ = schedule.OccurrenceOrdinal(id)
		if i < len(nominals) {
			o.NominalDueAt = time.UnixMicro(nominals[i])
		}
		tracing.RecordEmission(context.Background(), tracer, o, sentAt, now)
	}
}
