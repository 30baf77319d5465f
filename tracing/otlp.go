package tracing

import (
	"context"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/orreryhq/orrery"
)

// ServiceName is the service.name of a silo's spans.
const ServiceName = "orrery-silo"

// NewOTLPProvider returns a TracerProvider that batches spans to the OTLP/HTTP collector at
// endpoint ("host:port", sent in plain HTTP, or an "http://" or "https://" URL, whose path
// defaults to /v1/traces), named serviceName, with IDGenerator so emission spans get their
// derived ids. The caller shuts it down (which flushes what is batched). Nothing is sent until
// a span ends, so an unreachable collector fails no start: its spans are dropped and logged by
// the OpenTelemetry error handler.
func NewOTLPProvider(ctx context.Context, endpoint, serviceName string, extra ...attribute.KeyValue) (*sdktrace.TracerProvider, error) {
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
	res := resource.NewSchemaless(append([]attribute.KeyValue{attribute.String("service.name", serviceName)}, extra...)...)
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(IDGenerator()),
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
