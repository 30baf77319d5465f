package client_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/client/clienttest"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/route"
)

// oversized is one call beyond the default limits and the field the partition names for it.
type oversized struct {
	name  string
	field string
	call  func(ctx context.Context, c *client.Client) error
}

// jsonOf returns a JSON string value of exactly n bytes.
func jsonOf(n int) string { return `"` + strings.Repeat("x", n-2) + `"` }

// objectOf returns a JSON object of exactly n bytes.
func objectOf(n int) string { return `{"k":"` + strings.Repeat("x", n-8) + `"}` }

func oversizedCalls() []oversized {
	lim := input.DefaultLimits()
	l := lane("big", "k")
	sagaLane := lane("sagas", "k")
	waitingSaga := func() *orreryv1.CompareExchangeSaga {
		return &orreryv1.CompareExchangeSaga{
			Lane: sagaLane, SagaId: client.NewID(), Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING, StateJson: `{}`,
			DeadlineUnixMicros: time.Now().Add(time.Hour).UnixMicro(),
			Timeout:            &orreryv1.SagaTimeout{Queue: "timeouts", Template: &orreryv1.MessageTemplate{PayloadJson: `{}`}},
		}
	}
	return []oversized{
		{"enqueue payload", "mutations[0].enqueue.payload_json", func(ctx context.Context, c *client.Client) error {
			_, err := c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: "m1", PayloadJson: jsonOf(lim.MaxPayloadBytes + 1)})
			return err
		}},
		{"enqueue headers", "mutations[0].enqueue.headers_json", func(ctx context.Context, c *client.Client) error {
			_, err := c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: "m2", PayloadJson: `{}`, HeadersJson: objectOf(lim.MaxHeadersBytes + 1)})
			return err
		}},
		{"schedule template payload", "mutations[0].configure_schedule.definition.template.payload_json", func(ctx context.Context, c *client.Client) error {
			def := everySchedule(l, client.NewID(), time.Second, time.Now())
			def.Template.PayloadJson = jsonOf(lim.MaxPayloadBytes + 1)
			_, err := c.ConfigureSchedule(ctx, def, 0)
			return err
		}},
		{"saga state", "mutations[0].compare_exchange_saga.state_json", func(ctx context.Context, c *client.Client) error {
			m := waitingSaga()
			m.StateJson = jsonOf(lim.MaxStateBytes + 1)
			_, err := c.CompareExchangeSaga(ctx, m)
			return err
		}},
		{"saga timeout headers", "mutations[0].compare_exchange_saga.timeout.template.headers_json", func(ctx context.Context, c *client.Client) error {
			m := waitingSaga()
			m.Timeout.Template.HeadersJson = objectOf(lim.MaxHeadersBytes + 1)
			_, err := c.CompareExchangeSaga(ctx, m)
			return err
		}},
		{"batch mutation count", "mutations", func(ctx context.Context, c *client.Client) error {
			muts := make([]*orreryv1.Mutation, lim.MaxMutationsPerBatch+1)
			for i := range muts {
				muts[i] = &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: l, Id: client.NewID(), PayloadJson: `{}`}}}
			}
			_, _, err := c.Batch(ctx, route.Partition(l, c.Partitions()), muts)
			return err
		}},
	}
}

// validation returns err as a Validation error, failing the test otherwise.
func validation(t *testing.T, err error) *orrery.Error {
	t.Helper()
	if orrery.CodeOf(err) != orrery.CodeValidation {
		t.Fatalf("err = %v, want a Validation error", err)
	}
	return orrery.AsError(err)
}

func TestOversizedInputFailsBeforeSending(t *testing.T) {
	t.Parallel()
	for _, tc := range oversizedCalls() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, 4)
			e := validation(t, tc.call(ctxFor(t), b.c))
			if e.Field != tc.field {
				t.Fatalf("field = %q, want %q (%v)", e.Field, tc.field, e)
			}
			if n := b.tr.CommandCalls(); n != 0 {
				t.Fatalf("%d attempts reached the transport, want none", n)
			}
		})
	}
}

// TestSizeCheckMatchesPartition sends each oversized call through a client whose limits let
// it pass to the twin, which applies it with the partition's applier under the default limits:
// the partition's error is the client's own, field and message alike.
func TestSizeCheckMatchesPartition(t *testing.T) {
	t.Parallel()
	generous := client.Limits{MaxPayloadBytes: 1 << 30, MaxHeadersBytes: 1 << 30, MaxStateBytes: 1 << 30, MaxMutationsPerBatch: 1 << 20, MaxMessageBytes: 1 << 30}
	for _, tc := range oversizedCalls() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, 4)
			ctx := ctxFor(t)
			checked := validation(t, tc.call(ctx, b.c))
			sender := client.New(b.tr, client.Options{Limits: &generous, Logger: slog.New(slog.DiscardHandler)})
			applied := validation(t, tc.call(ctx, sender))
			if n := b.tr.CommandCalls(); n != 1 {
				t.Fatalf("%d attempts reached the transport, want 1", n)
			}
			if applied.Field != checked.Field || applied.Message != checked.Message {
				t.Fatalf("partition says %q: %q; client says %q: %q", applied.Field, applied.Message, checked.Field, checked.Message)
			}
		})
	}
}

// TestCommandBeyondTransportFailsBeforeSending: a command within the document limits whose
// encoding exceeds the transport's largest message is a Validation error on mutations.
func TestCommandBeyondTransportFailsBeforeSending(t *testing.T) {
	t.Parallel()
	tr := clienttest.New(4)
	t.Cleanup(func() { _ = tr.Close() })
	limits := client.DefaultLimits()
	limits.MaxMessageBytes = 64 << 10
	c := client.New(tr, client.Options{Limits: &limits})
	_, err := c.Enqueue(ctxFor(t), &orreryv1.Enqueue{Lane: lane("big", "k"), Id: "m", PayloadJson: jsonOf(100 << 10)})
	e := validation(t, err)
	if e.Field != "mutations" || !strings.Contains(e.Message, "65536 bytes") {
		t.Fatalf("err = %v, want Validation on mutations naming the 65536-byte maximum", e)
	}
	if n := tr.CommandCalls(); n != 0 {
		t.Fatalf("%d attempts reached the transport, want none", n)
	}
	if _, err := c.Enqueue(ctxFor(t), &orreryv1.Enqueue{Lane: lane("big", "k"), Id: "m", PayloadJson: jsonOf(60 << 10)}); err != nil {
		t.Fatalf("a command under the maximum: %v", err)
	}
}

// TestDefaultLimitsFitTheTransport: the client's defaults are the silo's.
func TestDefaultLimitsFitTheTransport(t *testing.T) {
	lim := input.DefaultLimits()
	got := client.DefaultLimits()
	if got.MaxPayloadBytes != lim.MaxPayloadBytes || got.MaxHeadersBytes != lim.MaxHeadersBytes ||
		got.MaxStateBytes != lim.MaxStateBytes || got.MaxMutationsPerBatch != lim.MaxMutationsPerBatch {
		t.Fatalf("client.DefaultLimits() = %+v, input.DefaultLimits() = %+v", got, lim)
	}
	if lim.MaxCommandBytes() > got.MaxMessageBytes {
		t.Fatalf("the largest valid command (%d bytes) exceeds the transport's largest message (%d)", lim.MaxCommandBytes(), got.MaxMessageBytes)
	}
}
