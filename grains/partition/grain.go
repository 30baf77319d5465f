package partition

import (
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/actors"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/persistence"
	"github.com/orreryhq/orrery/replication"
)

// NewKind returns the cluster kind whose activations are partition grains.
func NewKind(cfg Config) *cluster.Kind {
	return cluster.NewKind(Kind, Props(cfg, -1))
}

// Props returns the props of a partition grain. A partition number ≥ 0 fixes it (tests that
// spawn the grain without a cluster); -1 takes it from the cluster identity.
func Props(cfg Config, partition int) *actor.Props {
	cfg = cfg.withDefaults()
	return actor.PropsFromProducer(func() actor.Actor {
		return &grain{cfg: cfg, partition: partition}
	}, actor.WithDispatcher(actors.Shared.Dispatcher(mailboxThroughput)))
}

// mailboxThroughput is how many messages a partition's mailbox processes per turn on the
// shared goroutine pool (protoactor's default).
const mailboxThroughput = 300

// maxVisibilityFloors bounds the queues whose visibility floors a partition remembers.
const maxVisibilityFloors = 4096

// Internal messages, sent by the grain to itself.
type (
	wakeWaiter    struct{}
	housekeepTick struct{}
	// confirmedRead is an inspection read whose leadership check has ended (err nil: answer
	// it from the state).
	confirmedRead struct {
		req    *orreryv1.InspectRequest
		sender *actor.PID
		err    error
	}
)

// pending is a command proposed and waiting for its entry to apply (or, with a deadline, a
// parked long-poll receive).
type pending struct {
	req      *orreryv1.CommandRequest
	sender   *actor.PID
	deadline time.Time // set for a parked long-poll receive
	// onReply, set for the grain's own commands, receives the reply instead of a sender.
	onReply func(*orreryv1.CommandReply)
	// proposal is where its entry went in the partition's log.
	proposal replication.Proposal
}

// grain is one activation of partition/<n>.
type grain struct {
	cfg       Config
	partition int
	// silo is the id of the actor system hosting the activation (the silo's member id), which
	// status replies name.
	silo    string
	applier batch.Applier
	log     *slog.Logger

	// state is the partition's state on this silo's replica, set while attached to it.
	state   *persistence.PartitionState
	openErr error
	// inflight are the proposed commands by their entries' indexes.
	inflight  map[uint64]*pending
	waiters   []*pending
	waitTimer clock.Timer
	stopping  bool

	// dueFloor is an instant no due-index entry is earlier than (0: unknown, scan from the
	// start). Scans start there: the index behaves like a queue, and an LSM iterator starting
	// at its front would step over every entry deleted since the last compaction.
	dueFloor int64
	// dueTold is the latest instant the due coordinator is known to wake at or before, from
	// the last next-due notice or due scan (input.MaxInstantMicros: nothing it knows of; 0:
	// unknown). An apply that writes an earlier due entry sends a notice; later entries need
	// none, because the coordinator wakes by then, scans, and learns them.
	dueTold int64
	// head is the front of the due index in memory (see due.Head), as of the last applied
	// entries the actor has handled: due scans it covers need no store transaction.
	head *due.Head

	// readFloors replicates the state machine's visibility floors for the actor's own reads
	// of the visibility indexes (a parked receive's check, its wake timer), which would
	// otherwise step over every leased and acked entry since the last compaction. It is as of
	// the last applied entries the actor has handled; a read meanwhile may miss a message
	// written below a floor by a later entry, and that entry's handling wakes the waiters again.
	readFloors *kv.Floors

	housekeepTimer clock.Timer
	housekeeping   bool // a Housekeep command is in flight
}

// Receive implements actor.Actor.
func (g *grain) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		g.silo = ctx.ActorSystem().ID
		g.cfg.Registry.add(ctx.Self())
		if g.partition >= 0 {
			g.open(ctx)
		}
	case *cluster.ClusterInit:
		n, err := strconv.Atoi(msg.Identity.GetIdentity())
		if partitions := g.partitions(); err != nil || n < 0 || n >= partitions {
			g.openErr = orrery.Errorf(orrery.CodeInternal, "partition identity %q is not in [0, %d)", msg.Identity.GetIdentity(), partitions)
			return
		}
		g.partition = n
		g.open(ctx)
	case *orreryv1.CommandRequest:
		g.admit(ctx, msg)
	case *entriesApplied:
		g.applied(ctx, msg)
	case *proposalsLost:
		g.lost(ctx, msg)
	case *hostFailed:
		g.hostFailed(ctx, msg.err)
	case *stateReplaced:
		g.reload(ctx, msg)
	case *wakeWaiter:
		g.wakeWaiters(ctx)
	case *housekeepTick:
		g.housekeep(ctx)
	case *orreryv1.ScanDueRequest:
		ctx.Respond(g.scanDue(msg))
	case *orreryv1.InspectRequest:
		g.readConfirmed(ctx, msg)
	case *confirmedRead:
		g.answerRead(ctx, msg)
	case *actor.Stopping:
		g.stop(ctx)
	case *actor.Stopped:
		g.cfg.Registry.remove(ctx.Self())
	}
}

// open attaches the activation to the partition's state machine on this silo.
func (g *grain) open(ctx actor.Context) {
	if g.state != nil || g.stopping {
		return
	}
	g.log = g.cfg.Logger.With("partition", g.partition)
	if g.cfg.Host == nil {
		g.openErr = orrery.Errorf(orrery.CodeUnavailable, "partition %d: no replicas on this silo", g.partition)
		return
	}
	g.applier = g.cfg.Host.machines[g.partition].applier
	self, root := ctx.Self(), ctx.ActorSystem().Root
	state, err := g.cfg.Host.attach(g.partition, g, func(msg any) { root.Send(self, msg) })
	if err != nil {
		g.openErr = err
		g.log.Error("partition cannot open", "err", err)
		return
	}
	g.state, g.openErr = state, nil
	g.inflight = map[uint64]*pending{}
	g.readFloors = kv.NewFloors(keys.VisibilityQueuePrefix, maxVisibilityFloors)
	g.head = due.NewHead(dueHeadEntries)
	g.scheduleHousekeeping(ctx, g.cfg.HousekeepEvery)
	mark := state.Applied()
	g.log.Info("partition open", "term", g.term(), "logged_time", mark.LoggedTimeMicros, "applied_index", mark.Index)
	g.reportNextDue()
}

// reload takes a state the replica replaced with a snapshot's: the due head, due floor and
// visibility floors described the old state, so they are dropped and read again as on
// activation (the coordinator is told the new next due instant), and parked receives look at
// the new state.
func (g *grain) reload(ctx actor.Context, msg *stateReplaced) {
	if g.state == nil {
		return
	}
	g.log.Info("partition state replaced by a snapshot", "applied_index", msg.mark.Index, "logged_time", msg.mark.LoggedTimeMicros)
	g.head.Reset()
	g.readFloors = kv.NewFloors(keys.VisibilityQueuePrefix, maxVisibilityFloors)
	g.dueFloor = 0
	g.reportNextDue()
	g.wakeWaiters(ctx)
}

// partitions is the cluster's partition count (0 without a host).
func (g *grain) partitions() int {
	if g.cfg.Host == nil {
		return 0
	}
	return g.cfg.Host.cfg.Partitions
}

// term is the partition's Raft term as this silo's replica knows it.
func (g *grain) term() uint64 { return g.cfg.Host.term(g.partition) }

// unavailable is the error a request gets while the grain is not attached.
func (g *grain) unavailable() *orrery.Error {
	if g.openErr != nil {
		return orrery.Wrap(orrery.CodeUnavailable, g.openErr, "partition %d is not open", g.partition)
	}
	return orrery.Errorf(orrery.CodeUnavailable, "partition %d is not open", g.partition)
}

// admit proposes a command (or parks a long-poll receive), answering Unavailable at once when
// the grain is not attached or the pending bound is reached.
func (g *grain) admit(ctx actor.Context, req *orreryv1.CommandRequest) {
	if g.state == nil {
		ctx.Respond(&orreryv1.CommandReply{Error: g.unavailable().Proto()})
		return
	}
	if g.queued() >= g.cfg.MaxPending {
		ctx.Respond(&orreryv1.CommandReply{Error: orrery.Errorf(orrery.CodeUnavailable,
			"partition %d has %d commands pending, the limit is %d", g.partition, g.queued(), g.cfg.MaxPending).Proto()})
		return
	}
	if err := checkDue(req); err != nil {
		ctx.Respond(errorReply(err))
		return
	}
	p := &pending{req: req, sender: ctx.Sender()}
	if g.park(ctx, p) {
		return
	}
	g.propose(ctx, p)
}

// checkDue refuses a due command (CommandRequest.due) that is not a due coordinator's: one
// from a principal outside Orrery's own (system:...) or one that asks to wait.
func checkDue(req *orreryv1.CommandRequest) error {
	if !req.GetDue() {
		return nil
	}
	if !strings.HasPrefix(req.GetPrincipal(), input.SystemPrincipalPrefix) {
		return orrery.Invalid("due", "is for Orrery's due coordinators (principals %s...), not for %q", input.SystemPrincipalPrefix, req.GetPrincipal())
	}
	if req.GetWaitMicros() != 0 {
		return orrery.Invalid("wait_micros", "must be 0 in a due command")
	}
	return nil
}

// queued counts the commands waiting: in flight and parked.
func (g *grain) queued() int { return len(g.inflight) + len(g.waiters) }

// reply sends a reply to a pending command's sender.
func (g *grain) reply(ctx actor.Context, p *pending, r *orreryv1.CommandReply) {
	if g.state != nil {
		r.ActivationEpoch = g.term()
	}
	if p.onReply != nil {
		p.onReply(r)
		return
	}
	if p.sender != nil {
		ctx.Send(p.sender, r)
	}
}

// stop detaches from the state machine and answers what is in flight and parked: commands in
// flight Unavailable (their entries may still apply; callers retry with the same command
// ids and get the receipt), parked receives not visible.
func (g *grain) stop(ctx actor.Context) {
	g.stopping = true
	for _, t := range []clock.Timer{g.waitTimer, g.housekeepTimer} {
		if t != nil {
			t.Stop()
		}
	}
	if g.state == nil {
		return
	}
	g.cfg.Host.detach(g.partition, g)
	unavailable := orrery.Errorf(orrery.CodeUnavailable, "partition %d stopped before its command applied; retry it with the same command id", g.partition).Proto()
	for _, p := range g.inflight {
		g.reply(ctx, p, &orreryv1.CommandReply{Error: unavailable})
	}
	for _, p := range g.waiters {
		g.reply(ctx, p, &orreryv1.CommandReply{})
	}
	g.inflight, g.waiters = nil, nil
	g.state = nil
}

func errorReply(err error) *orreryv1.CommandReply {
	return &orreryv1.CommandReply{Error: orrery.AsError(err).Proto()}
}
