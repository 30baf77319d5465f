// Package clienttest owns the in-memory twin of client.Transport, for tests of the client, the
// worker and their users that need no cluster.
//
// Each of the twin's P partitions is the real partition engine (grains/engine) over a
// kv.Memory, driven as the partition grain drives it, with an apply loop in place of Raft: a
// proposal is accepted at once, in order, and applied at once with the batch applier calls
// the partition's state machine makes (ApplyBatch under the zone rules the entry carries,
// ApplyDue for a due command, both under the partition's limits), at a strictly increasing
// logged time from an injectable clock. So the twin answers commands, long-poll receives and
// every inspection exactly as a partition does: the engine answers them, and its timers
// (long-poll waits, housekeeping) run on real time. Nothing emits due occurrences or expires
// sagas on its own: EmitDue does what a silo's due coordinator does, when a test calls it.
// What the twin leaves out lies around the engine: replication (one replica, leading in term
// 1, that accepts every proposal), the consistency checks, and the next-due notices (no
// coordinator listens). It also injects faults (failures before apply, lost replies), so
// tests can exercise the client's retries, and records every call. Conformance checks a
// Transport against what the client relies on; the twin and a silo's cluster transport both
// pass it.
package clienttest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// Defaults of the twin's partitions: those of a silo's partition grains (package partition's
// DefaultMaxWait, DefaultMaxPending, DefaultMaxWaiters and DefaultHousekeepEvery).
const (
	// DefaultMaxWait bounds a long-poll wait (WithMaxWait).
	DefaultMaxWait = 30 * time.Second
	// DefaultMaxPending bounds a partition's commands in flight and parked.
	DefaultMaxPending = 10_000
	// DefaultMaxWaiters bounds a partition's parked long-poll receives.
	DefaultMaxWaiters = 4096
	// DefaultHousekeepEvery is how often a partition runs housekeeping when something expired.
	DefaultHousekeepEvery = 10 * time.Second
)

// Silo is the silo a twin's partition status names (PartitionStatus.silo).
const Silo = "clienttest"

// Transport is the in-memory twin of the cluster transport. It is safe for concurrent use;
// each partition steps its engine one event at a time, as the partition grain does. Close it
// to stop its partitions' timers.
type Transport struct {
	limits  input.Limits
	grants  []*orreryv1.PutGrant
	clock   func() time.Time
	maxWait time.Duration
	// applyVersion is the apply version the partitions apply under (0: batch.KnownApplyVersion).
	applyVersion uint32
	partitions   []*partition
	closed       chan struct{}
	closeOnce    sync.Once
	// timers counts the engine timers armed and not yet stopped or returned (Close waits).
	timers sync.WaitGroup
	// dueCommands numbers EmitDue's due commands.
	dueCommands atomic.Uint64

	mu       sync.Mutex // guards what follows
	failNext int
	loseNext int
	hook     FaultHook
	calls    []*Call
}

var _ client.Transport = (*Transport)(nil)

// Option configures a Transport.
type Option func(*Transport)

// WithClock sets the clock the partitions run on (default time.Now): each entry is logged at
// max(clock, the partition's last logged time + 1 µs), so logged time strictly increases
// whatever the clock does, and the engines judge dueness, visibility and waits by it. The
// engines' timers (a long poll's end of wait, the instant a lease ends, housekeeping) run on
// real time, armed for the time left on the clock when they are asked for: under a clock that
// stands still or lags, a timer fires once that much real time has passed, and the engine is
// stepped at the instant it asked for.
func WithClock(now func() time.Time) Option { return func(t *Transport) { t.clock = now } }

// WithLimits sets the limits the silo is configured with (default input.DefaultLimits()). A
// partition applies under its own limits, as every replica must: on open each partition's
// engine proposes these when they differ from the partition's (a SetLimits entry, its first),
// as a partition led by a silo configured with them does.
func WithLimits(lim input.Limits) Option { return func(t *Transport) { t.limits = lim } }

// WithGrants sets the grants every partition starts with (default: every capability on every
// namespace for client.DefaultPrincipal, as a development silo gives it).
func WithGrants(puts ...*orreryv1.PutGrant) Option { return func(t *Transport) { t.grants = puts } }

// WithMaxWait bounds a long-poll wait, as a partition does (default DefaultMaxWait).
func WithMaxWait(d time.Duration) Option { return func(t *Transport) { t.maxWait = d } }

// WithApplyVersion makes every partition apply under apply version v instead of the newest this
// binary knows, as a partition does while a replica of an older release is among its voters:
// what a later version added is refused (Validation), as such a partition refuses it.
func WithApplyVersion(v uint32) Option { return func(t *Transport) { t.applyVersion = v } }

// New returns a twin with the given number of partitions (at least 1), each open.
func New(partitions int, opts ...Option) *Transport {
	if partitions < 1 {
		panic(fmt.Sprintf("clienttest: %d partitions", partitions))
	}
	t := &Transport{
		limits:  input.DefaultLimits(),
		clock:   time.Now,
		maxWait: DefaultMaxWait,
		closed:  make(chan struct{}),
		grants:  []*orreryv1.PutGrant{grants.Everything(client.DefaultPrincipal)},
	}
	for _, opt := range opts {
		opt(t)
	}
	for i := range partitions {
		store := kv.NewMemory()
		for _, put := range t.grants {
			if err := grants.ApplyPut(store, input.SystemPrincipalPrefix+"clienttest", put); err != nil {
				panic(fmt.Sprintf("clienttest: grant %v: %v", put, err))
			}
		}
		t.partitions = append(t.partitions, openPartition(t, i, partitions, store))
	}
	return t
}

// Partitions implements client.Transport.
func (t *Transport) Partitions() int { return len(t.partitions) }

// Close stops every partition's engine and timers, and makes every waiting and later call
// fail with Unavailable. It is idempotent, and returns once no timer of the twin runs.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		close(t.closed)
		for _, p := range t.partitions {
			p.stop()
		}
		t.timers.Wait()
	})
	return nil
}

// Closed reports whether Close was called.
func (t *Transport) Closed() bool {
	select {
	case <-t.closed:
		return true
	default:
		return false
	}
}

// Command implements client.Transport: the partition's engine takes the request, as the
// partition grain's does. A batch is applied and answered with its receipt; a single Receive
// with wait_micros > 0 is answered without applying: visible once a message of the queue is
// visible, not visible when the wait ends. A waiting call whose context ends returns its
// error; the engine keeps its receive parked until its wait ends, as a partition does.
func (t *Transport) Command(ctx context.Context, p int, req *orreryv1.CommandRequest) (*orreryv1.CommandReply, error) {
	call := t.begin(CallCommand, p, req)
	if err := t.usable(ctx, p); err != nil {
		return nil, t.end(call, FaultNone, nil, err)
	}
	fault, faultErr := t.nextFault(p, req)
	if fault == FaultFailBeforeApply {
		return nil, t.end(call, fault, nil, faultErr)
	}
	reply, err := t.partitions[p].command(ctx, t.closed, req)
	if err != nil {
		return nil, t.end(call, FaultNone, nil, err)
	}
	if fault == FaultLoseReply {
		return nil, t.end(call, fault, reply, faultErr)
	}
	return reply, t.end(call, FaultNone, reply, nil)
}

// Inspect implements client.Transport: the partition's engine answers (engine.Inspect), and a
// partition status gets what a partition grain adds to it: the silo (Silo) and the command
// limits of the partition.
func (t *Transport) Inspect(ctx context.Context, p int, req *orreryv1.InspectRequest) (*orreryv1.InspectReply, error) {
	call := t.begin(CallInspect, p, nil)
	if err := t.usable(ctx, p); err != nil {
		return nil, t.end(call, FaultNone, nil, err)
	}
	if fault, err := t.nextFault(p, nil); fault != FaultNone {
		return nil, t.end(call, fault, nil, err)
	}
	reply := t.partitions[p].inspect(req)
	return reply, t.end(call, FaultNone, nil, nil)
}

// View runs fn on partition p's store between two of its engine's steps, for white-box checks.
func (t *Transport) View(p int, fn func(kv.Reader)) {
	part := t.partitions[p]
	part.mu.Lock()
	defer part.mu.Unlock()
	fn(part.store)
}

// usable fails a call on a closed twin, a bad partition or an ended context.
func (t *Transport) usable(ctx context.Context, p int) error {
	if t.Closed() {
		return errClosed()
	}
	if p < 0 || p >= len(t.partitions) {
		return orrery.Invalid("partition", "must be between 0 and %d, got %d", len(t.partitions)-1, p)
	}
	return ctx.Err()
}

// errClosed is the error of a call on a closed twin.
func errClosed() error {
	return orrery.Errorf(orrery.CodeUnavailable, "clienttest: transport closed")
}
