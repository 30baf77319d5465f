// Package tracing owns Orrery's OpenTelemetry traces of occurrences: the emission span the due
// coordinator records for each occurrence a schedule enqueues, the trace context a worker
// derives from a delivered occurrence to make its handling span the emission span's child, and
// the span names and attributes of Orrery's spans (the client's calls included).
//
// # Propagation by derivation
//
// An occurrence's trace context is not stored in its message: it is derived from the
// occurrence's stable message id. SHA-256 of the id gives the emission span's trace id (the
// first 16 bytes) and span id (the next 8), so any party that knows the id (the worker that
// leased the message, an operator reading the ledger) reconstructs the parent SpanContext
// without a header. Storing a W3C traceparent in the message instead would need the random ids
// of a span that only exists after the partition applied the emit, which would either take a
// second write per occurrence or put span creation into the deterministic core (the message is
// built there, from the schedule's template, identically on every replica). Derivation costs
// no write and no byte, and it keeps the core free of OpenTelemetry. Its price is that every
// delivery of an occurrence, redeliveries included, belongs to one trace per occurrence, and
// that a trace backend sees a handling span whose parent was never exported when no silo
// recorded the emission (tracing off on the silos, or a manual trigger, which the coordinator
// does not emit: the worker starts manual occurrences' handling spans as roots).
//
// The emission span is exported with exactly the derived ids through IDGenerator, an SDK
// IDGenerator that returns ids a context carries (see RecordEmission) and random ones
// otherwise: a TracerProvider that records emission spans must be built with it
// (the silo's OTLP provider does so; tests pass sdktrace.WithIDGenerator(tracing.IDGenerator())).
package tracing
