package silo

import (
	"context"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/tracing"
)

// TraceServiceName is the service.name of a silo's spans.
const TraceServiceName = "orrery-silo"

// startTraces returns the TracerProvider of the silo's spans and the function that flushes
// and stops it: Config.TracerProvider as given (nil stop), an OTLP exporter's for
// Config.OTLPEndpoint, or none (nil, nil) when neither is set.
func (cfg Config) startTraces(ctx context.Context) (trace.TracerProvider, func(context.Context) error, error) {
	switch {
	case cfg.TracerProvider != nil:
		return cfg.TracerProvider, nil, nil
	case cfg.OTLPEndpoint == "":
		return nil, nil, nil
	}
	tp, err := newOTLPProvider(ctx, cfg.OTLPEndpoint, TraceServiceName)
	if err != nil {
		return nil, nil, err
	}
	return tp, tp.Shutdown, nil
}

// newOTLPProvider returns a TracerProvider that batches spans to the OTLP/HTTP collector at
// endpoint ("host:port", sent in plain HTTP, or an "http://" or "https://" URL, whose path
// defaults to /v1/traces), named serviceName, with IDGenerator so emission spans get their
// derived ids (package tracing). The caller shuts it down (which flushes what is batched). Nothing is sent until
// a span ends, so an unreachable collector fails no start: its spans are dropped and logged by
// the OpenTelemetry error handler.
func newOTLPProvider(ctx context.Context, endpoint, serviceName string) (*sdktrace.TracerProvider, error) {
	if endpoint == "" {
		return nil, orrery.Invalid("otlp_endpoint", "must not be empty")
	}
	opts, err := endpointOptions(endpoint)
	if err != nil {
		return nil, err
	}
	exporter, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, orrery.Wrap(orrery.CodeValidation, err, "otlp_endpoint %q", endpoint)
	}
	res := resource.NewSchemaless(attribute.String("service.name", serviceName))
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(tracing.IDGenerator()),
	), nil
}

// endpointOptions turns an endpoint flag into exporter options.
func endpointOptions(endpoint string) ([]otlptracehttp.Option, error) {
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, orrery.Invalid("otlp_endpoint", "must be host:port or an http:// or https:// URL, got %q", endpoint)
	}
	path := u.Path
	if path == "" || path == "/" {
		path = "/v1/traces"
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host), otlptracehttp.WithURLPath(path)}
	if u.Scheme == "http" {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	return opts, nil
}

// flushTraces flushes and stops the silo's own TracerProvider, for at most two seconds.
func (s *Silo) flushTraces() {
	if s.stopTraces == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.stopTraces(ctx); err != nil {
		s.cfg.Logger.Warn("flushing traces", "err", err)
	}
}
