// Package clienttest owns the in-memory twin of client.Transport: P partitions, each a
// kv.Memory applying commands with batch.Applier at a strictly increasing logged time from an
// injectable clock, answering inspections and lists, emulating the long-poll receive, and injecting
// faults (failures before apply, lost replies) so tests of the client, the worker and their
// users can exercise retries without a cluster.
package clienttest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/route"
)

// Transport is the in-memory twin of the cluster transport. It is safe for concurrent use;
// each partition applies one command at a time, as the partition grain does.
type Transport struct {
	applier    batch.Applier
	grants     []*orreryv1.PutGrant
	clock      func() time.Time
	maxWait    time.Duration
	partitions []*partition
	closed     chan struct{}
	closeOnce  sync.Once

	mu       sync.Mutex // guards what follows
	failNext int
	loseNext int
	hook     FaultHook
	calls    []*Call
}

var _ client.Transport = (*Transport)(nil)

// Option configures a Transport.
type Option func(*Transport)

// WithClock sets the clock logged time is taken from (default time.Now). Each partition
// stamps max(clock, its last logged time + 1 µs), so logged time strictly increases whatever
// the clock does. Long-poll waits still run on real time.
func WithClock(now func() time.Time) Option { return func(t *Transport) { t.clock = now } }

// WithLimits sets the limits commands are applied under (default input.DefaultLimits()).
func WithLimits(lim input.Limits) Option {
	return func(t *Transport) { t.applier = batch.Applier{Limits: lim} }
}

// WithGrants sets the grants every partition starts with (default: every capability on every
// namespace for client.DefaultPrincipal, as a development silo gives it).
func WithGrants(puts ...*orreryv1.PutGrant) Option { return func(t *Transport) { t.grants = puts } }

// WithMaxWait bounds a long-poll wait, as a partition does (default 60 s).
func WithMaxWait(d time.Duration) Option { return func(t *Transport) { t.maxWait = d } }

// New returns a twin with the given number of partitions (at least 1).
func New(partitions int, opts ...Option) *Transport {
	if partitions < 1 {
		panic(fmt.Sprintf("clienttest: %d partitions", partitions))
	}
	t := &Transport{
		applier: batch.Applier{Limits: input.DefaultLimits()},
		clock:   time.Now,
		maxWait: 60 * time.Second,
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
		t.partitions = append(t.partitions, &partition{index: i, store: store, changed: make(chan struct{})})
	}
	return t
}

// Partitions implements client.Transport.
func (t *Transport) Partitions() int { return len(t.partitions) }

// Close makes every waiting and later call fail with Unavailable. It is idempotent.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() { close(t.closed) })
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

// Command implements client.Transport: it applies the batch on the partition, or, for a single
// Receive with wait_micros > 0, answers as a partition does without applying: visible once a
// message of the queue is visible, not visible when the wait ends.
func (t *Transport) Command(ctx context.Context, p int, req *orreryv1.CommandRequest) (*orreryv1.CommandReply, error) {
	call := t.begin(CallCommand, p, req)
	if err := t.usable(ctx, p); err != nil {
		return nil, t.end(call, FaultNone, nil, err)
	}
	fault, faultErr := t.nextFault(p, req)
	if fault == FaultFailBeforeApply {
		return nil, t.end(call, fault, nil, faultErr)
	}
	reply, err := t.command(ctx, t.partitions[p], req)
	if err != nil {
		return nil, t.end(call, FaultNone, nil, err)
	}
	if fault == FaultLoseReply {
		return nil, t.end(call, fault, reply, faultErr)
	}
	return reply, t.end(call, FaultNone, reply, nil)
}

// Inspect implements client.Transport.
func (t *Transport) Inspect(ctx context.Context, p int, req *orreryv1.InspectRequest) (*orreryv1.InspectReply, error) {
	call := t.begin(CallInspect, p, nil)
	if err := t.usable(ctx, p); err != nil {
		return nil, t.end(call, FaultNone, nil, err)
	}
	if fault, err := t.nextFault(p, nil); fault != FaultNone {
		return nil, t.end(call, fault, nil, err)
	}
	reply := t.partitions[p].inspect(req, len(t.partitions), t.clock().UnixMicro())
	return reply, t.end(call, FaultNone, nil, nil)
}

// View runs fn on partition p's store under the partition's lock, for white-box checks.
func (t *Transport) View(p int, fn func(kv.Reader)) {
	part := t.partitions[p]
	part.mu.Lock()
	defer part.mu.Unlock()
	fn(part.store)
}

// usable fails a call on a closed twin, a bad partition or an ended context.
func (t *Transport) usable(ctx context.Context, p int) error {
	if t.Closed() {
		return orrery.Errorf(orrery.CodeUnavailable, "clienttest: transport closed")
	}
	if p < 0 || p >= len(t.partitions) {
		return orrery.Invalid("partition", "must be between 0 and %d, got %d", len(t.partitions)-1, p)
	}
	return ctx.Err()
}

// misrouted returns a Validation error for the first mutation whose lane belongs to another
// partition, or nil.
func misrouted(b *orreryv1.Batch, p, partitions int) *orreryv1.Error {
	for i, m := range b.GetMutations() {
		if lane := client.MutationLane(m); lane != nil {
			if got := route.Partition(lane, partitions); got != p {
				return orrery.Invalid(fmt.Sprintf("batch.mutations[%d].lane", i), "belongs to partition %d, not %d", got, p).Proto()
			}
		}
	}
	return nil
}
