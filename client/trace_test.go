package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/schedule"
	"github.com/orreryhq/orrery/tracing"
)

func spanAttrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestTracedClient checks a client with a TracerProvider: its Command and Inspect calls get
// client spans (a failed one with an error status), and its worker's handling span of an
// occurrence is the child of the span context derived from the occurrence's id, with the
// occurrence's attributes, while a plain message's handling span is a root.
func TestTracedClient(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	c := client.New(b.tr, client.Options{Principal: testPrincipal, TracerProvider: tp})
	ctx := ctxFor(t)
	l := lane(testQueue, "traced")
	id := client.NewID()
	if _, err := c.ConfigureSchedule(ctx, everySchedule(l, id, time.Hour, b.clock.Now().Add(time.Minute)), 0); err != nil {
		t.Fatalf("configure: %v", err)
	}
	b.clock.Advance(time.Minute + time.Second)
	b.emitDue(1)
	occurrenceID := schedule.OccurrenceID(id, 1, 0)
	if msgs := b.laneMessages(l); len(msgs) != 1 || msgs[0].GetId() != occurrenceID {
		t.Fatalf("lane holds %v, want occurrence %s", msgs, occurrenceID)
	}
	if _, err := c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: "plain", PayloadJson: `{}`}); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	if _, err := c.InspectSchedule(ctx, l, id); err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if _, err := client.New(b.tr, client.Options{Principal: "nobody", TracerProvider: tp}).InspectSchedule(ctx, l, id); !errors.Is(err, orrery.ErrUnauthorized) {
		t.Fatalf("inspect without a grant: %v, want Unauthorized", err)
	}
	handled := make(chan string, 2)
	stop := runWorker(t, c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: testQueue, Wait: time.Second,
		Handler: func(_ context.Context, m *client.Message) error { handled <- m.ID(); return nil }}))
	for range 2 {
		select {
		case <-handled:
		case <-time.After(10 * time.Second):
			t.Fatal("messages not handled")
		}
	}
	_ = stop()

	var configure, inspect, refused, handleOccurrence, handlePlain *tracetest.SpanStub
	for _, s := range exporter.GetSpans() {
		switch a := spanAttrs(s); {
		case s.Name == tracing.CommandSpanName && configure == nil:
			configure = &s
		case s.Name == tracing.InspectSpanName && inspect == nil:
			inspect = &s
		case s.Name == tracing.InspectSpanName && refused == nil:
			refused = &s
		case s.Name == tracing.HandleSpanName && a[tracing.AttrMessageID].AsString() == occurrenceID:
			handleOccurrence = &s
		case s.Name == tracing.HandleSpanName && a[tracing.AttrMessageID].AsString() == "plain":
			handlePlain = &s
		}
	}
	if configure == nil || inspect == nil || refused == nil || handleOccurrence == nil || handlePlain == nil {
		t.Fatalf("spans: configure %v, inspects %v %v, occurrence %v, plain %v", configure != nil, inspect != nil, refused != nil, handleOccurrence != nil, handlePlain != nil)
	}
	if a := spanAttrs(*configure); a[tracing.AttrMutations] != attribute.IntValue(1) || a[tracing.AttrCommandID].AsString() == "" || configure.Status.Code == codes.Error {
		t.Errorf("command span %v status %v", configure.Attributes, configure.Status)
	}
	if inspect.Status.Code == codes.Error || spanAttrs(*inspect)[tracing.AttrPartition] != attribute.IntValue(b.partitionOf(l)) {
		t.Errorf("inspect span %v status %v", inspect.Attributes, inspect.Status)
	}
	if refused.Status.Code != codes.Error {
		t.Errorf("refused inspect span status %v, want Error", refused.Status)
	}
	want := tracing.OccurrenceSpanContext(occurrenceID)
	if handleOccurrence.SpanContext.TraceID() != want.TraceID() || handleOccurrence.Parent.SpanID() != want.SpanID() {
		t.Errorf("occurrence handling span %v parent %v, want the child of %v", handleOccurrence.SpanContext, handleOccurrence.Parent, want)
	}
	if a := spanAttrs(*handleOccurrence); a[tracing.AttrScheduleID].AsString() != id || a[tracing.AttrGeneration] != attribute.Int64Value(1) || a[tracing.AttrPartition] != attribute.IntValue(b.partitionOf(l)) {
		t.Errorf("occurrence handling attributes %v", handleOccurrence.Attributes)
	}
	if handlePlain.Parent.IsValid() {
		t.Errorf("plain message's handling span has parent %v", handlePlain.Parent)
	}
}
