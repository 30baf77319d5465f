package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	protocluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/actors"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

// PartitionKind is the cluster kind of partition grains (partition.Kind).
const PartitionKind = "partition"

// PartitionTransport reaches partition grains partition/<n> through a cluster (a silo's own
// or a client's). Each call is one attempt: the caller owns retries (the client retries with
// the same command id and backoff; the due coordinator retries once). An unreachable
// partition, or a reply carrying an Unavailable error, comes back as an Unavailable error.
//
// Not-leader answers. An Unavailable from a partition makes the transport forget the cached
// PID of partition/<n>, so the next attempt resolves it again through the identity lookup.
// When the error names the silo the answering replica believes leads (orrery.LeaderSiloOf),
// the transport hands that hint to the identity lookup (its Hint method, as cluster/lookup's
// Lookup has) and makes a new attempt at once, within the call's deadline, up to
// maxLeaderHops times; the last error is returned when the hints run out.
//
// A client's principals. Over a cluster client (NewClient), the transport refuses a request
// whose principal is one of Orrery's own (system:...), Unauthorized, before sending it: those
// are the silos' alone. With mutual TLS the silo overwrites every client request's principal
// with its certificate's anyway (transportauth); without it, this keeps a client from naming
// itself a system principal by mistake. It is no authentication: without TLS no peer is.
//
// A member leaving the topology ends every call in flight with Unavailable at once: a request
// to a silo that is gone is never answered, and a long-poll receive would otherwise hold its
// caller until its attempt timeout, long after the silo came back under a new member id.
type PartitionTransport struct {
	cluster    *protocluster.Cluster
	partitions int
	attempt    time.Duration
	left       *leaveWatch
	// client is set when the cluster is a client's (NewClient).
	client bool
	// pool runs the calls' attempts, keeping their goroutines' grown stacks.
	pool *actors.Pool
}

// NewPartitionTransport returns a transport over c for a cluster of the given partition count.
// attemptTimeout bounds one attempt (0: actors.DefaultAttemptTimeout). Close releases its
// subscription to c's topology events.
func NewPartitionTransport(c *protocluster.Cluster, partitions int, attemptTimeout time.Duration) *PartitionTransport {
	provider, _ := c.Config.ClusterProvider.(*Provider)
	return &PartitionTransport{cluster: c, partitions: partitions, attempt: attemptTimeout, left: watchLeaves(c),
		client: provider != nil && provider.isClient(), pool: actors.NewPool(actors.DefaultPoolIdle)}
}

// Close stops watching the topology and closes the transport's goroutine pool; calls after it
// still work but are no longer ended early when a member leaves.
func (t *PartitionTransport) Close() error {
	t.left.stop()
	t.pool.Close()
	return nil
}

// Partitions returns the cluster's partition count.
func (t *PartitionTransport) Partitions() int { return t.partitions }

// Command submits a command to partition n.
func (t *PartitionTransport) Command(ctx context.Context, n int, req *orreryv1.CommandRequest) (*orreryv1.CommandReply, error) {
	if err := t.checkPrincipal(req.GetPrincipal()); err != nil {
		return nil, err
	}
	opts := replyOptions(t, (*orreryv1.CommandReply).GetError)
	if wait := time.Duration(req.GetWaitMicros()) * time.Microsecond; wait > 0 {
		// A long-poll attempt lasts the wait plus an ordinary attempt; without a deadline of its
		// own, the call gets room for a few such attempts instead of actors' 10 s default.
		opts.AttemptTimeout = wait + actors.DefaultAttemptTimeout
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, 2*opts.AttemptTimeout+actors.DefaultCallTimeout)
			defer cancel()
		}
	}
	return call[*orreryv1.CommandReply](ctx, t, n, req, opts)
}

// ScanDue asks partition n for a bounded due scan.
func (t *PartitionTransport) ScanDue(ctx context.Context, n int, req *orreryv1.ScanDueRequest) (*orreryv1.ScanDueReply, error) {
	return call[*orreryv1.ScanDueReply](ctx, t, n, req, replyOptions(t, (*orreryv1.ScanDueReply).GetError))
}

// Inspect reads from partition n.
func (t *PartitionTransport) Inspect(ctx context.Context, n int, req *orreryv1.InspectRequest) (*orreryv1.InspectReply, error) {
	if err := t.checkPrincipal(req.GetPrincipal()); err != nil {
		return nil, err
	}
	return call[*orreryv1.InspectReply](ctx, t, n, req, replyOptions(t, (*orreryv1.InspectReply).GetError))
}

// checkPrincipal refuses one of Orrery's own principals on a client's transport.
func (t *PartitionTransport) checkPrincipal(principal string) error {
	if !t.client {
		return nil
	}
	return input.RefuseSystem(principal, "a client")
}

// replyOptions retries replies of type T whose error (replyErr) is retriable (the partition is
// opening or overloaded), and a reply of another type: a stray reply, meant for another
// request (protoactor names a request's future by a per-process sequence, so a reply to a
// request of a member this silo was before it rejoined under a new id can reach a request of
// the new one), which is Unavailable: the real answer will not come.
func replyOptions[T proto.Message](t *PartitionTransport, replyErr func(T) *orreryv1.Error) actors.CallOptions {
	return actors.CallOptions{
		AttemptTimeout: t.attempt,
		MaxAttempts:    1,
		Pool:           t.pool,
		RetryReply: func(m proto.Message) error {
			r, ok := m.(T)
			if !ok {
				var want T
				return orrery.Errorf(orrery.CodeUnavailable, "a reply of type %T reached a call that waits for %T: a stray reply meant for another request", m, want)
			}
			if err := orrery.FromProto(replyErr(r)); err != nil && orrery.Retriable(orrery.CodeOf(err)) {
				return err
			}
			return nil
		},
	}
}

func call[T proto.Message](ctx context.Context, t *PartitionTransport, n int, req proto.Message, opts actors.CallOptions) (T, error) {
	var zero T
	if n < 0 || n >= t.partitions {
		return zero, orrery.Invalid("partition", "must be in [0, %d), got %d", t.partitions, n)
	}
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	churn := t.left.current()
	stop := context.AfterFunc(churn, func() { cancel(context.Cause(churn)) })
	defer stop()
	identity := strconv.Itoa(n)
	var reply proto.Message
	var err error
	for hop := 0; ; hop++ {
		reply, err = actors.Call(callCtx, t.cluster, identity, PartitionKind, req, opts)
		if err == nil {
			break
		}
		if cause := context.Cause(callCtx); ctx.Err() == nil && (errors.Is(cause, errMemberLeft) || errors.Is(cause, errConnectionLost)) {
			t.cluster.PidCache.Remove(identity, PartitionKind)
			return zero, orrery.Wrap(orrery.CodeUnavailable, cause, "call partition/%d", n)
		}
		if !t.redirect(n, identity, err) || hop >= maxLeaderHops || callCtx.Err() != nil {
			return zero, err
		}
	}
	typed, ok := reply.(T)
	if !ok {
		return zero, orrery.Errorf(orrery.CodeInternal, "partition %d answered %T to %T", n, reply, req)
	}
	return typed, nil
}

// maxLeaderHops bounds the attempts one call makes at once on the leaders not-leader answers
// name.
const maxLeaderHops = 3

// leaderHints is what the transport needs of an identity lookup that places partition grains
// on their leaders (cluster/lookup.Lookup).
type leaderHints interface {
	Hint(n int, silo uint64)
}

// redirect handles a failed attempt on partition n: after an Unavailable it forgets the cached
// PID, and when the error names a leader it hands the hint to the identity lookup and reports
// that the call should try again at once.
func (t *PartitionTransport) redirect(n int, identity string, err error) bool {
	if !errors.Is(err, orrery.ErrUnavailable) {
		return false
	}
	t.cluster.PidCache.Remove(identity, PartitionKind)
	leader := orrery.LeaderSiloOf(err)
	if leader == 0 {
		return false
	}
	hints, ok := t.cluster.IdentityLookup.(leaderHints)
	if ok {
		hints.Hint(n, leader)
	}
	return ok
}

// String describes the transport for logs.
func (t *PartitionTransport) String() string {
	return fmt.Sprintf("partition transport (%d partitions)", t.partitions)
}

// errMemberLeft ends the calls in flight when a member leaves the topology.
var errMemberLeft = errors.New("a member left the cluster while the call was in flight")

// errConnectionLost ends the calls in flight when the actor transport loses its connection to
// a member of the topology (remote.EndpointTerminatedEvent: the member's process died, or the
// network cut the connection; a client's connection to a silo, which the silo answers on, does
// not count): a reply cannot come on it, and the member may stay in the topology for seconds
// more (memberlist's suspicion, then the dead-peer grace), during which a long-poll receive
// would otherwise wait out its whole wait.
var errConnectionLost = errors.New("the connection to a member was lost while the call was in flight")

// leaveWatch hands out a context that is cancelled, with errMemberLeft or errConnectionLost as
// its cause, the next time a member leaves c's topology or the actor transport loses its
// connection to one, and a fresh one after that. Every call in flight ends then, whichever
// member it waited on: the caller retries, and the calls to members still there are answered
// on the retry.
type leaveWatch struct {
	system *actor.ActorSystem
	sub    *eventstream.Subscription

	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelCauseFunc
	// member reports whether an actor address is a member's of the topology (with a provider
	// other than Provider's, every address counts).
	member func(address string) bool
}

func watchLeaves(c *protocluster.Cluster) *leaveWatch {
	w := &leaveWatch{system: c.ActorSystem, member: func(string) bool { return true }}
	if p, ok := c.Config.ClusterProvider.(*Provider); ok {
		w.member = func(address string) bool {
			return slices.ContainsFunc(p.Topology(), func(m *protocluster.Member) bool { return m.Address() == address })
		}
	}
	w.ctx, w.cancel = context.WithCancelCause(context.Background())
	w.sub = c.ActorSystem.EventStream.Subscribe(func(evt any) {
		w.mu.Lock()
		defer w.mu.Unlock()
		var cause error
		switch e := evt.(type) {
		case *protocluster.ClusterTopology:
			if len(e.GetLeft()) > 0 {
				cause = errMemberLeft
			}
		case *remote.EndpointTerminatedEvent:
			if w.member(e.Address) { // not a client's connection, which a silo answers on
				cause = errConnectionLost
			}
		}
		if cause == nil {
			return
		}
		w.cancel(cause)
		w.ctx, w.cancel = context.WithCancelCause(context.Background())
	})
	return w
}

// current is cancelled at the next leave or lost connection.
func (w *leaveWatch) current() context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ctx
}

func (w *leaveWatch) stop() {
	w.system.EventStream.Unsubscribe(w.sub)
}
