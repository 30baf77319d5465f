package partition

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/actors"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/duebackoff"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/persistence"
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

// openWarnEvery is the least time between two WARN records of one activation's failed opens;
// the attempts between log at DEBUG.
const openWarnEvery = 10 * time.Second

// maxVisibilityFloors bounds the queues whose visibility floors a partition remembers.
const maxVisibilityFloors = 4096

// Internal messages, sent by the grain to itself.
type (
	retryOpen     struct{}
	wakeWaiter    struct{}
	syncDue       struct{} // a paced sync may start
	applyDue      struct{} // a paced group may start
	housekeepTick struct{}
	// groupApplied reports an applied group (or its failure) from the apply goroutine.
	groupApplied struct {
		group   []*pending
		replies []*orreryv1.CommandReply
		err     error
		// minDueWritten is the earliest due-index entry the commit wrote (0: none).
		minDueWritten int64
		// dueWrites are the due-index writes the commit made, in order.
		dueWrites []dueWrite
		// floors are the visibility floors the commit promoted, in order.
		floors []kv.Promoted
	}
	// groupsSynced reports a finished sync from the sync goroutine: the first covered
	// unsynced groups are durable, unless err.
	groupsSynced struct {
		covered int
		err     error
	}
)

// pending is a command waiting for a commit (or, with a deadline, for a visible message).
type pending struct {
	req      *orreryv1.CommandRequest
	sender   *actor.PID
	bytes    int
	deadline time.Time // set for a parked long-poll receive
	// onReply, set for the grain's own commands, receives the reply instead of a sender.
	onReply func(*orreryv1.CommandReply)
	// own, set for the grain's own due batch (see ownDue), holds the refs of its mutations in
	// order; ownReceipt is its receipt once applied (not stored: nobody replays it).
	own        []*orreryv1.DueRef
	ownReceipt *orreryv1.Receipt
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

	store     *persistence.Store
	openErr   error
	openDelay time.Duration
	openTimer *time.Timer
	// openWarned is when a failed open last logged at WARN (see openWarnEvery).
	openWarned time.Time
	// applyRunner and syncRunner run the activation's applies and syncs (see runner).
	applyRunner, syncRunner runner
	// applying is set while a group applies; applyDone is closed when it has.
	applying  bool
	applyDone chan struct{}
	// unsynced are the applied groups waiting for a sync, in order; syncing is set while a
	// sync runs, and syncDone is closed when it has.
	unsynced []*groupApplied
	syncing  bool
	syncDone chan struct{}
	// syncTimer is set while a paced sync waits (see SyncPacer); lastSyncStart is when the
	// last sync began.
	syncTimer     *time.Timer
	lastSyncStart time.Time
	// applyTimer is set while a paced group start waits (Config.BusyApplyGap);
	// lastApplyStart is when the last group began.
	applyTimer     *time.Timer
	lastApplyStart time.Time
	pending        []*pending
	waiters        []*pending
	waitTimer      *time.Timer
	stopping       bool

	// dueFloor is an instant no due-index entry is earlier than (0: unknown, scan from the
	// start). Scans start there: the index behaves like a queue, and an LSM iterator starting
	// at its front would step over every entry deleted since the last compaction.
	dueFloor int64
	// dueTold is the latest instant the due coordinator is known to wake at or before, from
	// the last next-due notice or due scan (input.MaxInstantMicros: nothing it knows of; 0:
	// unknown). A commit that writes an earlier due entry sends a notice; later entries need
	// none, because the coordinator wakes by then, scans, and learns them.
	dueTold int64
	// head is the front of the due index in memory (see due.Head), as of the last commit
	// this actor finished: due scans it covers need no store transaction, which would first
	// wait for the commit in flight.
	head *due.Head
	// dueTimer wakes the grain at its due head's next instant when it emits its own due refs
	// (Config.OwnEmission) and no group is applying; ownSeq numbers its own due batches, and
	// ownSkips holds refs on backoff after a lasting failure, until when.
	dueTimer *time.Timer
	ownSeq   uint64
	ownSkips duebackoff.Backoff
	ownRefs  int // bound of the next own due batch's refs (0: ownDueRefs)

	// warm is what committed groups read and wrote, for the next groups' reads (see
	// kv.Warm): Badger's Get looks through every level even for a key in its memtable, so
	// the schedule and lane-counter reads every occurrence makes are served from here. Only
	// the commit goroutine touches it, one commit at a time; it lives as long as the store.
	warm *kv.Warm
	// floors are where the queues' visibility indexes begin (see kv.Floors): a receive scans
	// from there instead of stepping over every entry leased or acked since the last
	// compaction. Only the commit goroutine touches them, like warm.
	floors *kv.Floors
	// readFloors replicates floors for the actor's own reads of the visibility indexes (a
	// parked receive's check, its wake timer), which would otherwise step over every leased
	// and acked entry since the last compaction. It is as of the last applied group the actor
	// has handled; a read meanwhile may miss a message written below a floor by a later group,
	// and that group's handling wakes the waiters again.
	readFloors *kv.Floors

	housekeepTimer *time.Timer
	housekeeping   bool // a Housekeep command is pending or in flight
	housekeepSeq   uint64
	lastGC         time.Time
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
		if err != nil || n < 0 || n >= g.cfg.Partitions {
			g.openErr = orrery.Errorf(orrery.CodeInternal, "partition identity %q is not in [0, %d)", msg.Identity.GetIdentity(), g.cfg.Partitions)
			return
		}
		g.partition = n
		g.open(ctx)
	case *retryOpen:
		g.open(ctx)
	case *orreryv1.CommandRequest:
		g.admit(ctx, msg)
	case *groupApplied:
		g.finishApply(ctx, msg)
	case *groupsSynced:
		g.finishSync(ctx, msg)
	case *wakeWaiter:
		g.wakeWaiters(ctx)
	case *syncDue:
		g.syncTimer = nil
		g.startSync(ctx)
	case *applyDue:
		g.applyTimer = nil
		g.startCommit(ctx)
	case *housekeepTick:
		g.housekeep(ctx)
	case *dueTick:
		g.dueTimer = nil
		g.startCommit(ctx)
	case *orreryv1.ScanDueRequest:
		ctx.Respond(g.scanDue(msg))
	case *orreryv1.InspectRequest:
		ctx.Respond(g.inspect(msg))
	case *actor.Stopping:
		g.stop(ctx)
	case *actor.Stopped:
		g.cfg.Registry.remove(ctx.Self())
	}
}

// open opens the store, or schedules a retry with backoff when another activation holds it.
func (g *grain) open(ctx actor.Context) {
	if g.store != nil || g.stopping {
		return
	}
	g.log = g.cfg.Logger.With("partition", g.partition)
	g.applier = batch.Applier{Limits: g.cfg.Limits, Partitions: g.cfg.Partitions, Partition: g.partition}
	if err := persistence.EnsureClusterMeta(g.cfg.DataRoot, g.cfg.Partitions); err != nil {
		g.openErr = err
		g.log.Error("partition cannot open: cluster metadata", "err", err)
		return
	}
	storeOpts := g.cfg.Store
	storeOpts.FlushStagger = g.partition
	store, err := persistence.Open(persistence.PartitionDir(g.cfg.DataRoot, g.partition), storeOpts)
	if err != nil {
		g.openErr = err
		g.openDelay = min(max(2*g.openDelay, 50*time.Millisecond), g.cfg.OpenRetryMax)
		level := slog.LevelDebug
		if now := time.Now(); now.Sub(g.openWarned) >= openWarnEvery {
			level, g.openWarned = slog.LevelWarn, now
		}
		g.log.Log(context.Background(), level, "partition store not available; retrying", "err", err, "retry_in", g.openDelay)
		self, root := ctx.Self(), ctx.ActorSystem().Root
		g.openTimer = time.AfterFunc(g.openDelay, func() { root.Send(self, &retryOpen{}) })
		return
	}
	g.store, g.openErr, g.openDelay = store, nil, 0
	g.applyRunner, g.syncRunner = startRunner(), startRunner()
	g.warm = kv.NewWarm(g.cfg.WarmCacheBytes)
	g.floors = kv.NewFloors(keys.VisibilityQueuePrefix, maxVisibilityFloors)
	g.readFloors = kv.NewFloors(keys.VisibilityQueuePrefix, maxVisibilityFloors)
	g.head = due.NewHead(dueHeadEntries)
	g.lastGC = g.cfg.Now()
	g.scheduleHousekeeping(ctx, g.cfg.HousekeepEvery)
	g.log.Info("partition open", "epoch", store.Epoch(), "logged_time", store.LoggedTime(), "applied_index", store.AppliedIndex())
	g.reportNextDue()
	g.startCommit(ctx)
}

// unavailable is the error a request gets while the store is not open.
func (g *grain) unavailable() *orrery.Error {
	if g.openErr != nil {
		return orrery.Wrap(orrery.CodeUnavailable, g.openErr, "partition %d is not open", g.partition)
	}
	return orrery.Errorf(orrery.CodeUnavailable, "partition %d is not open", g.partition)
}

// admit queues a command (or parks a long-poll receive), answering Unavailable at once when
// the store is not open or the pending bound is reached.
func (g *grain) admit(ctx actor.Context, req *orreryv1.CommandRequest) {
	if g.store == nil {
		ctx.Respond(&orreryv1.CommandReply{Error: g.unavailable().Proto()})
		return
	}
	if g.queued() >= g.cfg.MaxPending {
		ctx.Respond(&orreryv1.CommandReply{Error: orrery.Errorf(orrery.CodeUnavailable,
			"partition %d has %d commands pending, the limit is %d", g.partition, g.queued(), g.cfg.MaxPending).Proto()})
		return
	}
	p := &pending{req: req, sender: ctx.Sender(), bytes: proto.Size(req)}
	if g.park(ctx, p) {
		return
	}
	g.pending = append(g.pending, p)
	g.startCommit(ctx)
}

// queued counts the commands waiting: pending and parked.
func (g *grain) queued() int { return len(g.pending) + len(g.waiters) }

// reply sends a reply to a pending command's sender.
func (g *grain) reply(ctx actor.Context, p *pending, r *orreryv1.CommandReply) {
	if g.store != nil {
		r.ActivationEpoch = g.store.Epoch()
	}
	if p.onReply != nil {
		p.onReply(r)
		return
	}
	if p.sender != nil {
		ctx.Send(p.sender, r)
	}
}

// stop waits for the group applying and the sync running, makes the groups applied since
// durable and answers them, and closes the store.
func (g *grain) stop(ctx actor.Context) {
	g.stopping = true
	if g.openTimer != nil {
		g.openTimer.Stop()
	}
	if g.waitTimer != nil {
		g.waitTimer.Stop()
	}
	if g.syncTimer != nil {
		g.syncTimer.Stop() // the groups it waited for are synced below
	}
	if g.housekeepTimer != nil {
		g.housekeepTimer.Stop()
	}
	if g.dueTimer != nil {
		g.dueTimer.Stop()
	}
	if g.applyTimer != nil {
		g.applyTimer.Stop()
	}
	if g.applyDone != nil {
		<-g.applyDone // its groupApplied message is never handled: the group is not counted
	}
	if g.syncDone != nil {
		<-g.syncDone
	}
	g.applyRunner.stop()
	g.syncRunner.stop()
	g.applyRunner, g.syncRunner = nil, nil
	if g.store != nil && len(g.unsynced) > 0 {
		if err := g.store.Sync(); err != nil {
			g.failUnsynced(ctx, err)
		} else {
			g.replySynced(ctx, g.unsynced)
			g.unsynced = nil
		}
	}
	if g.store != nil {
		if err := g.store.Close(); err != nil {
			g.log.Error("partition close failed", "err", err)
		}
		g.store = nil
	}
}

// fail stops the activation after a failed commit: the next activation recovers from disk.
func (g *grain) fail(ctx actor.Context, err error) {
	g.log.Error("partition commit failed; stopping the activation", "err", err)
	g.failUnsynced(ctx, err)
	unavailable := orrery.Wrap(orrery.CodeUnavailable, err, "partition %d commit failed", g.partition).Proto()
	for _, p := range append(g.pending, g.waiters...) {
		g.reply(ctx, p, &orreryv1.CommandReply{Error: unavailable})
	}
	g.pending, g.waiters = nil, nil
	if g.store != nil {
		_ = g.store.Close()
		g.store = nil
	}
	g.openErr = err
	ctx.Stop(ctx.Self())
}

// failUnsynced answers the commands of every applied group that is not known to be durable
// with Unavailable: their outcome is uncertain, and callers retry with the same command ids.
func (g *grain) failUnsynced(ctx actor.Context, err error) {
	unavailable := orrery.Wrap(orrery.CodeUnavailable, err, "partition %d could not make its commit durable", g.partition).Proto()
	for _, done := range g.unsynced {
		for _, p := range done.group {
			g.reply(ctx, p, &orreryv1.CommandReply{Error: unavailable})
		}
	}
	g.unsynced = nil
}

func errorReply(err error) *orreryv1.CommandReply {
	return &orreryv1.CommandReply{Error: orrery.AsError(err).Proto()}
}

func describe(p *pending) string {
	return fmt.Sprintf("%s/%s", p.req.GetPrincipal(), p.req.GetBatch().GetCommandId())
}
