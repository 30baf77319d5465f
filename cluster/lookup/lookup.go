package lookup

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	protocluster "github.com/asynkron/protoactor-go/cluster"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// Leadership is what a silo's replicas say about partition leadership.
type Leadership interface {
	// Leads reports whether this silo's replica leads partition n and can propose.
	Leads(n int) bool
	// Leader is the silo id this silo's replica believes leads n; 0 when it knows none.
	Leader(n int) uint64
}

// Config configures a Lookup.
type Config struct {
	// Kind is the partition grains' kind ("partition"); Get resolves only this kind.
	Kind string
	// Leadership is this silo's replicas' view of leadership; nil on a client, which runs no
	// activator.
	Leadership Leadership
	// Silos returns the live silos' actor addresses (host:port) by silo id. Nil: the cluster
	// provider's, when it offers Topology and SiloIDs (cluster.Provider does).
	Silos func() map[uint64]string
	// Logger receives the lookup's logs (nil: slog.Default()).
	Logger *slog.Logger
}

// ActivatorName is the name of each silo's activator actor.
const ActivatorName = "partition-lookup"

// askTimeout bounds one ask of an activator; maxAsks bounds the asks of one Get.
const (
	askTimeout = time.Second
	maxAsks    = 4
)

// Lookup is a protoactor IdentityLookup that places partition grains on their leaders (see
// the package doc). Set it as MemberConfig.IdentityLookup of a silo or client.
type Lookup struct {
	cfg Config
	log *slog.Logger

	cluster   *protocluster.Cluster
	silos     func() map[uint64]string
	activator *actor.PID
	stopOnce  sync.Once

	mu    sync.Mutex
	hints map[int]uint64
}

var _ protocluster.IdentityLookup = (*Lookup)(nil)

// New returns a lookup configured by cfg; protoactor calls its Setup when the cluster starts.
func New(cfg Config) *Lookup {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Lookup{cfg: cfg, log: cfg.Logger.With("lookup", cfg.Kind), hints: map[int]uint64{}}
}

// Setup implements protocluster.IdentityLookup: it spawns this silo's activator unless
// isClient or the config has no Leadership. A failed spawn panics, which NewMember reports as
// a failed start.
func (l *Lookup) Setup(c *protocluster.Cluster, _ []string, isClient bool) {
	l.cluster = c
	l.silos = l.cfg.Silos
	if l.silos == nil {
		l.silos = providerSilos(c, l.log)
	}
	if isClient || l.cfg.Leadership == nil {
		return
	}
	props := actor.PropsFromProducer(func() actor.Actor { return newActivator(c, l.cfg, l.silos, l.log) })
	pid, err := c.ActorSystem.Root.SpawnNamed(props, ActivatorName)
	if err != nil {
		panic(err)
	}
	l.activator = pid
}

// Shutdown implements protocluster.IdentityLookup: it stops the activator, which first stops
// its grains, each after the messages already in its mailbox. Calling it again does nothing.
func (l *Lookup) Shutdown() {
	l.stopOnce.Do(func() {
		if l.activator == nil {
			return
		}
		if err := l.cluster.ActorSystem.Root.PoisonFuture(l.activator).Wait(); err != nil {
			l.log.Error("stopping the partition activator", "err", err)
		}
	})
}

// RemovePid implements protocluster.IdentityLookup: it forgets pid if the cluster's PID cache
// holds it for identity.
func (l *Lookup) RemovePid(identity *protocluster.ClusterIdentity, pid *actor.PID) {
	l.cluster.PidCache.RemoveByValue(identity.GetIdentity(), identity.GetKind(), pid)
}

// Hint records that silo leads partition n (from a not-leader answer); the next Get for n
// asks it first. A zero silo is ignored.
func (l *Lookup) Hint(n int, silo uint64) {
	if silo == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hints[n] = silo
}

func (l *Lookup) hint(n int) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hints[n]
}

// forget drops the hint that silo leads n, if it is still the one recorded.
func (l *Lookup) forget(n int, silo uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hints[n] == silo {
		delete(l.hints, n)
	}
}

// Get implements protocluster.IdentityLookup: the activation of identity on the silo whose
// replica leads it, nil when no silo asked leads (see the package doc).
func (l *Lookup) Get(identity *protocluster.ClusterIdentity) *actor.PID {
	if identity.GetKind() != l.cfg.Kind {
		l.log.Error("the partition lookup resolves only its kind", "kind", identity.GetKind(), "identity", identity.GetIdentity())
		return nil
	}
	n, err := strconv.Atoi(identity.GetIdentity())
	if err != nil || n < 0 {
		l.log.Error("not a partition identity", "identity", identity.GetIdentity())
		return nil
	}
	silos := maps.Clone(l.silos())
	ranked := rank(n, silos)
	asked := map[uint64]bool{}
	next := l.hint(n)
	req := &orreryv1.PartitionActivationRequest{Kind: identity.GetKind(), Identity: identity.GetIdentity()}
	for range maxAsks {
		if _, live := silos[next]; !live || asked[next] {
			next = 0
			for _, silo := range ranked {
				if !asked[silo] {
					next = silo
					break
				}
			}
			if next == 0 {
				break
			}
		}
		asked[next] = true
		reply, err := l.ask(silos[next], req)
		if err != nil {
			l.log.Debug("partition activator did not answer", "partition", n, "silo", next, "err", err)
			l.forget(n, next)
			next = 0
			continue
		}
		if reply.GetPidId() != "" {
			l.Hint(n, next)
			return actor.NewPID(reply.GetPidAddress(), reply.GetPidId())
		}
		next = reply.GetLeaderSilo()
		if _, known := silos[next]; !known && next != 0 && reply.GetLeaderAddress() != "" {
			// A leader this caller's topology has not seen yet (it just rejoined): the
			// answering silo's topology has, so ask it at the address it gave.
			silos[next] = reply.GetLeaderAddress()
		}
		l.Hint(n, next)
	}
	l.log.Debug("no silo asked leads the partition", "partition", n, "asked", len(asked), "silos", len(silos))
	return nil
}

// ask asks the activator at address for req's activation.
func (l *Lookup) ask(address string, req *orreryv1.PartitionActivationRequest) (*orreryv1.PartitionActivationReply, error) {
	res, err := l.cluster.ActorSystem.Root.RequestFuture(actor.NewPID(address, ActivatorName), req, askTimeout).Result()
	if err != nil {
		return nil, err
	}
	reply, ok := res.(*orreryv1.PartitionActivationReply)
	if !ok {
		return nil, errUnexpectedReply{res}
	}
	return reply, nil
}

// errUnexpectedReply is an activator's answer of the wrong type.
type errUnexpectedReply struct{ reply any }

func (e errUnexpectedReply) Error() string {
	return fmt.Sprintf("unexpected activator reply %T", e.reply)
}

// rank orders the ids of silos by a rendezvous hash of (n, silo id), highest first: the silos
// Get asks for partition n, in order, when no hint names its leader.
func rank(n int, silos map[uint64]string) []uint64 {
	ids := make([]uint64, 0, len(silos))
	for id := range silos {
		ids = append(ids, id)
	}
	score := func(silo uint64) uint64 {
		var buf [16]byte
		binary.BigEndian.PutUint64(buf[:8], uint64(n))
		binary.BigEndian.PutUint64(buf[8:], silo)
		h := fnv.New64a()
		_, _ = h.Write(buf[:])
		return h.Sum64()
	}
	slices.SortFunc(ids, func(a, b uint64) int {
		if c := cmp.Compare(score(b), score(a)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return ids
}

// siloDirectory is what providerSilos needs of a cluster provider (cluster.Provider).
type siloDirectory interface {
	Topology() []*protocluster.Member
	SiloIDs() map[string]uint64
}

// providerSilos returns the live silos of c's provider's last published topology by silo id.
func providerSilos(c *protocluster.Cluster, log *slog.Logger) func() map[uint64]string {
	dir, ok := c.Config.ClusterProvider.(siloDirectory)
	if !ok {
		log.Error("the cluster provider names no silo ids; the partition lookup finds no silo", "provider", fmt.Sprintf("%T", c.Config.ClusterProvider))
		return func() map[uint64]string { return nil }
	}
	return func() map[uint64]string {
		ids := dir.SiloIDs()
		silos := map[uint64]string{}
		for _, m := range dir.Topology() {
			if id := ids[m.GetId()]; id != 0 {
				silos[id] = m.Address()
			}
		}
		return silos
	}
}
