package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	protocluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/hashicorp/go-multierror"
	"github.com/hashicorp/memberlist"
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery/actors"
)

// Provider is a protoactor cluster.ClusterProvider on hashicorp/memberlist. One Provider
// serves one cluster.Cluster, once: create it with NewProvider, hand it to cluster.Configure,
// and stop it with Shutdown (cluster.Cluster.Shutdown(false) does not).
type Provider struct {
	cfg    ProviderConfig
	logger *slog.Logger

	mu         sync.Mutex // guards started, ml and gossipAddr during start and Shutdown
	started    bool
	ml         *memberlist.Memberlist
	gossipAddr string // memberlist's address, read at start (LocalNode is rewritten by UpdateNode)

	// Set in start before memberlist exists, read-only afterwards (memberlist's goroutines
	// and ours start after it is set).
	env      *environment
	metaBase nodeMeta
	// meta is the metadata memberlist announces (delegate.NodeMeta); the run goroutine
	// replaces it when this node takes a cluster id.
	meta atomic.Pointer[[]byte]
	// clusterID is form.clusterID, for other goroutines.
	clusterID atomic.Uint64

	// nodes are memberlist's live nodes (alive or suspect) by name, as its events reported them.
	nodesMu sync.Mutex
	nodes   map[string]memberlistNode
	// departing are the nodes memberlist declared dead within deadGrace, by name, with when:
	// still in the view (see deadGrace).
	departing map[string]departingNode
	// departed holds, by node name, how each node that left memberlist's live set went (left or
	// dead), until logPeers has logged it.
	departed map[string]memberlist.NodeStateType

	changed chan struct{} // capacity 1: "republish soon"
	stop    chan struct{}
	loops   sync.WaitGroup

	shutdownOnce sync.Once
	shutdownErr  error

	gateOpen atomic.Bool // bootstrap gate: publishing allowed
	// reachedPeers are the peers (member ids) this silo probed itself and that answered, while
	// the gate is closed (identity.go, reached); only the run goroutine uses it.
	reachedPeers map[string]bool
	// probePeer reaches one peer (nil: Provider.probe; tests replace it).
	probePeer func(memberlistNode) bool
	ready     chan struct{}
	readyOnce sync.Once

	topologyMu sync.Mutex
	topology   []*protocluster.Member // last topology protoactor accepted
	silos      map[string]uint64      // silo id of each member of the last published set

	// waiting is what the cluster-identity rule waits for before the gate opens ("" once it
	// opened); refused is closed when the rule refuses this node (refuseCause).
	waitingMu   sync.Mutex
	waiting     string
	refused     chan struct{}
	refuseOnce  sync.Once
	refuseCause error

	fenced     chan struct{}
	fenceOnce  sync.Once
	fenceCause error

	lost      chan struct{}
	lostOnce  sync.Once
	lostCause error
	// noticedBy holds when each live peer last reported that it blocked this member (lost.go).
	noticeMu  sync.Mutex
	noticedBy map[string]time.Time

	// retired are the retired silos persisted through OnRetired, learned those peers reported
	// and not yet persisted, heard those reported by cluster id before this member had one
	// (nil once it has); see retired.go. saveMu serializes the saves.
	retiredMu sync.Mutex
	retired   map[uint64]bool
	learned   map[uint64]bool
	heard     map[uint64]map[uint64]bool
	saveMu    sync.Mutex

	// failed are the silos of this cluster memberlist declared dead, for the join loop.
	failed failedPeers

	joinMu      sync.Mutex
	lastJoinErr error // the last failed join's error, nil once a join succeeded
	// refusedJoins counts the last failed joins in a row whose every seed refused the connection.
	refusedJoins int

	// draining is set by SetDraining; announcedDraining (run goroutine) once announced.
	draining          atomic.Bool
	announcedDraining bool

	// Owned by the run goroutine.
	form              formation
	inTopology        bool
	lastNotice        map[string]time.Time
	lastRetiredNotice map[string]time.Time
	foreignSeen       map[string]bool
}

var _ protocluster.ClusterProvider = (*Provider)(nil)

// environment is what the provider needs from the protoactor cluster it serves. Tests supply
// their own to exercise membership, gating and fencing without protoactor.
type environment struct {
	clusterName string
	selfID      string
	host        string
	port        int
	kinds       []string
	client      bool
	// publish hands the full member set to protoactor and returns the resulting topology
	// (protoactor drops blocked ids).
	publish func(members []*protocluster.Member) (topology []*protocluster.Member)
	// blocked reports whether protoactor has blocked the member id.
	blocked func(memberID string) bool
}

// NewProvider validates cfg and returns an unstarted provider.
func NewProvider(cfg ProviderConfig) (*Provider, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// The provider's own lines are state changes, logged at their level; LogLevel filters
	// memberlist's, which log every probe and retry.
	own := cfg.Logger
	cfg.Logger = slog.New(actors.NewLevelHandler(cfg.LogLevel, cfg.Logger.Handler()))
	retired := map[uint64]bool{}
	for _, id := range cfg.Retired {
		retired[id] = true
	}
	return &Provider{
		cfg:               cfg,
		logger:            own.With(slog.String("lib", "orrery/cluster")),
		nodes:             map[string]memberlistNode{},
		changed:           make(chan struct{}, 1),
		stop:              make(chan struct{}),
		ready:             make(chan struct{}),
		fenced:            make(chan struct{}),
		lost:              make(chan struct{}),
		noticedBy:         map[string]time.Time{},
		refused:           make(chan struct{}),
		lastNotice:        map[string]time.Time{},
		lastRetiredNotice: map[string]time.Time{},
		foreignSeen:       map[string]bool{},
		retired:           retired,
		learned:           map[uint64]bool{},
		heard:             map[uint64]map[uint64]bool{},
	}, nil
}

// StartMember implements cluster.ClusterProvider: it joins gossip announcing this member's
// kinds. protoactor calls it from Cluster.StartMember after remoting has started (and panics
// on an error).
func (p *Provider) StartMember(c *protocluster.Cluster) error {
	env, err := clusterEnvironment(c, false)
	if err != nil {
		return err
	}
	return p.start(env)
}

// StartClient implements cluster.ClusterProvider: it joins gossip as a client (no kinds, never
// in the topology) so the client learns the topology.
func (p *Provider) StartClient(c *protocluster.Cluster) error {
	env, err := clusterEnvironment(c, true)
	if err != nil {
		return err
	}
	return p.start(env)
}

// clusterEnvironment binds the provider to a started protoactor cluster.
func clusterEnvironment(c *protocluster.Cluster, client bool) (*environment, error) {
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil || port <= 0 {
		return nil, fmt.Errorf("actor transport address %q is not host:port (remoting not started?)", c.ActorSystem.Address())
	}
	var kinds []string
	if !client {
		kinds = c.GetClusterKinds()
	}
	selfID := c.ActorSystem.ID
	return &environment{
		clusterName: c.Config.Name,
		selfID:      selfID,
		host:        host,
		port:        port,
		kinds:       kinds,
		client:      client,
		publish: func(members []*protocluster.Member) []*protocluster.Member {
			c.MemberList.UpdateClusterTopology(members)
			// Only this goroutine updates the member list, so reading it back here does not
			// race with the write (other readers of MemberList.Members do; see Topology).
			return protocluster.CopySortMembers(c.MemberList.Members().Members())
		},
		blocked: func(memberID string) bool { return c.Remote.BlockList().IsBlocked(memberID) },
	}, nil
}

// start creates the memberlist node and the provider's goroutines.
func (p *Provider) start(env *environment) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return errors.New("cluster provider already started")
	}
	select {
	case <-p.stop:
		return errors.New("cluster provider already shut down")
	default:
	}
	// With a port chosen at start no seed can name this node: only a fixed port is filtered.
	selfAddr := ""
	if p.cfg.BindPort != 0 {
		selfAddr = net.JoinHostPort(cmp.Or(p.cfg.AdvertiseHost, p.cfg.BindHost), strconv.Itoa(p.cfg.BindPort))
	}
	seeds := otherSeeds(p.cfg.Seeds, selfAddr, p.cfg.BindHost, p.cfg.AdvertiseHost)
	p.env = env
	if err := p.startIdentity(len(seeds) == 0); err != nil {
		return err
	}
	mc, err := p.cfg.memberlistConfig(env.selfID, env.clusterName, delegate{p}, events{p})
	if err != nil {
		return err
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("start memberlist on %s:%d: %w", p.cfg.BindHost, p.cfg.BindPort, err)
	}
	p.ml, p.started, p.gossipAddr = ml, true, ml.LocalNode().Address()
	p.logger.Info("memberlist started",
		slog.String("member", env.selfID), slog.String("gossip", p.gossipAddr),
		slog.Bool("client", env.client), slog.Any("seeds", seeds),
		slog.String("silo_id", FormatID(uint64(p.metaBase.Silo))), slog.String("cluster_id", FormatID(p.form.clusterID)),
		slog.Int("bootstrap_expect", p.form.expect))
	p.signal() // the first sync applies the cluster-identity rule (a seedless node opens at once)
	p.loops.Add(2)
	go p.run()
	go p.rejoinLoop()
	if len(seeds) > 0 {
		p.loops.Add(1)
		go p.joinLoop(seeds)
	}
	return nil
}

// otherSeeds drops seeds naming this node's own gossip address, so a uniform seed list can be
// given to every silo without a silo "joining" itself.
func otherSeeds(seeds []string, selfAddr string, selfHosts ...string) []string {
	_, selfPort, _ := net.SplitHostPort(selfAddr)
	var out []string
	for _, seed := range seeds {
		seed = strings.TrimSpace(seed)
		if seed == "" || seed == selfAddr {
			continue
		}
		host, port, err := net.SplitHostPort(seed)
		if err == nil && port == selfPort && slices.Contains(selfHosts, host) {
			continue
		}
		out = append(out, seed)
	}
	return out
}

// Shutdown implements cluster.ClusterProvider. It stops republishing, leaves the gossip
// cluster when graceful, a silo first announcing that it drains (peers drop this member at
// once instead of detecting a failure and waiting out deadGrace), and
// always shuts memberlist down. It is safe to call more than once and before start; later
// calls return the first call's result.
func (p *Provider) Shutdown(graceful bool) error {
	p.shutdownOnce.Do(func() {
		close(p.stop)
		p.loops.Wait()
		p.mu.Lock()
		ml := p.ml
		p.mu.Unlock()
		if ml == nil {
			return
		}
		var errs []error
		if graceful {
			// A silo announces that it drains before it leaves, unless it did already, so that
			// its peers drop it at once rather than after deadGrace: memberlist's leave event does
			// not tell a leave from a death.
			if !p.env.client && p.gateOpen.Load() && p.draining.CompareAndSwap(false, true) {
				if err := p.announce(); err == nil {
					_ = ml.UpdateNode(p.cfg.LeaveTimeout)
				}
			}
			if err := ml.Leave(p.cfg.LeaveTimeout); err != nil {
				errs = append(errs, fmt.Errorf("memberlist leave: %w", err))
			}
		}
		if err := ml.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("memberlist shutdown: %w", err))
		}
		p.shutdownErr = errors.Join(errs...)
		p.logger.Info("memberlist stopped", slog.String("member", p.env.selfID), slog.Bool("graceful", graceful))
	})
	return p.shutdownErr
}

// Ready is closed once the first topology has been published, which happens only after the
// bootstrap gate opened: this node knows its cluster id (stored, adopted or minted) and it
// created the cluster, has no seed but itself, or sees a live peer of its cluster (doc.go,
// "Bootstrap gating").
func (p *Provider) Ready() <-chan struct{} { return p.ready }

// GossipAddress is this node's memberlist address ("host:port", the chosen port when BindPort
// was 0) for other nodes' Seeds; empty before start.
func (p *Provider) GossipAddress() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gossipAddr
}

// MemberID is the protoactor member id this provider announces; empty before start.
func (p *Provider) MemberID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.env == nil {
		return ""
	}
	return p.env.selfID
}

// Topology returns a copy of the member set protoactor accepted at this provider's last
// publish, sorted by id (empty before the bootstrap gate opens). Unlike
// cluster.MemberList.Members, which protoactor reads without its lock, it is safe to call
// from any goroutine.
func (p *Provider) Topology() []*protocluster.Member {
	p.topologyMu.Lock()
	defer p.topologyMu.Unlock()
	out := make([]*protocluster.Member, len(p.topology))
	for i, m := range p.topology {
		out[i] = proto.Clone(m).(*protocluster.Member)
	}
	return out
}

// isClient reports whether the provider was started by StartClient.
func (p *Provider) isClient() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.env != nil && p.env.client
}

// openGate opens the bootstrap gate once and asks for an immediate publish.
func (p *Provider) openGate(why string) {
	if p.gateOpen.CompareAndSwap(false, true) {
		p.logger.Info("cluster membership gate open", slog.String("member", p.env.selfID), slog.String("reason", why))
		p.signal()
	}
}

// signal asks the run goroutine to republish; it never blocks.
func (p *Provider) signal() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// run republishes on every signal and every resync interval until Shutdown.
func (p *Provider) run() {
	defer p.loops.Done()
	ticker := time.NewTicker(p.cfg.ResyncInterval)
	defer ticker.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-p.changed:
		case <-ticker.C:
		}
		select {
		case <-p.stop:
			return
		default:
		}
		p.sync()
	}
}

// sync applies the cluster-identity rule until the gate opens, then publishes the current
// member set, checks whether this member id is lost (lost.go), and notifies live nodes that
// this member has blocked.
func (p *Provider) sync() {
	if p.isRefused() {
		return
	}
	if p.settleRetired() {
		cause := errRetired(p.cfg.SiloID, p.ClusterID())
		if p.gateOpen.Load() {
			p.fence(cause)
		} else {
			p.refuse(cause)
		}
		return
	}
	view := p.view()
	if !p.gateOpen.Load() && !p.formStep(view) {
		return
	}
	p.announceDraining()
	members, silos, peers := p.members(view)
	topology := p.env.publish(members)
	p.topologyMu.Lock()
	before := p.silos
	p.topology, p.silos = topology, silos
	p.topologyMu.Unlock()
	p.logPeers(before, silos)
	p.readyOnce.Do(func() { close(p.ready) })
	p.checkSelf(slices.ContainsFunc(topology, func(m *protocluster.Member) bool { return m.Id == p.env.selfID }))
	r := p.reachOf(peers)
	p.checkReach(r)
	p.noticeBlocked(peers, r)
	p.noticeRetiredPeers(peers, silos)
}

// logPeers logs each change of the published member set, one line per peer silo that came or
// went (the actor transport's own lines about the connections are DEBUG, see
// actors.ChurnHandler): INFO when it joined or left, WARN when memberlist declared it failed
// (it stopped answering probes: killed, paused, cut off).
func (p *Provider) logPeers(before, after map[string]uint64) {
	for _, id := range slices.Sorted(maps.Keys(after)) {
		if _, known := before[id]; !known && id != p.env.selfID {
			p.logger.Info("peer silo joined", slog.String("peer", id), slog.String("peer_silo_id", FormatID(after[id])))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(before)) {
		if _, still := after[id]; still || id == p.env.selfID {
			continue
		}
		p.nodesMu.Lock()
		state, departed := p.departed[id]
		delete(p.departed, id)
		p.nodesMu.Unlock()
		attrs := []any{slog.String("peer", id), slog.String("peer_silo_id", FormatID(before[id]))}
		if departed && state == memberlist.StateLeft {
			p.logger.Info("peer silo left", attrs...)
			continue
		}
		p.logger.Warn("peer silo unreachable: it stopped answering, its partitions fail over to their other replicas", attrs...)
	}
}

// viewNode is one live memberlist node of this cluster name other than this one.
type viewNode struct {
	meta nodeMeta
	node *memberlistNode
}

// departingNode is a node memberlist declared dead, kept in the view until deadGrace passes.
type departingNode struct {
	node memberlistNode
	at   time.Time
}

// deadGrace is how long a node memberlist declared dead stays in this node's view, unless it
// announced that it drains (a graceful stop): twice memberlist's suspicion timeout and two
// push/pull intervals, so that a refutation memberlist's gossip lost (a refuting node
// retransmits its news to a few random nodes only) comes back through a state exchange or a
// join of the node's address (rejoinLoop) within it. A death is
// gossiped, and relayed by any node that hears it, so a node can be declared dead by others
// than the ones that probed it: in a split, a client that reaches both sides relays one side's
// verdicts to the other, where the silo it names is alive and refutes as soon as the verdict
// reaches it. Protoactor blocks, for good, the id of a member that leaves the topology, so
// without the grace a refuted death would cost that silo its member id (lost.go).
//
// A client waits two push/pull intervals longer than a silo: it never says whom it blocked, so
// a silo it alone blocked would keep the member id the client refuses, and the client could
// not reach it again. Waiting longer, a client drops a silo only after the silos have, and
// their notices make that silo rejoin under a new id, which the client accepts.
func (p *Provider) deadGrace() time.Duration {
	grace := 2*time.Duration(p.cfg.SuspicionMult)*p.cfg.ProbeInterval + 2*p.cfg.PushPullInterval
	if p.env != nil && p.env.client {
		grace += 2 * p.cfg.PushPullInterval
	}
	return grace
}

// view decodes memberlist's live nodes (alive or suspect) of this cluster name, and those
// declared dead within deadGrace, this one excepted, clients included. A dead node whose
// address a live node of another name holds is superseded at once, grace or not: only one
// process binds an address, so the one that listens there now (a silo restarted on its ports,
// or one that rejoined under a new member id) replaced it, and the dead one's refutation
// cannot come.
func (p *Provider) view() []viewNode {
	p.nodesMu.Lock()
	defer p.nodesMu.Unlock()
	now := time.Now()
	var view []viewNode
	add := func(node memberlistNode) {
		meta, err := decodeMeta(node.Meta)
		if err != nil || meta.Cluster != p.env.clusterName || meta.ID == p.env.selfID {
			return
		}
		view = append(view, viewNode{meta: meta, node: &node})
	}
	live := map[string]bool{}
	for _, node := range p.nodes {
		add(node)
		live[node.Address()] = true
	}
	for name, d := range p.departing {
		if now.Sub(d.at) >= p.deadGrace() || live[d.node.Address()] {
			delete(p.departing, name)
			continue
		}
		add(d.node)
	}
	return view
}

// members is the member set to publish: this member (unless a client) and every live
// non-client peer announcing this node's cluster id, sorted by id; the silo id of each; and
// the peers among them. Peers announcing another cluster id are left out (and logged once
// while they stay live); peers with none yet are forming or adopting and left out too.
func (p *Provider) members(view []viewNode) ([]*protocluster.Member, map[string]uint64, map[string]*memberlistNode) {
	var members []*protocluster.Member
	silos := map[string]uint64{}
	peers := map[string]*memberlistNode{}
	if !p.env.client {
		members = append(members, p.metaBase.member())
		silos[p.env.selfID] = uint64(p.metaBase.Silo)
	}
	for id := range p.foreignSeen {
		if !slices.ContainsFunc(view, func(v viewNode) bool { return v.meta.ID == id }) {
			delete(p.foreignSeen, id)
		}
	}
	for _, v := range view {
		switch {
		case v.meta.Client || v.meta.ClusterID == 0:
		case uint64(v.meta.ClusterID) == p.form.clusterID:
			members = append(members, v.meta.member())
			silos[v.meta.ID] = uint64(v.meta.Silo)
			peers[v.meta.ID] = v.node
		case !p.foreignSeen[v.meta.ID]:
			p.foreignSeen[v.meta.ID] = true
			p.logger.Warn("ignoring a member of another cluster", slog.String("member", p.env.selfID),
				slog.String("cluster_id", FormatID(p.form.clusterID)), slog.String("peer", v.meta.ID),
				slog.String("peer_silo_id", FormatID(uint64(v.meta.Silo))), slog.String("peer_cluster_id", FormatID(uint64(v.meta.ClusterID))),
				slog.String("address", v.node.Address()))
		}
	}
	slices.SortFunc(members, func(a, b *protocluster.Member) int { return strings.Compare(a.Id, b.Id) })
	return members, silos, peers
}

// joinLoop keeps this node joined to its seeds until the provider shuts down. It joins them
// at start, retrying with a doubling wait (JoinRetry up to DefaultJoinRetryMax) until one join
// succeeds, and joins them again, with the same backoff, whenever this node has no live peer
// of its cluster id left (see alone): memberlist never contacts a node it declared dead again, so a client
// whose only silo restarted (a new member id at the same address, which does not know the
// client), or a silo whose peers all died and came back, would otherwise stay alone for good.
func (p *Provider) joinLoop(seeds []string) {
	defer p.loops.Done()
	joined := false
	failures := 0
	for {
		delay := p.cfg.ResyncInterval
		if !joined || p.alone() {
			n, err := p.ml.Join(seeds)
			if n > 0 {
				reason := "joined a seed"
				if joined {
					reason = "rejoined a seed after losing every peer"
				}
				p.logger.Info(reason, slog.String("member", p.env.selfID), slog.Int("contacted", n), slog.Int("attempts", failures+1))
				p.setJoinError(nil)
				p.signal()
				joined, failures = true, 0
			} else {
				// One line per change of state: the first failure, and each time the seeds
				// answer something else; the retries in between log at debug.
				level := slog.LevelDebug
				if failures == 0 || p.JoinError() == nil || p.JoinError().Error() != err.Error() {
					level = slog.LevelWarn
				}
				p.setJoinError(err)
				failures++
				p.logger.Log(context.Background(), level, "join failed, retrying",
					slog.String("member", p.env.selfID), slog.Int("attempt", failures), slog.Any("error", err))
				delay = p.cfg.JoinRetry << min(failures-1, 16)
				delay = min(delay, max(DefaultJoinRetryMax, p.cfg.JoinRetry))
			}
		}
		timer := time.NewTimer(delay)
		select {
		case <-p.stop:
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// rejoinLoop joins, once per push/pull interval until the provider shuts down, the addresses of
// the silos memberlist declared dead (failedPeers), so that the two sides of a healed split find
// each other again. It runs apart from joinLoop, so that addresses that time out never delay a
// rejoin of the seeds.
func (p *Provider) rejoinLoop() {
	defer p.loops.Done()
	ticker := time.NewTicker(p.cfg.PushPullInterval)
	defer ticker.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-ticker.C:
			p.rejoinFailed(now)
		}
	}
}

// rejoinFailed joins the addresses of the silos memberlist declared dead (failedPeers.due at
// now): a TCP state exchange with each that answers, which merges both nodes' views.
func (p *Provider) rejoinFailed(now time.Time) {
	addrs := p.failed.due(now, p.Retired)
	if len(addrs) == 0 {
		return
	}
	n, err := p.ml.Join(addrs)
	if n > 0 {
		p.logger.Info("contacted silos memberlist had declared dead", slog.String("member", p.env.selfID),
			slog.Any("addresses", addrs), slog.Int("contacted", n))
		p.signal()
		return
	}
	p.logger.Debug("silos memberlist declared dead do not answer", slog.String("member", p.env.selfID),
		slog.Any("addresses", addrs), slog.Any("error", err))
}

// alone reports whether memberlist knows no live member other than this one that announces
// this node's cluster id (none: no cluster id either); clients do not count.
func (p *Provider) alone() bool {
	own := p.clusterID.Load()
	return !slices.ContainsFunc(p.view(), func(v viewNode) bool { return !v.meta.Client && uint64(v.meta.ClusterID) == own })
}

// JoinError is the error of the last failed join of the seeds (memberlist's, naming each seed
// and what it answered), or nil when the last join succeeded or none was tried yet.
func (p *Provider) JoinError() error {
	p.joinMu.Lock()
	defer p.joinMu.Unlock()
	return p.lastJoinErr
}

func (p *Provider) setJoinError(err error) {
	p.joinMu.Lock()
	defer p.joinMu.Unlock()
	p.lastJoinErr = err
	if err != nil && everySeedRefused(err) {
		p.refusedJoins++
	} else {
		p.refusedJoins = 0
	}
}

// RefusedJoins is how many of the last joins in a row failed because every seed refused the
// connection: nothing listens at the seeds' addresses.
func (p *Provider) RefusedJoins() int {
	p.joinMu.Lock()
	defer p.joinMu.Unlock()
	return p.refusedJoins
}

// everySeedRefused reports whether every seed of a failed join refused the connection.
// memberlist formats each seed's error with %v ("failed to join <addr>: dial tcp ...: connect:
// connection refused"), so the cause is found in its text, not its type.
func everySeedRefused(joinErr error) bool {
	errs := []error{joinErr}
	var multi *multierror.Error
	if errors.As(joinErr, &multi) && len(multi.Errors) > 0 {
		errs = multi.Errors
	}
	for _, e := range errs {
		if !strings.Contains(e.Error(), syscall.ECONNREFUSED.Error()) {
			return false
		}
	}
	return true
}
