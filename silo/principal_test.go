package silo

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// TestTheEmbeddersClientActsAsItsOwnPrincipal: Silo.Client acts as Config.ClientPrincipal
// (client.DefaultPrincipal when unset), never as the silo's own principal, and Start refuses
// one of Orrery's own principals there.
func TestTheEmbeddersClientActsAsItsOwnPrincipal(t *testing.T) {
	t.Parallel()
	if _, err := (Config{InsecureDev: true, ClientPrincipal: Principal}).withDefaults(); err == nil || !strings.Contains(err.Error(), "client principal") {
		t.Fatalf("an Orrery principal as the client principal: %v, want an error naming client principal", err)
	}
	if cfg, err := (Config{InsecureDev: true}).withDefaults(); err != nil || cfg.ClientPrincipal != client.DefaultPrincipal {
		t.Fatalf("default client principal %q (%v), want %q", cfg.ClientPrincipal, err, client.DefaultPrincipal)
	}

	s := startSilo(t, t.TempDir(), func(c *Config) { c.ClientPrincipal = "app" })
	if got := s.Client().Principal(); got != "app" {
		t.Fatalf("Silo.Client acts as %q, want the configured app", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// InsecureDev grants the client principal everything, as it does client.DefaultPrincipal.
	if _, err := s.Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: &orreryv1.Lane{Namespace: "acme", Queue: "jobs", Key: "k"}, Id: "m1", PayloadJson: `{}`}); err != nil {
		t.Fatalf("enqueue as app: %v", err)
	}
	if _, err := s.Client().As(Principal).PartitionStatus(ctx, 0); !errors.Is(err, orrery.ErrUnauthorized) {
		t.Fatalf("the embedder's client as %s: %v, want Unauthorized", Principal, err)
	}
}

// TestAClientCannotActAsAnOrreryPrincipal: a dialed client (no TLS) that names one of Orrery's
// own principals is refused Unauthorized, naming the principal, before anything is sent; the
// same client under an ordinary principal is served.
func TestAClientCannotActAsAnOrreryPrincipal(t *testing.T) {
	t.Parallel()
	s := startSilo(t, t.TempDir(), nil)
	waitReady(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.DialConfig{Seeds: []string{s.GossipAddress()}, Options: client.Options{Logger: quiet, Principal: Principal}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lane := &orreryv1.Lane{Namespace: "acme", Queue: "jobs", Key: "k"}
	if _, err := c.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "m1", PayloadJson: `{}`}); !errors.Is(err, orrery.ErrUnauthorized) || !strings.Contains(err.Error(), Principal) {
		t.Fatalf("enqueue as %s from a client: %v, want Unauthorized naming it", Principal, err)
	}
	if _, err := c.PartitionStatus(ctx, 0); !errors.Is(err, orrery.ErrUnauthorized) {
		t.Fatalf("a read as %s from a client: %v, want Unauthorized", Principal, err)
	}
	if _, err := c.As(client.DefaultPrincipal).Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "m1", PayloadJson: `{}`}); err != nil {
		t.Fatalf("enqueue as %s: %v", client.DefaultPrincipal, err)
	}
}
