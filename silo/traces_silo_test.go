package silo

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/internal/testkit"
	"github.com/orreryhq/orrery/tracing"
)

// TestWorkerHandlingSpansAreChildrenOfEmissionSpans runs an Every schedule on a silo whose
// spans go to one in-memory exporter and a worker of a dialled client whose spans go to
// another: each handled occurrence's handling span has the trace id of its emission span and
// that span as its parent, and both carry the schedule's and the occurrence's attributes. The
// client's calls are traced too.
func TestWorkerHandlingSpansAreChildrenOfEmissionSpans(t *testing.T) {
	t.Parallel()
	siloSpans, clientSpans := tracetest.NewInMemoryExporter(), tracetest.NewInMemoryExporter()
	siloTP := sdktrace.NewTracerProvider(sdktrace.WithSyncer(siloSpans), sdktrace.WithIDGenerator(tracing.IDGenerator()))
	clientTP := sdktrace.NewTracerProvider(sdktrace.WithSyncer(clientSpans))
	t.Cleanup(func() { _ = siloTP.Shutdown(context.Background()); _ = clientTP.Shutdown(context.Background()) })
	s := startSilo(t, t.TempDir(), func(c *Config) { c.TracerProvider = siloTP })

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.DialConfig{Seeds: []string{s.GossipAddress()}, Options: client.Options{Logger: quiet, TracerProvider: clientTP}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	lane := &orreryv1.Lane{Namespace: "traced", Queue: "ticks", Key: "k1"}
	id := uuid.NewString()
	if _, err := c.ConfigureSchedule(ctx, &orreryv1.ScheduleDefinition{
		Lane: lane, ScheduleId: id, Name: "every second", Template: &orreryv1.MessageTemplate{PayloadJson: `{}`},
		Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{IntervalMicros: time.Second.Microseconds(), FirstDueAtUnixMicros: time.Now().Add(time.Second).UnixMicro()}}},
	}, 0); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	handled := map[string]trace.SpanContext{} // message id → the span context the handler ran in
	workerCtx, stopWorker := context.WithCancel(ctx)
	done := make(chan error, 1)
	w := c.NewWorker(client.WorkerConfig{Namespace: "traced", Queue: "ticks", Wait: time.Second, Handler: func(hctx context.Context, m *client.Message) error {
		mu.Lock()
		defer mu.Unlock()
		handled[m.ID()] = trace.SpanContextFromContext(hctx)
		return nil
	}})
	go func() { done <- w.Run(workerCtx) }()
	testkit.Eventually(t, 30*time.Second, "three handled occurrences", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) >= 3
	})
	stopWorker()
	if err := <-done; err != nil && err != context.Canceled {
		t.Fatalf("worker: %v", err)
	}

	emissions := map[trace.TraceID]tracetest.SpanStub{}
	for _, span := range siloSpans.GetSpans() {
		if span.Name == tracing.EmitSpanName {
			emissions[span.SpanContext.TraceID()] = span
		}
	}
	handlings := map[string]tracetest.SpanStub{}
	sawCommand := false
	for _, span := range clientSpans.GetSpans() {
		switch span.Name {
		case tracing.HandleSpanName:
			handlings[attrsOf(span)[tracing.AttrMessageID].AsString()] = span
		case tracing.CommandSpanName:
			sawCommand = true
		}
	}
	if !sawCommand {
		t.Errorf("the client recorded no %s span", tracing.CommandSpanName)
	}
	mu.Lock()
	defer mu.Unlock()
	for messageID, handlerSC := range handled {
		handling, ok := handlings[messageID]
		if !ok {
			t.Fatalf("no handling span of %s", messageID)
		}
		if handling.SpanContext.SpanID() != handlerSC.SpanID() {
			t.Errorf("the handler of %s ran outside its handling span", messageID)
		}
		emission, ok := emissions[handling.SpanContext.TraceID()]
		if !ok {
			t.Fatalf("handling span of %s is in trace %s, which holds no emission span", messageID, handling.SpanContext.TraceID())
		}
		if handling.Parent.SpanID() != emission.SpanContext.SpanID() {
			t.Errorf("handling span of %s has parent %s, want the emission span %s", messageID, handling.Parent.SpanID(), emission.SpanContext.SpanID())
		}
		e, h := attrsOf(emission), attrsOf(handling)
		for _, key := range []attribute.Key{tracing.AttrScheduleID, tracing.AttrGeneration, tracing.AttrOrdinal, tracing.AttrNominalDueAt, tracing.AttrMessageID, tracing.AttrNamespace, tracing.AttrQueue, tracing.AttrKey, tracing.AttrPartition} {
			if e[key] != h[key] || e[key].Type() == attribute.INVALID {
				t.Errorf("%s: emission %s=%v, handling %v", messageID, key, e[key].Emit(), h[key].Emit())
			}
		}
		if e[tracing.AttrScheduleID].AsString() != id || e[tracing.AttrScheduleName].AsString() != "every second" {
			t.Errorf("emission of %s names schedule %v %v", messageID, e[tracing.AttrScheduleID].Emit(), e[tracing.AttrScheduleName].Emit())
		}
	}
}

func attrsOf(span tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range span.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}
