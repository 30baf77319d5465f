package client

import (
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/route"
)

// The wire keeps instants and durations as microsecond integers; these helpers take Go types,
// so a schedule is one readable line:
//
//	def := client.NamedSchedule(lane, "daily-report", client.Cron("0 9 * * *", "Europe/Paris"), `{"report":"daily"}`)
//	res, err := c.ConfigureSchedule(ctx, def, 0)

// Every is a spec due every interval (1 s..365 days, whole microseconds), first at first.
func Every(interval time.Duration, first time.Time) *orreryv1.ScheduleSpec {
	return &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{
		IntervalMicros: interval.Microseconds(), FirstDueAtUnixMicros: first.UnixMicro()}}}
}

// Cron is a spec due at the instants a 5- or 6-field cron expression names in an IANA time zone
// ("" is UTC), with the default DST policies.
func Cron(expression, timeZone string) *orreryv1.ScheduleSpec {
	return &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Cron{Cron: &orreryv1.CronSpec{
		Expression: expression, TimeZone: timeZone}}}
}

// At is a one-shot spec due at t.
func At(t time.Time) *orreryv1.ScheduleSpec {
	return &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_At{At: &orreryv1.AtSpec{DueAtUnixMicros: t.UnixMicro()}}}
}

// After is a one-shot spec due delay after the partition's logged time of the schedule's
// creation.
func After(delay time.Duration) *orreryv1.ScheduleSpec {
	return &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_After{After: &orreryv1.AfterSpec{DelayMicros: delay.Microseconds()}}}
}

// ScheduleID is the first id of the schedule name in namespace: a UUIDv5 derived from both
// (input.ScheduleIDFromName), the same in every process. It is the id of the name's first
// schedule, and of every schedule named by a version before names were reusable. Once that
// schedule is deleted its id stays terminal and the name's next schedule takes another id:
// Client.ScheduleIDOf says which id a name addresses now, and Schedules resolves names itself.
func ScheduleID(namespace, name string) string { return input.ScheduleIDFromName(namespace, name) }

// NamedSchedule is a definition of the schedule named name in lane, with the name's first id
// (ScheduleID), whose occurrences carry payloadJSON ("" for none). Set the remaining fields
// (misfire, overlap, headers, ...) on the result as needed. After the name's first schedule
// was deleted that id is refused (RevisionConflict on definition.schedule_id): set ScheduleId
// to Client.ScheduleIDOf(ctx, lane, name), or use Schedules.Create or Upsert, which do. An
// empty name gives a definition without an id, which ConfigureSchedule refuses (Validation on
// definition.name) before sending it.
func NamedSchedule(lane *orreryv1.Lane, name string, spec *orreryv1.ScheduleSpec, payloadJSON string) *orreryv1.ScheduleDefinition {
	def := &orreryv1.ScheduleDefinition{Lane: lane, Name: name, Spec: spec, Template: &orreryv1.MessageTemplate{PayloadJson: payloadJSON}}
	if name != "" {
		def.ScheduleId = ScheduleID(lane.GetNamespace(), name)
	}
	return def
}

// PartitionOf is the partition holding lane in a cluster of the given partition count: every
// record of the lane and every message of its queues. Lanes of one namespace with the same key
// share a partition whatever their queue, so a Batch may write them together.
func PartitionOf(lane *orreryv1.Lane, partitions int) int { return route.Partition(lane, partitions) }

// PartitionOf is the partition holding lane in this client's cluster.
func (c *Client) PartitionOf(lane *orreryv1.Lane) int { return PartitionOf(lane, c.Partitions()) }

// WaitingSaga creates (expectedRevision 0) or updates, by CAS on its revision, the saga sagaID
// of lane in phase Waiting with stateJSON, due to time out at deadline: the partition then
// enqueues timeout's message and writes TimedOut in one transaction. A zero deadline means
// none (and timeout must then be nil).
func WaitingSaga(lane *orreryv1.Lane, sagaID string, expectedRevision uint64, stateJSON string, deadline time.Time, timeout *orreryv1.SagaTimeout) *orreryv1.CompareExchangeSaga {
	m := &orreryv1.CompareExchangeSaga{Lane: lane, SagaId: sagaID, ExpectedRevision: expectedRevision,
		Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING, StateJson: stateJSON, Timeout: timeout}
	if !deadline.IsZero() {
		m.DeadlineUnixMicros = deadline.UnixMicro()
	}
	return m
}

// Timeout is a saga timeout enqueued into queue (of the saga's lane) with payloadJSON. Its
// Template carries the rest of the timeout message's settings (Template.Priority: its
// priority, apply version 20).
func Timeout(queue, payloadJSON string) *orreryv1.SagaTimeout {
	return &orreryv1.SagaTimeout{Queue: queue, Template: &orreryv1.MessageTemplate{PayloadJson: payloadJSON}}
}
