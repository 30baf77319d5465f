package duecoordinator

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/orreryhq/orrery/tracing"
)

// TestEmissionSpans checks that each enqueued occurrence gets one emission span with its
// message's derived ids and the schedule's attributes, nominal instant included.
func TestEmissionSpans(t *testing.T) {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter), sdktrace.WithIDGenerator(tracing.IDGenerator()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	b := setup(t, options{partitions: 1, hints: true, cfg: func(c *Config) { c.TracerProvider = tp }})
	def := configure(lane("a"), scheduleID(1), every(t0.Add(5*time.Second), 10*time.Second), 0)
	def.GetConfigureSchedule().GetDefinition().Name = "five past"
	b.apply(0, def)
	b.start(0)
	b.runUntil(t0.Add(30 * time.Second))

	msgs := b.messages(0, lane("a"))
	spans := exporter.GetSpans()
	if len(msgs) != 3 || len(spans) != len(msgs) {
		t.Fatalf("%d messages and %d spans, want 3 of each", len(msgs), len(spans))
	}
	byTrace := map[[16]byte]tracetest.SpanStub{}
	for _, s := range spans {
		byTrace[s.SpanContext.TraceID()] = s
	}
	for _, m := range msgs {
		want := tracing.OccurrenceSpanContext(m.GetId())
		s, ok := byTrace[want.TraceID()]
		if !ok || s.SpanContext.SpanID() != want.SpanID() || s.Name != tracing.EmitSpanName {
			t.Fatalf("no emission span with the ids derived from %s", m.GetId())
		}
		got := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes {
			got[kv.Key] = kv.Value
		}
		nominal := time.UnixMicro(m.GetOccurrence().GetNominalDueAtUnixMicros()).UTC().Format(time.RFC3339Nano)
		for key, value := range map[attribute.Key]attribute.Value{
			tracing.AttrScheduleID: attribute.StringValue(scheduleID(1)), tracing.AttrScheduleName: attribute.StringValue("five past"),
			tracing.AttrGeneration: attribute.Int64Value(1), tracing.AttrOrdinal: attribute.Int64Value(int64(m.GetOccurrence().GetOrdinal())),
			tracing.AttrNominalDueAt: attribute.StringValue(nominal), tracing.AttrKey: attribute.StringValue("a"), tracing.AttrPartition: attribute.IntValue(0),
		} {
			if got[key] != value {
				t.Errorf("span of %s: %s = %v, want %v", m.GetId(), key, got[key].Emit(), value.Emit())
			}
		}
		if s.EndTime.Before(s.StartTime) || s.StartTime.Before(t0) {
			t.Errorf("span of %s from %v to %v", m.GetId(), s.StartTime, s.EndTime)
		}
	}
}
