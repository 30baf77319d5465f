package tracing

import (
	"context"
	"crypto/rand"
	"crypto/sha256"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// OccurrenceSpanContext is the span context of the emission span of the occurrence whose
// message id is messageID: trace id and span id are the first 16 and the next 8 bytes of
// SHA-256(messageID). It is sampled and remote, ready to be the parent of a handling span.
func OccurrenceSpanContext(messageID string) trace.SpanContext {
	sum := sha256.Sum256([]byte(messageID))
	var traceID trace.TraceID
	var spanID trace.SpanID
	copy(traceID[:], sum[:16])
	copy(spanID[:], sum[16:24])
	// An all-zero id is invalid in OpenTelemetry; a digest that starts with 16 (or has 8)
	// zero bytes is not expected, but stays a valid, still derived id.
	if !traceID.IsValid() {
		traceID[15] = 1
	}
	if !spanID.IsValid() {
		spanID[7] = 1
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled, Remote: true})
}

// ContextWithOccurrenceParent returns ctx carrying the emission span of the occurrence whose
// message id is messageID as its remote parent: a span started from it is that span's child.
func ContextWithOccurrenceParent(ctx context.Context, messageID string) context.Context {
	return trace.ContextWithRemoteSpanContext(ctx, OccurrenceSpanContext(messageID))
}

// fixedIDsKey is the context key of the ids the next root span is to have.
type fixedIDsKey struct{}

// withFixedIDs returns ctx asking IDGenerator for sc's trace and span ids.
func withFixedIDs(ctx context.Context, sc trace.SpanContext) context.Context {
	return context.WithValue(ctx, fixedIDsKey{}, sc)
}

// IDGenerator returns an SDK IDGenerator that gives a root span started under RecordEmission
// its occurrence's derived ids and any other span random ones (from crypto/rand).
func IDGenerator() sdktrace.IDGenerator { return idGenerator{} }

type idGenerator struct{}

// NewIDs returns the ids the context asks for, or random ones.
func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if sc, ok := ctx.Value(fixedIDsKey{}).(trace.SpanContext); ok {
		return sc.TraceID(), sc.SpanID()
	}
	var traceID trace.TraceID
	for !traceID.IsValid() {
		_, _ = rand.Read(traceID[:]) // crypto/rand.Read never fails
	}
	return traceID, randomSpanID()
}

// NewSpanID returns a random span id: child spans are never derived.
func (idGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return randomSpanID() }

func randomSpanID() trace.SpanID {
	var spanID trace.SpanID
	for !spanID.IsValid() {
		_, _ = rand.Read(spanID[:])
	}
	return spanID
}
