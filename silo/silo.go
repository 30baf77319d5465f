package silo

import (
	"context"
	"errors"
	"fmt"
	"github.com/orreryhq/orrery/persistence"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	protocluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/orreryhq/orrery/actors"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/cluster/clockoffset"
	"github.com/orreryhq/orrery/cluster/raftnet"
	"github.com/orreryhq/orrery/cluster/transportauth"
	"github.com/orreryhq/orrery/grains/duecoordinator"
	"github.com/orreryhq/orrery/grains/schedule/cron"
	"github.com/orreryhq/orrery/grains/schedule/zonerules"
	"github.com/orreryhq/orrery/partition"
	"github.com/orreryhq/orrery/silo/rebalance"
)

// Silo is a running silo.
type Silo struct {
	cfg  Config
	log  *slog.Logger
	host *partition.Host
	// profile and transportCreds are what each member is started with.
	profile        FailureProfile
	transportCreds *transportauth.Credentials
	// mem is the silo's current member in its cluster (member.go). rejoinMu serializes rejoins,
	// rejoining is set while one replaces the member, and rejoins counts those that succeeded.
	mem       atomic.Pointer[member]
	rejoinMu  sync.Mutex
	rejoining atomic.Bool
	rejoins   atomic.Int64
	// coord is set once, after the cluster has started; partition grains may activate and
	// call OnNextDue before that (the cluster is what builds the transport the coordinator
	// needs), so it is read atomically and a notice before it exists is dropped (the
	// coordinator scans each partition it comes to own anyway).
	coord  atomic.Pointer[duecoordinator.Coordinator]
	quorum *quorumWatch
	// client acts as Principal, the silo's own (the admin endpoint's reads, the bootstrap of
	// grants); embedded is the embedder's, acting as Config.ClientPrincipal (Client).
	client, embedded *client.Client
	registry         *partition.Registry
	// pool runs the partition grains' mailboxes and the due coordinator's dispatches.
	pool      *actors.Pool
	admin     *http.Server
	adminAddr string
	// denied logs and counts the denials outside apply.
	denied *deniedReads

	// ownedMu guards owned, the partitions this silo leads as of trackOwnership's last look.
	ownedMu sync.Mutex
	owned   []int
	// silos maps the silo id of each member of the topology to its actor address (where the
	// Raft transport sends) and its member id, as of trackOwnership's last look.
	silos atomic.Pointer[liveView]
	// builds are the live silos' builds (Build) as refreshSilos last saw them; buildsDiffer
	// names those that differ from this silo's, as last logged.
	builds       atomic.Pointer[map[uint64]string]
	buildsDiffer atomic.Pointer[string]
	// placement is the replica placement loop.
	placement *placer
	// removal tracks the removals of this silo's replicas from their partitions' groups.
	removal removal
	// offsets measures this silo's clock against its live peers' and judges it
	// (Config.MaxClockOffset).
	offsets *clockoffset.Monitor

	stopOnce sync.Once
	stopped  chan struct{}
	// joined is set once Start has joined the cluster and built the coordinator and client:
	// before that the admin endpoint answers only /healthz and /readyz (joining).
	joined atomic.Bool
	// runCtx lives until the silo stops; cancel ends it.
	runCtx context.Context
	cancel context.CancelFunc
	// stopCause is why the silo stopped on its own when neither its partitions nor a fence
	// says so: its cluster refused it at a rejoin.
	stopCauseMu sync.Mutex
	stopCause   error
	// stopTraces flushes and stops the silo's own TracerProvider (nil without one).
	stopTraces func(context.Context) error
}

// Start starts a silo and returns once it serves: its store is open with every partition's
// Raft group replayed (and, for a group whose only voter it is, led), it has joined (or
// founded) the cluster, its admin endpoint listens, every partition it leads answers (as
// /readyz judges), and, on the silo that founded the cluster, its bootstrap grants
// (Config.Grants, Config.InsecureDev) are on every partition; another silo puts them in the
// background. A store that cannot be opened (another process holds it, the directory is not
// writable, the data root is in the old layout) fails Start at once; so does a data dir that
// belongs to another cluster than the silos it reaches, or to a silo the cluster retired. A silo
// whose store records its cluster waits to join it until ctx ends, however long its peers are
// down (its admin endpoint answers meanwhile, /readyz saying what it waits for); one with an
// empty store that cannot form or join a cluster within Config.OpenTimeout, or whose partitions
// do not lead or answer within it once joined, stops, and Start returns an error naming what
// it waited for (the data dir and its ids, or the partitions and the first one's reason).
//
// Once started, a silo stops on its own only when the cluster retires it or refuses it, or when
// its partitions fail (Done, Err); a group that removes its replica adds it back once placement
// counts it in the partition's target set again. When the
// cluster no longer accepts its member id (it was paused or cut off long enough to be
// declared dead), it rejoins in-process under a new one (Rejoins).
func Start(ctx context.Context, cfg Config) (*Silo, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	profile, _ := FailureProfileNamed(cfg.FailureProfile) // withDefaults checked it
	var transportCreds *transportauth.Credentials
	if files := cfg.transportFiles(); files.Enabled() {
		if transportCreds, err = transportauth.Load(files); err != nil {
			return nil, err
		}
	}
	host, err := partition.OpenHost(partition.HostConfig{
		DataRoot: cfg.DataDir, Partitions: cfg.Partitions, Store: cfg.Store, Limits: cfg.Limits,
		LeadTimeout: cfg.OpenTimeout, Failpoints: cfg.Failpoints, ClockUnjudged: cfg.MaxClockOffset > 0, Logger: cfg.Logger, Clock: cfg.Clock,
		RaftTick: profile.RaftTick, ElectionTicks: profile.ElectionTicks, HeartbeatTicks: profile.HeartbeatTicks,
	})
	if err != nil {
		return nil, fmt.Errorf("open the partitions in %s: %w", cfg.DataDir, err)
	}
	tracerProvider, stopTraces, err := cfg.startTraces(ctx)
	if err != nil {
		_ = host.Close()
		return nil, err
	}
	s := &Silo{cfg: cfg, host: host, profile: profile, transportCreds: transportCreds, registry: partition.NewRegistry(), pool: actors.NewPool(actors.DefaultPoolIdle),
		stopped: make(chan struct{}), stopTraces: stopTraces, denied: newDeniedReads(cfg.Logger)}
	host.ObserveInspectDenials(func(_ int, principal, target, message string) {
		s.denied.record(denialInspect, principal, target, message)
	})
	s.runCtx, s.cancel = context.WithCancel(context.Background())
	// The silo id, not the member id: the member id changes when the silo rejoins.
	s.log = cfg.Logger.With("silo_id", cluster.FormatID(host.SiloID()))
	if path, set := os.LookupEnv("ZONEINFO"); set {
		// The host's zone database never reaches apply; say so to whoever set it expecting it to.
		s.log.Warn("ZONEINFO is ignored: cron schedules evaluate with the zone rules their partition holds, from the tzdata release compiled into Orrery",
			"zoneinfo", path, "zone_rules", zonerules.Version)
	}

	if s.offsets, err = s.newClockMonitor(); err != nil {
		s.cancel()
		s.flushTraces()
		_ = host.Close()
		return nil, err
	}

	// The coordinator needs the transport, the transport needs the cluster, and the cluster
	// needs the partition kind, whose grains notify the coordinator: wire through the silo.
	storedClusterID := host.ClusterID()
	// The admin endpoint answers while the silo joins: /readyz says what it waits for.
	if err := s.startAdmin(); err != nil {
		s.cancel()
		s.flushTraces()
		_ = host.Close()
		return nil, err
	}
	// A silo whose store records its cluster waits for it as long as it takes (its peers may
	// all be down and come back one at a time, in any order); OpenTimeout bounds the formation
	// of a new cluster and the join of an empty store.
	joinTimeout := cfg.OpenTimeout
	if storedClusterID != 0 {
		joinTimeout = 0
	}
	var founded atomic.Bool // set when this silo creates the cluster (before join returns)
	// A loss of the member id, a fence or a stop reported while Start joins waits until the
	// member is in place (rejoin and shutdown take rejoinMu).
	s.rejoinMu.Lock()
	m, err := s.join(ctx, joinTimeout, &founded)
	if err != nil {
		s.rejoinMu.Unlock()
		s.cancel()
		s.stopAdmin()
		s.flushTraces()
		_ = host.Close()
		return nil, joinError(cfg, host.SiloID(), storedClusterID, err)
	}
	s.quorum = newQuorumWatch(cfg.LateAfter, s.log)
	// The configurations the replicas opened with, seen before any message can change them: a
	// replica the cluster removed while this silo was down and adds back at once is then seen
	// to have been a voter (see removal).
	s.mem.Store(m)
	s.checkRemoved()
	s.attach(m, s.runCtx)
	runCtx := s.runCtx
	transport := memberTransport{s}
	coord := duecoordinator.New(duecoordinator.Config{
		Partitions: transport, Clock: cfg.Clock, CommandIDPrefix: "due-" + m.ID(),
		RequestTimeout: cfg.RequestTimeout, Logger: s.log, Workers: cfg.Partitions, Pool: s.pool, LateAfter: cfg.LateAfter, TracerProvider: tracerProvider,
	})
	coord.Start(runCtx)
	s.coord.Store(coord)
	s.client = client.New(transport, client.Options{Principal: Principal, Logger: s.log, Limits: new(client.LimitsOf(cfg.Limits)), TracerProvider: tracerProvider})
	s.embedded = client.New(embedderTransport{transport}, client.Options{Principal: cfg.ClientPrincipal, Logger: s.log, Limits: new(client.LimitsOf(cfg.Limits)), TracerProvider: tracerProvider})
	// The capped queues' share units follow their demand, moved by the leader of partition 0.
	go rebalance.New(rebalance.Config{Client: s.client, Leads: func() bool { return s.host.Leads(0) }, Logger: s.log}).Run(runCtx)
	s.joined.Store(true)
	s.track(m)
	s.rejoinMu.Unlock()
	s.placement = newPlacer(s)
	go s.placement.run(runCtx)
	s.offsets.Start()
	go s.watchHost(runCtx)
	go s.watchQuorum(runCtx)
	if err := s.awaitPartitions(ctx); err != nil {
		s.shutdown(true)
		return nil, err
	}
	if founded.Load() {
		grantCtx, cancelGrants := context.WithTimeout(ctx, cfg.OpenTimeout)
		err := s.putGrants(grantCtx)
		cancelGrants()
		if err != nil {
			s.shutdown(true)
			return nil, err
		}
	} else {
		go s.putGrantsInBackground(runCtx)
	}
	cfg.Failpoints.Begin()
	for _, n := range cfg.Diverge {
		if err := host.Diverge(n); err != nil {
			s.log.Error("cannot make a replica diverge", "partition", n, "err", err)
		} else {
			s.log.Warn("this replica's state will diverge on purpose (a test of the consistency checker)", "partition", n)
		}
	}
	s.log.Info("silo ready", "cluster_id", cluster.FormatID(s.ClusterID()),
		"actor", s.ActorAddress(), "gossip", s.GossipAddress(), "admin", s.adminAddr, "data", cfg.DataDir, "partitions", cfg.Partitions, "security", cfg.securityMode(),
		"zone_rules", zonerules.Version, "cron_evaluator", cron.EvaluatorVersion)
	return s, nil
}

// Security is the silo's security mode, as its ready line says: "INSECURE-DEV", or its
// credentials joined by "+" ("tokens+gossip-key+mtls").
func (s *Silo) Security() string { return s.cfg.securityMode() }

// Client returns an in-process client of this silo's cluster for the embedding program. It acts
// as Config.ClientPrincipal (default client.DefaultPrincipal), under that principal's grants;
// neither it nor a client derived from it (Client.As) may act as one of Orrery's own
// principals.
func (s *Silo) Client() *client.Client { return s.embedded }

// ActorAddress is the actor transport address (host:port).
func (s *Silo) ActorAddress() string { return s.member().cluster.ActorSystem.Address() }

// GossipAddress is the memberlist address (host:port) other silos and clients join.
func (s *Silo) GossipAddress() string { return s.member().provider.GossipAddress() }

// AdminAddress is the admin HTTP address, or "" when disabled.
func (s *Silo) AdminAddress() string { return s.adminAddr }

// ID is the silo's current member id: a new one each process start, and each time the silo
// rejoins its cluster after the cluster stopped accepting the previous one (Rejoins).
func (s *Silo) ID() string { return s.member().ID() }

// Rejoins counts the times this silo rejoined its cluster under a new member id since it
// started.
func (s *Silo) Rejoins() int64 { return s.rejoins.Load() }

// Rejoining reports whether the silo is rejoining its cluster right now.
func (s *Silo) Rejoining() bool { return s.rejoining.Load() }

// SiloID is the silo's stable id, kept in its store across restarts.
func (s *Silo) SiloID() uint64 { return s.host.SiloID() }

// ClusterID is the id of the cluster the silo belongs to, recorded in its store.
func (s *Silo) ClusterID() uint64 { return s.member().provider.ClusterID() }

// Done is closed when the silo has stopped: Stop, fenced by the cluster, or its partitions
// failed (Err says which of the last two).
func (s *Silo) Done() <-chan struct{} { return s.stopped }

// Err is why the silo stopped on its own: its partitions' failure or the cause of its fence;
// nil while it runs and after Stop.
func (s *Silo) Err() error {
	if err := s.host.Err(); err != nil {
		return fmt.Errorf("partitions failed: %w", err)
	}
	if cause := s.member().provider.FenceCause(); cause != nil {
		return fmt.Errorf("fenced by the cluster: %w", cause)
	}
	s.stopCauseMu.Lock()
	cause := s.stopCause
	s.stopCauseMu.Unlock()
	return cause
}

// StoreWrites is what the silo store's applies and Raft rounds have written since the silo
// started (persistence.WriteCounts): divided by the occurrences of a run, the store's cost of
// one.
func (s *Silo) StoreWrites() persistence.WriteCounts { return s.host.Written() }

// CoordinatorStats returns the due coordinator's counters and per-partition view.
func (s *Silo) CoordinatorStats() duecoordinator.Stats { return s.coord.Load().Stats() }

// Owned returns the partitions this silo leads, as of the last leadership check.
func (s *Silo) Owned() []int {
	s.ownedMu.Lock()
	defer s.ownedMu.Unlock()
	return slices.Clone(s.owned)
}

// Stop shuts the silo down gracefully: the coordinator stops, the silo hands its partitions'
// leaderships to other silos' replicas (for at most a few seconds), the partition grains
// stop, the silo leaves the cluster, its admin endpoint closes and its store closes.
func (s *Silo) Stop() { s.shutdown(true) }

// watchHost stops the silo when its partition replicas fail (a failed write or apply): the
// next start recovers from the store.
func (s *Silo) watchHost(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-s.host.Failed():
		s.log.Error("silo stopping: its partitions failed", "err", s.host.Err())
		go s.shutdown(false)
	}
}

// fenced is called when the cluster retired this silo: it must stop serving at once, for good.
func (s *Silo) fenced(cause error) {
	s.cfg.Logger.Error("silo fenced by the cluster; stopping", "cause", cause)
	go s.shutdown(false)
}

// setStopCause records why the silo stops on its own, for Err, when no other cause says so.
func (s *Silo) setStopCause(err error) {
	s.stopCauseMu.Lock()
	defer s.stopCauseMu.Unlock()
	if s.stopCause == nil {
		s.stopCause = err
	}
}

func (s *Silo) shutdown(graceful bool) {
	s.stopOnce.Do(func() {
		s.cancel()
		s.offsets.Stop()
		if coord := s.coord.Load(); coord != nil {
			coord.Stop()
		}
		s.flushTraces()
		// A rejoin in progress ends with runCtx; once it has, the member is the last one it
		// attached, or the one it detached when it gave up.
		s.rejoinMu.Lock()
		defer s.rejoinMu.Unlock()
		m := s.member()
		if m == nil { // Start failed to join and released everything
			close(s.stopped)
			return
		}
		// A silo with no live peer has nobody to hand a leadership or a grain to: it skips
		// protoactor's graceful path too, which sleeps 2 s for the hand-over.
		alone := !hasPeers(s.liveSilos(), s.SiloID())
		if graceful && !m.detached {
			s.drain()
			// The peers elect at once for a partition the drain could not hand over: this
			// replica sends nothing more, while the member below takes seconds to leave.
			s.host.SetTransport(nil)
		}
		s.stopAdmin()
		if !m.detached {
			if m.stop != nil {
				m.stop()
			}
			s.registry.StopAll(m.cluster.ActorSystem)
			if err := cluster.Shutdown(m.cluster, m.provider, graceful && !alone); err != nil {
				s.cfg.Logger.Warn("cluster shutdown", "err", err)
			}
			_ = m.transport.Close()
			_ = m.raft.Close()
		}
		if err := s.host.Close(); err != nil {
			s.cfg.Logger.Error("closing the silo store", "err", err)
		}
		s.pool.Close()
		close(s.stopped)
	})
}

// refreshOwned recomputes the partitions this silo coordinates (those whose Raft group this
// silo's replica leads) and the silos' addresses from the topology,
// and hands a changed set of partitions to the coordinator.
func (s *Silo) refreshOwned() {
	s.refreshSilos()
	var owned []int
	for n := range s.cfg.Partitions {
		if s.host.Leads(n) {
			owned = append(owned, n)
		}
	}
	s.ownedMu.Lock()
	if slices.Equal(owned, s.owned) {
		s.ownedMu.Unlock()
		return
	}
	s.owned = owned
	s.ownedMu.Unlock()
	s.log.Info("silo leads partitions", "count", len(owned), "partitions", owned)
	if coord := s.coord.Load(); coord != nil {
		coord.SetOwned(owned)
	}
}

// refreshSilos records the silo ids, actor addresses and member ids of the topology's members.
func (s *Silo) refreshSilos() {
	m := s.member()
	topology := m.provider.Topology()
	ids := m.provider.SiloIDs()
	v := liveView{addresses: make(map[uint64]string, len(topology)), members: make(map[uint64]string, len(topology))}
	for _, peer := range topology {
		if id, ok := ids[peer.GetId()]; ok {
			v.addresses[id], v.members[id] = peer.Address(), peer.GetId()
		}
	}
	v.addresses[s.SiloID()], v.members[s.SiloID()] = s.ActorAddress(), m.ID()
	s.silos.Store(&v)
	s.noticeBuilds(m.provider.SiloBuilds())
}

// Build is what of this silo's binary decides how it applies entries: its zone rules release
// and cron evaluator version. Silos announce it to each other (GET /v1/silos).
func Build() string {
	return fmt.Sprintf("tzdata %s, cron %d", zonerules.Version, cron.EvaluatorVersion)
}

// noticeBuilds records the builds other live silos announce and logs, once per change, the
// silos whose build differs from this one's. A difference is harmless to apply (zone rules
// reach it through the entries and the state, and every binary evaluates the older cron
// versions), but it is what an unfinished rolling upgrade looks like.
func (s *Silo) noticeBuilds(builds map[uint64]string) {
	own := Build()
	var differ []string
	for _, id := range slices.Sorted(maps.Keys(builds)) {
		if builds[id] != own {
			differ = append(differ, fmt.Sprintf("%s (%s)", cluster.FormatID(id), builds[id]))
		}
	}
	builds[s.SiloID()] = own
	s.builds.Store(&builds)
	summary := strings.Join(differ, ", ")
	if old := s.buildsDiffer.Swap(&summary); old != nil && *old == summary {
		return
	}
	if summary != "" {
		s.log.Warn("other silos run another build (zone rules or cron evaluator version); this one runs "+own, "silos", summary)
	}
}

// siloBuilds is every live silo's build as last seen, this silo's included.
func (s *Silo) siloBuilds() map[uint64]string {
	if b := s.builds.Load(); b != nil {
		return *b
	}
	return map[uint64]string{s.SiloID(): Build()}
}

// liveSilos returns the silo ids of the topology's members (this silo included), as of
// trackOwnership's last look.
func (s *Silo) liveSilos() map[uint64]string {
	if v := s.silos.Load(); v != nil {
		return v.addresses
	}
	return nil
}

// liveView is the topology's silos as refreshSilos last saw them, by silo id.
type liveView struct {
	addresses map[uint64]string // actor addresses
	members   map[uint64]string // member ids: a new one each time a silo starts or rejoins
}

// raftAddress resolves a replica id (a silo id) to its silo's replication actor.
func (s *Silo) raftAddress(replica uint64) (*actor.PID, bool) {
	address, ok := s.liveSilos()[replica]
	if !ok {
		return nil, false
	}
	return raftnet.PID(address), true
}

// faultsFileEvery is how often the silo reads Config.RaftFaultsFile.
const faultsFileEvery = 100 * time.Millisecond

// faultsChanged logs each change Config.RaftFaultsFile made to the transport faults (at warn:
// a silo with faults armed is under test), or why the file's change was refused.
func (s *Silo) faultsChanged(faults string, err error) {
	if err != nil {
		s.log.Error("raft transport faults file refused; faults unchanged", "faults", faults, "err", err)
		return
	}
	s.log.Warn("raft transport faults set", "faults", faults)
}

// refreshEvery is how often trackOwnership looks at the partitions' leadership between
// topology changes: a partition whose leadership came here is served within it.
const refreshEvery = 100 * time.Millisecond

// awaitPartitionsEvery is how often Start checks whether its partitions have opened.
const awaitPartitionsEvery = 100 * time.Millisecond

// awaitPartitions waits until every partition this silo leads answers, for
// at most Config.OpenTimeout or until ctx ends.
func (s *Silo) awaitPartitions(ctx context.Context) error {
	deadline := time.Now().Add(s.cfg.OpenTimeout)
	for {
		// Each check has its own bound, so the last one's reasons are the partitions' own
		// errors rather than the deadline's.
		_, notReady, err := s.readiness(context.Background())
		if len(notReady) == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("silo %s: partitions %v not open: %w (%v)", s.ID(), notReady, ctx.Err(), err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("silo %s: partitions %v did not open within %v: %w", s.ID(), notReady, s.cfg.OpenTimeout, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(awaitPartitionsEvery):
		}
	}
}

// trackOwnership recomputes the partitions placed on this silo on every topology change of
// member m and every refreshEvery, and hands them to the coordinator, until ctx ends.
func (s *Silo) trackOwnership(ctx context.Context, m *member) {
	changed := make(chan struct{}, 1)
	sub := m.cluster.ActorSystem.EventStream.Subscribe(func(evt any) {
		switch e := evt.(type) {
		case *protocluster.ClusterTopology:
			select {
			case changed <- struct{}{}:
			default:
			}
		case *remote.EndpointTerminatedEvent:
			s.connectionLost(e.Address)
		}
	})
	defer m.cluster.ActorSystem.EventStream.Unsubscribe(sub)
	tick := time.NewTicker(refreshEvery)
	defer tick.Stop()
	for {
		s.refreshOwned()
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
		}
	}
}

// stopAdmin closes the admin endpoint, waiting up to 2 s for requests in flight.
func (s *Silo) stopAdmin() {
	if s.admin != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = s.admin.Shutdown(ctx)
		cancel()
	}
}

// startAdmin listens on the admin address (unless "off").
func (s *Silo) startAdmin() error {
	if s.cfg.Admin == "off" {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.Admin)
	if err != nil {
		return fmt.Errorf("admin listen %s: %w", s.cfg.Admin, err)
	}
	s.adminAddr = ln.Addr().String()
	s.admin = &http.Server{Handler: s.adminHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := s.admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin server", "err", err)
		}
	}()
	return nil
}
