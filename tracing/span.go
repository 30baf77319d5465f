package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// ScopeName is the instrumentation scope of Orrery's tracers.
const ScopeName = "github.com/orreryhq/orrery"

// Span names.
const (
	// EmitSpanName names the span of one occurrence's emission (a producer span).
	EmitSpanName = "orrery.emit"
	// HandleSpanName names a worker's handling of one delivered message (a consumer span).
	HandleSpanName = "orrery.handle"
	// CommandSpanName and InspectSpanName name a client's Command and Inspect calls, retries
	// included (client spans).
	CommandSpanName = "orrery.command"
	InspectSpanName = "orrery.inspect"
)

// Attribute keys of occurrence spans. Instants are RFC 3339 strings in UTC.
const (
	AttrScheduleID    = attribute.Key("orrery.schedule.id")
	AttrScheduleName  = attribute.Key("orrery.schedule.name")
	AttrGeneration    = attribute.Key("orrery.schedule.generation")
	AttrOrdinal       = attribute.Key("orrery.occurrence.ordinal")
	AttrNominalDueAt  = attribute.Key("orrery.occurrence.nominal_due_at")
	AttrManual        = attribute.Key("orrery.occurrence.manual")
	AttrMessageID     = attribute.Key("messaging.message.id")
	AttrNamespace     = attribute.Key("orrery.namespace")
	AttrQueue         = attribute.Key("orrery.queue")
	AttrKey           = attribute.Key("orrery.key")
	AttrPartition     = attribute.Key("orrery.partition")
	AttrDeliveryCount = attribute.Key("orrery.message.delivery_count")
	AttrCommandID     = attribute.Key("orrery.command.id")
	AttrMutations     = attribute.Key("orrery.command.mutations")
)

// Occurrence is what an occurrence span says about its occurrence.
type Occurrence struct {
	// MessageID is the occurrence's message id (its trace context derives from it).
	MessageID string
	// Lane is where the occurrence was enqueued.
	Lane *orreryv1.Lane
	// Partition holds the lane.
	Partition int
	// ScheduleID, Name and Generation name the schedule (Name is empty when it has none).
	ScheduleID, Name string
	Generation       uint64
	// Ordinal and NominalDueAt place the occurrence in its generation.
	Ordinal      uint64
	NominalDueAt time.Time
	// Manual is set for an occurrence triggered by hand.
	Manual bool
}

// Attributes are the span attributes of o (the name only when there is one).
func (o Occurrence) Attributes() []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		AttrMessageID.String(o.MessageID),
		AttrScheduleID.String(o.ScheduleID),
		AttrGeneration.Int64(int64(o.Generation)),
		AttrOrdinal.Int64(int64(o.Ordinal)),
		AttrNominalDueAt.String(o.NominalDueAt.UTC().Format(time.RFC3339Nano)),
		AttrNamespace.String(o.Lane.GetNamespace()),
		AttrQueue.String(o.Lane.GetQueue()),
		AttrKey.String(o.Lane.GetKey()),
		AttrPartition.Int(o.Partition),
	}
	if o.Name != "" {
		attrs = append(attrs, AttrScheduleName.String(o.Name))
	}
	if o.Manual {
		attrs = append(attrs, AttrManual.Bool(true))
	}
	return attrs
}

// RecordEmission records o's emission span, from start (the due command was sent) to end (its
// receipt said o was enqueued), as a new root with the ids OccurrenceSpanContext derives from
// o.MessageID when tracer comes from a provider built with IDGenerator.
func RecordEmission(ctx context.Context, tracer trace.Tracer, o Occurrence, start, end time.Time) {
	ctx = withFixedIDs(ctx, OccurrenceSpanContext(o.MessageID))
	_, span := tracer.Start(ctx, EmitSpanName, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithTimestamp(start), trace.WithAttributes(o.Attributes()...))
	span.End(trace.WithTimestamp(end))
}

// FromMessage is the Occurrence of a delivered message, and whether it is one (a message a
// caller enqueued or a saga timeout is not). The name is not in the message and stays empty.
func FromMessage(msg *orreryv1.QueueMessage, partition int) (Occurrence, bool) {
	origin := msg.GetOccurrence()
	if origin == nil {
		return Occurrence{}, false
	}
	return Occurrence{
		MessageID: msg.GetId(), Lane: msg.GetLane(), Partition: partition,
		ScheduleID: origin.GetScheduleId(), Generation: origin.GetGeneration(),
		Ordinal: origin.GetOrdinal(), NominalDueAt: time.UnixMicro(origin.GetNominalDueAtUnixMicros()),
		Manual: origin.GetManual(),
	}, true
}

// StartHandling starts a worker's handling span of msg, received from partition: for an
// occurrence the coordinator emitted, the child of its emission span with the occurrence's
// attributes; for any other message (a manual occurrence included) a root span with the
// message's id and lane.
func StartHandling(ctx context.Context, tracer trace.Tracer, msg *orreryv1.QueueMessage, partition int) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{AttrDeliveryCount.Int64(int64(msg.GetDeliveryCount()))}
	o, isOccurrence := FromMessage(msg, partition)
	if isOccurrence {
		attrs = append(attrs, o.Attributes()...)
	} else {
		lane := msg.GetLane()
		attrs = append(attrs, AttrMessageID.String(msg.GetId()), AttrNamespace.String(lane.GetNamespace()),
			AttrQueue.String(lane.GetQueue()), AttrKey.String(lane.GetKey()), AttrPartition.Int(partition))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
	if isOccurrence && !o.Manual {
		ctx = ContextWithOccurrenceParent(ctx, msg.GetId())
	} else {
		opts = append(opts, trace.WithNewRoot()) // not a child of whatever span ran the worker
	}
	return tracer.Start(ctx, HandleSpanName, opts...)
}

// EndWithError ends span, marking it failed with err when err is not nil.
func EndWithError(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
