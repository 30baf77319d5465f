package silo

import (
	"context"
	"errors"
	"fmt"
	"github.com/orreryhq/orrery/grains/batch"
	"log/slog"
	"sync/atomic"
	"time"

	protocluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/actors"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/cluster/lookup"
	"github.com/orreryhq/orrery/cluster/raftnet"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/partition"
)

// member is one incarnation of the silo in its cluster: a protoactor member (actor system,
// remoting, cluster) under its own member id, the memberlist provider that announces it, the
// Raft transport over its actor system and the partition transport over its cluster. The
// silo's store, Raft groups, due coordinator, client and admin endpoint outlive it.
//
// Protoactor blocks for good the id of a member that left a peer's topology (one memberlist
// declared dead while it was paused or cut off), so such a member can never serve again. When
// the cluster no longer accepts the member id (cluster.Provider.Lost), the silo replaces the
// member in-process (rejoin): same silo id, same data, same ports, a new member id. Raft, not
// membership, fences writes: the replicas keep their state and catch up by the log or a
// snapshot as after any lag.
type member struct {
	cluster   *protocluster.Cluster
	provider  *cluster.Provider
	raft      *raftnet.Transport
	transport *cluster.PartitionTransport
	// ctx ends, by stop, the goroutines that watch this member (trackOwnership, the faults
	// file).
	ctx  context.Context
	stop context.CancelFunc
	// detached is set once detach stopped the member (under the silo's rejoinMu).
	detached bool
}

// ID is the member id.
func (m *member) ID() string { return m.cluster.ActorSystem.ID }

// member returns the silo's current member (the last one while a rejoin builds the next).
func (s *Silo) member() *member { return s.mem.Load() }

// rejoinRetry is how long a rejoin waits after the first failed start of a member before it
// tries again, doubling up to rejoinRetryMax.
const (
	rejoinRetry    = 500 * time.Millisecond
	rejoinRetryMax = 5 * time.Second
)

// join starts a new member of the silo's cluster and wires the host's Raft traffic to it. It
// returns once the member has joined (or founded) the cluster: within joinTimeout when
// positive, else until ctx ends. founded is set when this member minted the cluster id.
func (s *Silo) join(ctx context.Context, joinTimeout time.Duration, founded *atomic.Bool) (*member, error) {
	cfg, host := s.cfg, s.host
	pcfg := partition.Config{
		Host: host, CheckEvery: cfg.ConsistencyCheckEvery,
		Failpoints: cfg.Failpoints, Clock: cfg.Clock, Registry: s.registry, Pool: s.pool, Logger: cfg.Logger,
		OnNextDue: func(n *orreryv1.NextDueNotice) {
			if coord := s.coord.Load(); coord != nil {
				coord.Notify(n)
			}
		},
		Liveness: s.dueLiveness,
		SiloApplyVersions: func() map[uint64]uint32 {
			if m := s.member(); m != nil {
				return m.provider.SiloApplyVersions()
			}
			return nil
		},
	}
	c, provider, err := cluster.NewMember(ctx, cluster.MemberConfig{
		Name: cfg.ClusterName, Host: cfg.Host, Port: cfg.Port, JoinTimeout: joinTimeout, TLS: s.transportCreds,
		Logger: slog.New(actors.NewChurnHandler(cfg.Logger.Handler())),
		Gossip: cluster.ProviderConfig{
			BindHost: cfg.Host, BindPort: cfg.GossipPort, Seeds: cfg.Seeds, Logger: cfg.Logger, Build: Build(),
			ApplyVersion:  batch.KnownApplyVersion,
			ProbeInterval: s.profile.ProbeInterval, ProbeTimeout: s.profile.ProbeTimeout,
			SuspicionMult: s.profile.SuspicionMult, GossipInterval: s.profile.GossipInterval,
			SiloID: host.SiloID(), ClusterID: host.ClusterID(), BootstrapExpect: cfg.BootstrapExpect, SecretKey: cfg.GossipKey,
			OnClusterID: func(id uint64, minted bool) error {
				if founded != nil {
					founded.Store(minted)
				}
				return host.JoinCluster(id, minted)
			},
			OnFenced: func(cause error) { s.fenced(cause) },
			OnLost:   func(cause error) { s.lost(cause) },
			Retired:  host.RetiredSilos(), OnRetired: host.RecordRetired,
		},
		Kinds:          []*protocluster.Kind{partition.NewKind(pcfg)},
		IdentityLookup: lookup.New(lookup.Config{Kind: partition.Kind, Leadership: host, Logger: cfg.Logger}),
	})
	if err != nil {
		return nil, err
	}
	m := &member{cluster: c, provider: provider}
	m.raft, err = raftnet.New(raftnet.Config{Self: host.SiloID(), System: c.ActorSystem, Addresses: s.raftAddress, Faults: cfg.RaftFaults,
		Counts: s.countsReplica, OnRemoved: s.noticeRemoved, OnChecksum: host.ChecksumReported,
		OnRepairRequest: host.RepairRequested, OnClockProbe: s.answerClockProbe, OnClockReading: s.clockReading})
	if err != nil {
		if err := cluster.Shutdown(c, provider, false); err != nil {
			s.cfg.Logger.Warn("cluster shutdown", "err", err)
		}
		return nil, err
	}
	m.transport = cluster.NewPartitionTransport(c, cfg.Partitions, cfg.RequestTimeout)
	return m, nil
}

// attach makes m the silo's member: the Raft groups send through it. Called once per member,
// before it serves; track then watches its topology.
func (s *Silo) attach(m *member, runCtx context.Context) {
	m.ctx, m.stop = context.WithCancel(runCtx)
	s.mem.Store(m)
	s.refreshSilos()
	m.raft.SetReceiver(s.host.Receiver())
	s.host.SetTransport(m.raft)
	if s.cfg.RaftFaultsFile != "" {
		go s.cfg.RaftFaults.Follow(m.ctx, s.cfg.RaftFaultsFile, faultsFileEvery, s.faultsChanged)
	}
}

// track recomputes, until m is detached, the partitions this silo leads on m's topology
// changes and every refreshEvery, and hands them to the coordinator.
func (s *Silo) track(m *member) {
	s.refreshOwned()
	go s.trackOwnership(m.ctx, m)
}

// detach stops m: its watchers, the partition grains it hosts, its Raft transport (the groups
// send nowhere until the next member attaches) and its protoactor member and memberlist node
// (leaving gossip, so peers drop its id at once).
func (s *Silo) detach(m *member) {
	m.detached = true
	if m.stop != nil {
		m.stop()
	}
	s.host.SetTransport(nil)
	s.registry.StopAll(m.cluster.ActorSystem)
	_ = m.transport.Close()
	_ = m.raft.Close()
	if err := cluster.Leave(m.cluster, m.provider); err != nil {
		s.cfg.Logger.Warn("leaving the cluster with a lost member id", "member", m.ID(), "err", err)
	}
}

// lost is called when the cluster no longer accepts the member id: the silo rejoins under a
// new one, in the background.
func (s *Silo) lost(cause error) {
	go s.rejoin(cause)
}

// rejoin replaces the current member by a new one (a new member id, the same silo id, data and
// ports), retrying until it joins or the silo stops; a silo its cluster refuses (retired, or
// its data belongs to another cluster) stops. Meanwhile the silo is not ready and its client's
// calls fail Unavailable (and are retried within their deadlines).
func (s *Silo) rejoin(cause error) {
	s.rejoinMu.Lock()
	defer s.rejoinMu.Unlock()
	old := s.member()
	runCtx := s.runCtx
	if runCtx.Err() != nil || old == nil || old.provider.LostCause() == nil {
		return // stopping, or a second report for a member already replaced
	}
	start := time.Now()
	s.rejoining.Store(true)
	defer s.rejoining.Store(false)
	s.log.Warn("silo rejoining its cluster under a new member id", "member", old.ID(), "cause", cause)
	s.detach(old)
	delay := rejoinRetry
	for attempt := 1; ; attempt++ {
		if runCtx.Err() != nil {
			return
		}
		m, err := s.join(runCtx, 0, nil)
		if err == nil {
			s.attach(m, runCtx)
			s.track(m)
			s.rejoins.Add(1)
			s.log.Info("silo rejoined its cluster", "member", m.ID(), "previous_member", old.ID(),
				"took", time.Since(start).Round(time.Millisecond), "attempts", attempt)
			return
		}
		if runCtx.Err() != nil {
			return
		}
		if errors.Is(err, cluster.ErrRefused) {
			s.log.Error("silo stopping: its cluster refuses it", "err", err)
			s.setStopCause(err)
			go s.shutdown(false)
			return
		}
		s.log.Warn("rejoin failed; retrying", "attempt", attempt, "in", delay, "err", err)
		select {
		case <-runCtx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, rejoinRetryMax)
	}
}

// errRejoining is what the silo's own partition calls fail with while it rejoins its cluster.
var errRejoining = orrery.Errorf(orrery.CodeUnavailable, "silo is rejoining its cluster under a new member id")

// embedderTransport is the transport of the embedder's client (Silo.Client): the silo's, but
// refusing Orrery's own principals (system:...), so that Client.As cannot reach them either.
type embedderTransport struct{ memberTransport }

// checkPrincipal refuses one of Orrery's own principals.
func (embedderTransport) checkPrincipal(principal string) error {
	return input.RefuseSystem(principal, "the embedder's client")
}

// Command sends one batch unless its principal is one of Orrery's own.
func (t embedderTransport) Command(ctx context.Context, n int, req *orreryv1.CommandRequest) (*orreryv1.CommandReply, error) {
	if err := t.checkPrincipal(req.GetPrincipal()); err != nil {
		return nil, err
	}
	return t.memberTransport.Command(ctx, n, req)
}

// Inspect sends one read unless its principal is one of Orrery's own.
func (t embedderTransport) Inspect(ctx context.Context, n int, req *orreryv1.InspectRequest) (*orreryv1.InspectReply, error) {
	if err := t.checkPrincipal(req.GetPrincipal()); err != nil {
		return nil, err
	}
	return t.memberTransport.Inspect(ctx, n, req)
}

// memberTransport is the silo's partition transport for its client and due coordinator: the
// current member's, or Unavailable while a rejoin replaces the member.
type memberTransport struct{ s *Silo }

func (t memberTransport) current() (*cluster.PartitionTransport, error) {
	if t.s.rejoining.Load() {
		return nil, errRejoining
	}
	m := t.s.member()
	if m == nil {
		return nil, errRejoining
	}
	return m.transport, nil
}

// Partitions is the cluster's partition count.
func (t memberTransport) Partitions() int { return t.s.cfg.Partitions }

// Command sends one batch to partition/<n> through the current member.
func (t memberTransport) Command(ctx context.Context, n int, req *orreryv1.CommandRequest) (*orreryv1.CommandReply, error) {
	pt, err := t.current()
	if err != nil {
		return nil, err
	}
	return pt.Command(ctx, n, req)
}

// Inspect sends one read to partition/<n> through the current member.
func (t memberTransport) Inspect(ctx context.Context, n int, req *orreryv1.InspectRequest) (*orreryv1.InspectReply, error) {
	pt, err := t.current()
	if err != nil {
		return nil, err
	}
	return pt.Inspect(ctx, n, req)
}

// ScanDue asks partition/<n> for due references through the current member.
func (t memberTransport) ScanDue(ctx context.Context, n int, req *orreryv1.ScanDueRequest) (*orreryv1.ScanDueReply, error) {
	pt, err := t.current()
	if err != nil {
		return nil, err
	}
	return pt.ScanDue(ctx, n, req)
}

// String names the transport for logs.
func (t memberTransport) String() string {
	if m := t.s.member(); m != nil {
		return fmt.Sprint(m.transport)
	}
	return "silo transport (no member)"
}
