package partition

import (
	"errors"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/grains/engine"
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
	}, actor.WithDispatcher(cfg.Pool.Dispatcher(mailboxThroughput)))
}

// mailboxThroughput is how many messages a partition's mailbox processes per turn on the
// grains' goroutine pool (protoactor's default).
const mailboxThroughput = 300

// timerFired is an engine timer firing, sent by the grain to itself; gen tells a timer that
// was re-armed or stopped after it fired.
type timerFired struct {
	kind engine.TimerKind
	gen  uint64
}

// grain is one activation of partition/<n>: the driver of the partition's engine
// (grains/engine). It steps the engine with what arrives (requests, the state machine's
// results, its timers) at the clock's time and performs the engine's Ready: replies, next-due
// notices, timers on the clock, and proposals to the Host, whose outcomes it steps back.
type grain struct {
	cfg       Config
	partition int
	// silo is the id of the actor system hosting the activation (the silo's member id), which
	// status replies name.
	silo string

	// engine is the partition's engine, set while attached to the replica's state machine.
	engine  *engine.Engine
	openErr error
	timers  map[engine.TimerKind]clock.Timer
	timerGn map[engine.TimerKind]uint64
	// stopping is set once the activation has told itself to stop (its replica does not lead).
	stopping bool
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
		if !g.leads(ctx) {
			ctx.Respond(&orreryv1.CommandReply{Error: g.notLeader(replication.ErrNotLeader).Proto()})
			return
		}
		if g.engine == nil {
			ctx.Respond(&orreryv1.CommandReply{Error: g.unavailable().Proto()})
			return
		}
		g.step(ctx, engine.Command{Request: msg, From: ctx.Sender()})
	case *orreryv1.ScanDueRequest:
		if !g.leads(ctx) {
			ctx.Respond(&orreryv1.ScanDueReply{Error: g.notLeader(replication.ErrNotLeader).Proto()})
			return
		}
		if g.engine == nil {
			ctx.Respond(&orreryv1.ScanDueReply{Error: g.unavailable().Proto()})
			return
		}
		ctx.Respond(g.step(ctx, engine.ScanDue{Request: msg}).Scanned)
	case *orreryv1.InspectRequest:
		if !g.leads(ctx) {
			ctx.Respond(&orreryv1.InspectReply{Error: g.notLeader(replication.ErrNotLeader).Proto()})
			return
		}
		g.readConfirmed(ctx, msg)
	case *confirmedRead:
		g.answerRead(ctx, msg)
	case engine.Event: // from the state machine: Applied, Lost, HostFailed, StateReplaced
		if g.engine != nil {
			g.step(ctx, msg)
		}
	case *timerFired:
		if g.engine == nil || g.timerGn[msg.kind] != msg.gen {
			return
		}
		delete(g.timers, msg.kind)
		if ev := msg.kind.Fired(); ev != nil {
			g.step(ctx, ev)
		}
	case *actor.Stopping:
		g.stop(ctx)
	case *actor.Stopped:
		g.cfg.Registry.remove(ctx.Self())
	}
}

// open attaches the activation to the partition's state machine on this silo and starts its
// engine.
func (g *grain) open(ctx actor.Context) {
	if g.engine != nil {
		return
	}
	log := g.cfg.Logger.With("partition", g.partition)
	if g.cfg.Host == nil {
		g.openErr = orrery.Errorf(orrery.CodeUnavailable, "partition %d: no replicas on this silo", g.partition)
		return
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	state, err := g.cfg.Host.attach(g.partition, g, func(ev engine.Event) { root.Send(self, ev) })
	if err != nil {
		g.openErr = err
		log.Error("partition cannot open", "err", err)
		return
	}
	g.openErr = nil
	g.timers, g.timerGn = map[engine.TimerKind]clock.Timer{}, map[engine.TimerKind]uint64{}
	g.engine = engine.New(engine.Config{
		Partition: g.partition, Partitions: g.partitions(), Applier: g.cfg.Host.machines[g.partition].applier, Limits: g.cfg.Host.cfg.Limits,
		MaxPending: g.cfg.MaxPending, MaxWaiters: g.cfg.MaxWaiters, MaxWait: g.cfg.MaxWait,
		HousekeepEvery: g.cfg.HousekeepEvery, CheckEvery: max(g.cfg.CheckEvery, 0), Logger: log,
		VotersApplyVersion: g.votersApplyVersion(),
	}, replicaState{state: state, host: g.cfg.Host, n: g.partition})
	mark := state.Applied()
	log.Info("partition open", "term", g.cfg.Host.term(g.partition), "logged_time", mark.LoggedTimeMicros, "applied_index", mark.Index)
	g.step(ctx, engine.Open{})
}

// step steps the engine with event at the clock's time, performs its Ready and returns it.
func (g *grain) step(ctx actor.Context, event engine.Event) engine.Ready {
	rd := g.engine.Step(g.cfg.Clock.Now(), event)
	g.perform(ctx, rd)
	if g.engine != nil {
		m := g.cfg.Host.machines[g.partition]
		m.queued.Store(int64(g.engine.Queued()))
		m.dueHead.Store(int64(g.engine.DueHeadEntries()))
	}
	return rd
}

// perform does what a Ready asks, in its order: replies, notices, timers, then proposals, each
// proposal's outcome stepped back into the engine at once (and what that asks performed).
func (g *grain) perform(ctx actor.Context, rd engine.Ready) {
	for _, r := range rd.Replies {
		if pid, ok := r.To.(*actor.PID); ok && pid != nil {
			ctx.Send(pid, r.Reply)
		}
	}
	if rd.AnsweredApplied {
		g.cfg.Failpoints.Hit(FailpointReplySent)
	}
	if observe := g.cfg.Host.stages.Load(); observe != nil {
		for _, st := range rd.Stages {
			(*observe)(g.partition, st.Stage, st.Took)
		}
	}
	for _, n := range rd.Notices {
		g.cfg.OnNextDue(n)
	}
	for _, t := range rd.Timers {
		g.arm(ctx, t)
	}
	for _, p := range rd.Propose {
		proposal, err := g.cfg.Host.propose(g.partition, p.Principal, p.Command, p.Drains)
		if errors.Is(err, replication.ErrNotLeader) {
			err = g.notLeader(err)
			g.stopSelf(ctx)
		}
		g.step(ctx, engine.Proposed{Ref: p.Ref, Index: proposal.Index, Term: proposal.Term, Err: err})
	}
}

// arm sets the engine's timer t.Kind at t.At on the clock (a zero At only stops it).
func (g *grain) arm(ctx actor.Context, t engine.Timer) {
	if old := g.timers[t.Kind]; old != nil {
		old.Stop()
		delete(g.timers, t.Kind)
	}
	g.timerGn[t.Kind]++
	if t.At.IsZero() {
		return
	}
	fired := &timerFired{kind: t.Kind, gen: g.timerGn[t.Kind]}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	g.timers[t.Kind] = g.cfg.Clock.AfterFunc(max(t.At.Sub(g.cfg.Clock.Now()), 0), func() { root.Send(self, fired) })
}

// stop answers what is in flight and parked (the engine's Stop), stops the timers and detaches
// from the state machine.
func (g *grain) stop(ctx actor.Context) {
	if g.engine == nil {
		return
	}
	g.step(ctx, engine.Stop{})
	for _, t := range g.timers {
		t.Stop()
	}
	g.cfg.Host.detach(g.partition, g)
	g.cfg.Host.machines[g.partition].queued.Store(0)
	g.cfg.Host.machines[g.partition].dueHead.Store(0)
	g.engine = nil
}

// leads reports whether the activation may answer a request: its silo's replica leads the
// partition (or the activation has no replicas or no partition, which unavailable reports).
// When it does not, the activation stops after the messages already in its mailbox, each
// answered the same way, so that the caller's next request resolves the partition again, on
// its leader.
func (g *grain) leads(ctx actor.Context) bool {
	if g.cfg.Host == nil || g.partition < 0 || g.partition >= g.partitions() || g.cfg.Host.Leads(g.partition) {
		return true
	}
	g.stopSelf(ctx)
	return false
}

// stopSelf tells the activation to stop once, after the messages in its mailbox.
func (g *grain) stopSelf(ctx actor.Context) {
	if !g.stopping {
		g.stopping = true
		ctx.Poison(ctx.Self())
	}
}

// notLeader is the error a request gets from an activation whose replica does not lead:
// Unavailable, naming the silo this replica believes leads (orrery.Error.LeaderSilo), where
// the caller retries.
func (g *grain) notLeader(cause error) *orrery.Error {
	leader := g.cfg.Host.Leader(g.partition)
	var e *orrery.Error
	if leader == 0 {
		e = orrery.Wrap(orrery.CodeUnavailable, cause, "partition %d: this silo's replica does not lead and knows no leader", g.partition)
	} else {
		e = orrery.Wrap(orrery.CodeUnavailable, cause, "partition %d: this silo's replica does not lead; silo %s does", g.partition, formatReplica(leader))
	}
	e.LeaderSilo = leader
	return e
}

// partitions is the cluster's partition count (0 without a host).
func (g *grain) partitions() int {
	if g.cfg.Host == nil {
		return 0
	}
	return g.cfg.Host.cfg.Partitions
}

// unavailable is the error a request gets while the grain is not attached.
func (g *grain) unavailable() *orrery.Error {
	if g.openErr != nil {
		return orrery.Wrap(orrery.CodeUnavailable, g.openErr, "partition %d is not open", g.partition)
	}
	return orrery.Errorf(orrery.CodeUnavailable, "partition %d is not open", g.partition)
}

// replicaState is the engine's State: the partition's state on this silo's replica and the
// group's term.
type replicaState struct {
	state *persistence.PartitionState
	host  *Host
	n     int
}

func (s replicaState) View(fn func(kv.Reader) error) error { return s.state.View(fn) }

func (s replicaState) Applied() (uint64, int64) {
	mark := s.state.Applied()
	return mark.Index, mark.LoggedTimeMicros
}

func (s replicaState) Term() uint64 { return s.host.term(s.n) }

// votersApplyVersion is the engine's Config.VotersApplyVersion for the grain's partition: the
// newest apply version known to every voter of its group, this silo's binary
// (batch.KnownApplyVersion) and each peer as it announces (Config.SiloApplyVersions); false
// while a voter is not live or announces nothing. Nil without Config.SiloApplyVersions.
func (g *grain) votersApplyVersion() func() (uint32, bool) {
	if g.cfg.SiloApplyVersions == nil {
		return nil
	}
	host, n := g.cfg.Host, g.partition
	return func() (uint32, bool) {
		st, ok := host.Status(n)
		if !ok || len(st.Voters) == 0 {
			return 0, false
		}
		peers := g.cfg.SiloApplyVersions()
		version := host.machines[n].applier.KnownApplyVersionOrDefault()
		for _, voter := range st.Voters {
			if voter == host.SiloID() {
				continue
			}
			known, live := peers[voter]
			if !live {
				return 0, false
			}
			version = min(version, known)
		}
		return version, true
	}
}
