package silo

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/tracing"
)

// TestOTLPProviderExports checks that the provider posts spans to the endpoint's
// /v1/traces and refuses a malformed endpoint naming the field.
func TestOTLPProviderExports(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			posts.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	for _, endpoint := range []string{strings.TrimPrefix(srv.URL, "http://"), srv.URL} {
		before := posts.Load()
		tp, err := newOTLPProvider(context.Background(), endpoint, TraceServiceName)
		if err != nil {
			t.Fatalf("newOTLPProvider(%q): %v", endpoint, err)
		}
		_, span := tp.Tracer(tracing.ScopeName).Start(context.Background(), "x")
		span.End()
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		if posts.Load() == before {
			t.Fatalf("endpoint %q: no POST to /v1/traces", endpoint)
		}
	}
	for _, bad := range []string{"", "ftp://x:1", "http://", "host:1/v1?x=1"} {
		if _, err := newOTLPProvider(context.Background(), bad, TraceServiceName); orrery.CodeOf(err) != orrery.CodeValidation || !strings.Contains(err.Error(), "otlp_endpoint") {
			t.Errorf("newOTLPProvider(%q) = %v, want Validation naming otlp_endpoint", bad, err)
		}
	}
}

// TestConfigRefusesABadOTLPEndpoint: Start's config check names the field of a malformed
// endpoint before anything is opened.
func TestConfigRefusesABadOTLPEndpoint(t *testing.T) {
	if _, err := (Config{InsecureDev: true, OTLPEndpoint: "ftp://collector"}).withDefaults(); err == nil || !strings.Contains(err.Error(), "otlp_endpoint") {
		t.Fatalf("withDefaults = %v, want an error naming otlp_endpoint", err)
	}
	if _, err := (Config{InsecureDev: true, OTLPEndpoint: "collector:4318"}).withDefaults(); err != nil {
		t.Fatalf("withDefaults(collector:4318) = %v", err)
	}
}
