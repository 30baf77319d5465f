package tracing

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

const occurrenceID = "recurring-0f8fad5bd9cb469fa16570867728950e-0000000000000001-0000000000000002"

// TestOccurrenceSpanContextDerivesIDs checks the derivation: the trace id is the first 16
// bytes of SHA-256 of the message id and the span id the next 8, sampled and remote, the same
// on every call and different for another id.
func TestOccurrenceSpanContextDerivesIDs(t *testing.T) {
	sum := sha256.Sum256([]byte(occurrenceID))
	sc := OccurrenceSpanContext(occurrenceID)
	if got := sc.TraceID(); string(got[:]) != string(sum[:16]) {
		t.Fatalf("trace id %s, want %x", got, sum[:16])
	}
	if got := sc.SpanID(); string(got[:]) != string(sum[16:24]) {
		t.Fatalf("span id %s, want %x", got, sum[16:24])
	}
	if !sc.IsValid() || !sc.IsRemote() || !sc.IsSampled() {
		t.Fatalf("span context %+v: want valid, remote and sampled", sc)
	}
	if again := OccurrenceSpanContext(occurrenceID); !again.Equal(sc) {
		t.Fatalf("second derivation %v differs from %v", again, sc)
	}
	if other := OccurrenceSpanContext(occurrenceID + "x"); other.TraceID() == sc.TraceID() || other.SpanID() == sc.SpanID() {
		t.Fatalf("another id derived the same ids")
	}
}

func newProvider(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter), sdktrace.WithIDGenerator(IDGenerator()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exporter
}

func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestEmissionAndHandlingSpans checks that RecordEmission exports the span with the derived
// ids and its times and attributes, that StartHandling of the occurrence's message is its
// child, and that other spans of the provider get random ids.
func TestEmissionAndHandlingSpans(t *testing.T) {
	tp, exporter := newProvider(t)
	tracer := tp.Tracer(ScopeName)
	lane := &orreryv1.Lane{Namespace: "acme", Queue: "reports", Key: "k1"}
	nominal := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	start, end := nominal.Add(time.Millisecond), nominal.Add(3*time.Millisecond)
	// A span in the context must not become the emission span's parent.
	outer, outerSpan := tracer.Start(context.Background(), "outer")
	RecordEmission(outer, tracer, Occurrence{
		MessageID: occurrenceID, Lane: lane, Partition: 3, ScheduleID: "0f8fad5b-d9cb-469f-a165-70867728950e",
		Name: "nightly", Generation: 1, Ordinal: 2, NominalDueAt: nominal,
	}, start, end)
	outerSpan.End()
	msg := &orreryv1.QueueMessage{Id: occurrenceID, Lane: lane, DeliveryCount: 1, Origin: &orreryv1.QueueMessage_Occurrence{Occurrence: &orreryv1.OccurrenceOrigin{
		ScheduleId: "0f8fad5b-d9cb-469f-a165-70867728950e", Generation: 1, Ordinal: 2, NominalDueAtUnixMicros: nominal.UnixMicro(),
	}}}
	_, handling := StartHandling(context.Background(), tracer, msg, 3)
	EndWithError(handling, errors.New("boom"))

	spans := exporter.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("exported %d spans, want 3", len(spans))
	}
	emit, outerStub, handle := spans[0], spans[1], spans[2]
	want := OccurrenceSpanContext(occurrenceID)
	if emit.Name != EmitSpanName || emit.SpanContext.TraceID() != want.TraceID() || emit.SpanContext.SpanID() != want.SpanID() || emit.Parent.IsValid() {
		t.Fatalf("emission span %s %v parent %v: want %s with the derived ids and no parent", emit.Name, emit.SpanContext, emit.Parent, EmitSpanName)
	}
	if !emit.StartTime.Equal(start) || !emit.EndTime.Equal(end) || emit.SpanKind != trace.SpanKindProducer {
		t.Fatalf("emission span from %v to %v kind %v", emit.StartTime, emit.EndTime, emit.SpanKind)
	}
	got := attrs(emit.Attributes)
	for key, value := range map[attribute.Key]attribute.Value{
		AttrScheduleID: attribute.StringValue("0f8fad5b-d9cb-469f-a165-70867728950e"), AttrScheduleName: attribute.StringValue("nightly"),
		AttrGeneration: attribute.Int64Value(1), AttrOrdinal: attribute.Int64Value(2), AttrNominalDueAt: attribute.StringValue("2026-01-01T00:00:00Z"),
		AttrNamespace: attribute.StringValue("acme"), AttrQueue: attribute.StringValue("reports"), AttrKey: attribute.StringValue("k1"),
		AttrPartition: attribute.IntValue(3), AttrMessageID: attribute.StringValue(occurrenceID),
	} {
		if got[key] != value {
			t.Errorf("emission attribute %s = %v, want %v", key, got[key].Emit(), value.Emit())
		}
	}
	if outerStub.SpanContext.TraceID() == want.TraceID() {
		t.Fatalf("a span outside RecordEmission got the derived trace id")
	}
	if handle.SpanContext.TraceID() != want.TraceID() || handle.Parent.SpanID() != want.SpanID() || !handle.Parent.IsRemote() {
		t.Fatalf("handling span %v parent %v: want the child of %v", handle.SpanContext, handle.Parent, want)
	}
	if h := attrs(handle.Attributes); h[AttrOrdinal] != attribute.Int64Value(2) || h[AttrScheduleID] != got[AttrScheduleID] || h[AttrDeliveryCount] != attribute.Int64Value(1) {
		t.Fatalf("handling attributes %v", handle.Attributes)
	}
	if handle.Status.Code != codes.Error {
		t.Fatalf("failed handling span status %v, want Error", handle.Status)
	}
}

// TestStartHandlingOtherMessagesAreRoots checks that a message a caller enqueued and a manual
// occurrence (whose emission no coordinator recorded) get root handling spans.
func TestStartHandlingOtherMessagesAreRoots(t *testing.T) {
	tp, exporter := newProvider(t)
	tracer := tp.Tracer(ScopeName)
	outer, outerSpan := tracer.Start(context.Background(), "run")
	for _, msg := range []*orreryv1.QueueMessage{
		{Id: "m1"},
		{Id: "manual-x", Origin: &orreryv1.QueueMessage_Occurrence{Occurrence: &orreryv1.OccurrenceOrigin{Manual: true}}},
	} {
		_, span := StartHandling(outer, tracer, msg, 0)
		span.End()
	}
	outerSpan.End()
	for _, s := range exporter.GetSpans()[:2] {
		if s.Parent.IsValid() {
			t.Fatalf("handling span of %v has parent %v, want a root", attrs(s.Attributes)[AttrMessageID].Emit(), s.Parent)
		}
	}
}
