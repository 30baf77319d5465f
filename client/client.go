package client

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/tracing"
)

// Transport reaches partition grains. The silo provides one over the protoactor cluster;
// tests use the in-memory twin in package clienttest.
//
// Command and Inspect make one attempt each: the client does the retrying. They report
// transport failures as errors (an *orrery.Error with its code, or any other error, which the
// client treats as Unavailable) and answers of the grain in the reply. A Command whose request
// has wait_micros > 0 may take that long to answer; a transport must not cut it short with an
// attempt timeout below the wait.
type Transport interface {
	// Partitions reports the cluster's fixed partition count P (positive).
	Partitions() int
	// Command sends one batch to partition/<partition>.
	Command(ctx context.Context, partition int, req *orreryv1.CommandRequest) (*orreryv1.CommandReply, error)
	// Inspect sends one read to partition/<partition>.
	Inspect(ctx context.Context, partition int, req *orreryv1.InspectRequest) (*orreryv1.InspectReply, error)
}

// DefaultPrincipal is the principal of a client whose Options name none.
const DefaultPrincipal = "anonymous"

// Options configure a Client. The zero value is usable.
type Options struct {
	// Principal is who the client acts as (default DefaultPrincipal). Command ids are scoped to
	// it: replaying an id under another principal is a new command. With transport TLS the
	// silos act on the principal of the client's certificate whatever this says, and Dial
	// sets it to that principal (DialConfig.TLSCert).
	Principal string
	// Retry is the schedule of retries of retriable failures.
	Retry RetryPolicy
	// Logger receives retry and worker diagnostics (default: discarded).
	Logger *slog.Logger
	// CommandIDs generates a command id per call (default NewID: random UUIDv4 strings).
	CommandIDs func() string
	// Limits are the cluster's command limits, checked before every send (default: Dial
	// learns them from the cluster; otherwise DefaultLimits()).
	Limits *Limits
	// TracerProvider, when set, receives a client span per Command and Inspect call (retries
	// included) and a Worker's handling span per delivered message, the child of the
	// occurrence's emission span for an occurrence (package tracing). Nil: no tracing.
	TracerProvider trace.TracerProvider
	// Clock is the time the client's decisions run on (default clock.Real()): the waits
	// between retries, a worker's lease extensions and back-offs, and its UnreachableTimeout.
	// Each request's own deadline is its context's, in real time. Tests pass a clock.Fake.
	Clock clock.Clock
}

// RetryPolicy is an exponential backoff with jitter: the wait before retry n (n = 0 after the
// first failed attempt) has a base of Initial × Multiplier^n capped at Max, and is spread
// uniformly over [base/2, base) by Jitter. The zero value is the default policy.
type RetryPolicy struct {
	// Initial is the base of the first wait (default 50 ms).
	Initial time.Duration
	// Max caps the base (default 2 s).
	Max time.Duration
	// Multiplier grows the base after each retry (default 2; below 1 means 1).
	Multiplier float64
	// Jitter returns samples in [0, 1) (default math/rand/v2.Float64). Tests inject a fixed
	// source.
	Jitter func() float64
	// MaxAttempts gives up with Unavailable after this many attempts (default 0: retry until
	// the call's context ends).
	MaxAttempts int
}

// Default retry bounds.
const (
	DefaultRetryInitial = 50 * time.Millisecond
	DefaultRetryMax     = 2 * time.Second
)

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Initial <= 0 {
		p.Initial = DefaultRetryInitial
	}
	if p.Max <= 0 {
		p.Max = DefaultRetryMax
	}
	if p.Max < p.Initial {
		p.Max = p.Initial
	}
	if p.Multiplier == 0 {
		p.Multiplier = 2
	}
	if p.Multiplier < 1 {
		p.Multiplier = 1
	}
	if p.Jitter == nil {
		p.Jitter = rand.Float64
	}
	return p
}

// Delay returns the wait before retry n (0-based) for a jitter sample in [0, 1) (clamped).
func (p RetryPolicy) Delay(retry int, jitter float64) time.Duration {
	p = p.withDefaults()
	base := float64(p.Initial)
	for i := 0; i < retry && base < float64(p.Max); i++ {
		base *= p.Multiplier
	}
	base = min(base, float64(p.Max))
	jitter = min(max(jitter, 0), 1)
	return time.Duration(base/2 + jitter*base/2)
}

// Client calls Orrery's partition grains through a Transport. It is safe for concurrent use.
type Client struct {
	transport  Transport
	principal  string
	retry      RetryPolicy
	log        *slog.Logger
	commandIDs func() string
	limits     Limits
	tracer     trace.Tracer // a no-op tracer without Options.TracerProvider
	clock      clock.Clock
	// certPrincipal is the principal of the TLS certificate the client dialed with (Dial), ""
	// without one; asErr refuses every call of a client As made to act as another principal,
	// which the silos would overwrite with the certificate's.
	certPrincipal string
	asErr         error
}

// New returns a client over t.
func New(t Transport, opts Options) *Client {
	c := &Client{
		transport:  t,
		principal:  opts.Principal,
		retry:      opts.Retry.withDefaults(),
		log:        opts.Logger,
		commandIDs: opts.CommandIDs,
		clock:      opts.Clock,
	}
	if c.clock == nil {
		c.clock = clock.Real()
	}
	if c.principal == "" {
		c.principal = DefaultPrincipal
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.commandIDs == nil {
		c.commandIDs = NewID
	}
	c.tracer = noop.NewTracerProvider().Tracer(tracing.ScopeName)
	if opts.TracerProvider != nil {
		c.tracer = opts.TracerProvider.Tracer(tracing.ScopeName)
	}
	c.limits = DefaultLimits()
	if opts.Limits != nil {
		c.limits = *opts.Limits
	}
	return c
}

// Close closes the transport if it implements io.Closer.
func (c *Client) Close() error {
	if closer, ok := c.transport.(io.Closer); ok {
		return closer.Close()
	}
	return nil
}

// Partitions reports the cluster's partition count.
func (c *Client) Partitions() int { return c.transport.Partitions() }

// Principal reports who the client acts as.
func (c *Client) Principal() string { return c.principal }

// after returns a channel closed once d has passed on the client's clock, and the timer that
// closes it (Stop it when the wait ends otherwise).
func (c *Client) after(d time.Duration) (<-chan struct{}, clock.Timer) {
	fired := make(chan struct{})
	return fired, c.clock.AfterFunc(d, func() { close(fired) })
}

// As returns a client over the same transport and options that acts as principal (the silo's
// admin endpoint acts as each request's authenticated principal this way). A client dialed
// with a TLS certificate acts as the certificate's principal, which the silos take from the
// connection whatever a request says: As of another principal returns a client whose every
// call fails with Validation saying so, instead of silently acting as the certificate's.
func (c *Client) As(principal string) *Client {
	as := *c
	as.principal = principal
	as.asErr = nil
	if c.certPrincipal != "" && principal != c.certPrincipal {
		as.asErr = orrery.Invalid("principal",
			"this client dialed with the TLS certificate of principal %q, and under mutual TLS the silos act as the certificate's principal whatever a request names: As(%q) cannot change it; dial with %q's certificate instead",
			c.certPrincipal, principal, principal)
	}
	return &as
}

// CallOption tunes one mutation call.
type CallOption func(*callOptions)

type callOptions struct {
	commandID    string
	allOrNothing bool
	receipt      *Receipt
	onRetry      func(error) // hears of each retriable failed attempt (see retrying)
	// shortRetries: the attempts of a waiting request after a failed one do not wait.
	shortRetries bool
}

// WithCommandID sends the call under the caller's command id instead of a fresh one. Sending
// the same request again under the same id returns the original receipt without applying it
// again; a different request under a used id fails with IdempotencyConflict.
func WithCommandID(id string) CallOption {
	return func(o *callOptions) { o.commandID = id }
}

// WithAllOrNothing makes any failing mutation roll the whole batch back (Batch.all_or_nothing).
func WithAllOrNothing() CallOption {
	return func(o *callOptions) { o.allOrNothing = true }
}

// Receipt is a command's complete receipt and its exact bytes, byte-identical when the command
// id is replayed.
type Receipt struct {
	*orreryv1.Receipt
	Bytes []byte
}

// WithReceipt stores the complete receipt of the call in *receipt once the partition has
// answered with one, whether the call then succeeds or fails on a mutation's error: the typed
// calls return only their mutation's result, and the receipt adds the command id, the logged
// time and every result.
func WithReceipt(receipt *Receipt) CallOption {
	return func(o *callOptions) { o.receipt = receipt }
}

// withRetryObserver has onRetry hear of every retriable failed attempt of the call, before its
// backoff (the worker tracks unreachable partitions with it).
func withRetryObserver(onRetry func(error)) CallOption {
	return func(o *callOptions) { o.onRetry = onRetry }
}

// withShortRetries makes a waiting request's attempts after a failed one not wait: the first
// that succeeds answers at once, so the caller learns that its partition answers again.
func withShortRetries() CallOption {
	return func(o *callOptions) { o.shortRetries = true }
}

func (c *Client) callOptions(opts []CallOption) callOptions {
	var o callOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.commandID == "" {
		o.commandID = c.commandIDs()
	}
	return o
}
