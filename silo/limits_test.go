package silo

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/route"
)

func dialSilo(t *testing.T, s *Silo) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.DialConfig{Seeds: []string{s.GossipAddress()}, Options: client.Options{Logger: quiet}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func scheduleWithPayload(payloadBytes int) *orreryv1.ScheduleDefinition {
	return &orreryv1.ScheduleDefinition{
		Lane:       &orreryv1.Lane{Namespace: "ns", Queue: "big", Key: "k"},
		ScheduleId: uuid.NewString(),
		Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_At{At: &orreryv1.AtSpec{
			DueAtUnixMicros: time.Now().Add(time.Hour).UnixMicro(),
		}}},
		Template: &orreryv1.MessageTemplate{PayloadJson: `"` + strings.Repeat("x", payloadBytes-2) + `"`},
	}
}

// TestOversizedPayloadFailsAtOnceThroughDial: a 10 MB schedule payload sent through a dialed
// client (and the silo's own) is a Validation error on its field at once, not a retry loop
// until the deadline; a payload at the limit is configured.
func TestOversizedPayloadFailsAtOnceThroughDial(t *testing.T) {
	s := startSilo(t, t.TempDir(), nil)
	dialed := dialSilo(t, s)
	const field = "mutations[0].configure_schedule.definition.template.payload_json"
	for name, c := range map[string]*client.Client{"dialed": dialed, "in-process": s.Client()} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		start := time.Now()
		_, err := c.ConfigureSchedule(ctx, scheduleWithPayload(10_000_000), 0)
		elapsed := time.Since(start)
		cancel()
		if orrery.CodeOf(err) != orrery.CodeValidation || orrery.AsError(err).Field != field {
			t.Fatalf("%s: 10 MB payload: err = %v, want Validation on %s", name, err, field)
		}
		if elapsed > 2*time.Second {
			t.Fatalf("%s: 10 MB payload failed after %v, want at once", name, elapsed)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		_, err = c.ConfigureSchedule(ctx, scheduleWithPayload(input.DefaultLimits().MaxPayloadBytes), 0)
		cancel()
		if err != nil {
			t.Fatalf("%s: a payload at the limit: %v", name, err)
		}
	}
}

// TestCommandAboveGRPCDefaultIsAnswered: a command larger than gRPC's default 4 MiB message
// (twenty 256 KiB enqueues) crosses the actor transport and is answered, whatever the answer.
func TestCommandAboveGRPCDefaultIsAnswered(t *testing.T) {
	t.Parallel()
	s := startSilo(t, t.TempDir(), nil)
	c := dialSilo(t, s)
	lane := &orreryv1.Lane{Namespace: "ns", Queue: "big", Key: "k"}
	payload := `"` + strings.Repeat("x", input.DefaultLimits().MaxPayloadBytes-2) + `"`
	var muts []*orreryv1.Mutation
	for range 20 {
		muts = append(muts, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: lane, Id: uuid.NewString(), PayloadJson: payload}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, _, err := c.Batch(ctx, route.Partition(lane, c.Partitions()), muts)
	t.Logf("after %v: %v", time.Since(start), err)
	if code := orrery.CodeOf(err); code == orrery.CodeDeadlineExceeded || code == orrery.CodeUnavailable {
		t.Fatalf("a 5 MiB command was not answered: %v", err)
	}
}

// TestDialedClientKeepsTheClusterLimits: Dial and the silo's own client check against the
// silo's configured limits, not the defaults.
func TestDialedClientKeepsTheClusterLimits(t *testing.T) {
	t.Parallel()
	lim := input.DefaultLimits()
	lim.MaxPayloadBytes, lim.MaxHeadersBytes, lim.MaxStateBytes, lim.MaxMutationsPerBatch = 100<<10, 10<<10, 50<<10, 64
	s := startSilo(t, t.TempDir(), func(c *Config) { c.Limits = lim })
	want := client.LimitsOf(lim)
	if got := dialSilo(t, s).Limits(); got != want {
		t.Fatalf("dialed client limits %+v, want %+v", got, want)
	}
	if got := s.Client().Limits(); got != want {
		t.Fatalf("in-process client limits %+v, want %+v", got, want)
	}
}

// TestStartRefusesLimitsBeyondTheTransport: limits whose largest command would not fit the
// actor transport's largest message stop the silo before it starts, naming them.
func TestStartRefusesLimitsBeyondTheTransport(t *testing.T) {
	lim := input.DefaultLimits()
	lim.MaxPayloadBytes = 8 << 20
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, Config{DataDir: t.TempDir(), Partitions: 8, Admin: "off", Logger: quiet, InsecureDev: true, Limits: lim})
	if err == nil {
		s.Stop()
		t.Fatal("a silo started with 256 mutations of 8 MiB payloads per command")
	}
	e := orrery.AsError(err)
	if e.Code != orrery.CodeValidation || e.Field != "limits" || !strings.Contains(e.Message, "max_payload_bytes 8388608") {
		t.Fatalf("err = %v, want Validation on limits naming max_payload_bytes", err)
	}
}
