package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	protocluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/hashicorp/go-multierror"

	"github.com/orreryhq/orrery/actors"
	"github.com/orreryhq/orrery/cluster/transportauth"
)

// heartbeatExpiration disables protoactor's own gossip-heartbeat failure detector in effect.
// It would block a member (forever) whose heartbeat is 20 s old, e.g. after CPU starvation;
// memberlist is the one failure detector. A zero value does not disable it (zero blocks every
// peer at once), hence a day.
const heartbeatExpiration = 24 * time.Hour

// MemberConfig configures a silo member or a client of an Orrery cluster.
type MemberConfig struct {
	// Name is the cluster name; members and clients of one cluster share it.
	Name string
	// Host is the actor transport (gRPC) address to bind and advertise (default 127.0.0.1).
	Host string
	// Port is the actor transport port; 0 picks a free one, reported by
	// ActorSystem.Address().
	Port int
	// Gossip configures memberlist. Its Logger and LogLevel default to this config's.
	Gossip ProviderConfig
	// Kinds are the grain kinds a member hosts; a client must have none.
	Kinds []*protocluster.Kind
	// RequestTimeout is protoactor's default request timeout (cluster.WithRequestTimeout);
	// zero keeps protoactor's 5 s. actors.Call sets its own per attempt.
	RequestTimeout time.Duration
	// IdentityLookup places grains (nil: protoactor's disthash). cluster/lookup.Lookup places
	// partition grains on their Raft leaders; a client's needs no Leadership.
	IdentityLookup protocluster.IdentityLookup
	// JoinTimeout bounds the wait for the first topology, i.e. for a join of the seeds to
	// succeed and the cluster id to be known (0: until ctx ends). When it passes first, the
	// error names each seed and what it answered, or what the cluster-identity rule waits for.
	JoinTimeout time.Duration
	// TLS secures the actor transport with mutual TLS (nil: none). A silo's certificate must
	// name a silo; a client's names its principal, which every silo puts in the client's
	// requests in place of the one they carry (transportauth).
	TLS *transportauth.Credentials
	// Logger receives protoactor's logs (nil: slog.Default()).
	Logger *slog.Logger
	// LogLevel drops protoactor records below it (nil: actors.DefaultLogLevel, WARN).
	LogLevel slog.Leveler
}

// NewMember starts a silo member: an actor system, protoactor remoting, the cluster with
// cfg.Kinds and the memberlist provider. It returns once the provider has published its first
// topology, i.e. after the bootstrap gate opened (see Provider.Ready), or fails when the
// provider refuses to join (Provider.Refused) or ctx ends first; on failure everything started
// is stopped. cluster.Cluster.StartMember sleeps 1 s unconditionally, so this takes at least 1 s.
func NewMember(ctx context.Context, cfg MemberConfig) (*protocluster.Cluster, *Provider, error) {
	return startCluster(ctx, cfg, false)
}

// NewClient starts a cluster client (protoactor StartClient): it gossips with the members to
// learn the topology, hosts no kinds and is never part of the topology. It returns once it has
// joined and published its first topology (see Provider.Ready), or fails when ctx ends first.
func NewClient(ctx context.Context, cfg MemberConfig) (*protocluster.Cluster, *Provider, error) {
	if len(cfg.Kinds) > 0 {
		return nil, nil, errors.New("a cluster client hosts no kinds")
	}
	return startCluster(ctx, cfg, true)
}

// Shutdown stops a member or client started by NewMember or NewClient.
//
// Member, graceful: protoactor's graceful path, which first calls the provider's
// Shutdown(true) (leave, so peers drop this member at once), stops the placement actor and with
// it the local grains, sleeps 2 s and stops remoting gracefully (protoactor gives gRPC up to
// 10 s). Member, not graceful: memberlist is shut down without leaving (peers detect a failure,
// as after a crash) and protoactor tears down remoting without stopping grains; protoactor's
// own Shutdown(false) would leave memberlist running.
//
// Client: memberlist leaves when graceful and is shut down; the actor system and remoting
// stop. protoactor's Cluster.Shutdown cannot be used for clients: it dereferences gossip state
// that StartClient never creates and panics.
func Shutdown(c *protocluster.Cluster, p *Provider, graceful bool) error {
	if p.isClient() {
		err := p.Shutdown(graceful)
		c.ActorSystem.Shutdown()
		c.Remote.Shutdown(false)
		return err
	}
	if graceful {
		c.Shutdown(true)
		return p.Shutdown(true)
	}
	err := p.Shutdown(false)
	c.Shutdown(false)
	return err
}

// Leave stops a member whose id the cluster no longer accepts (Provider.Lost) so that its silo
// can start a new one on the same ports: memberlist leaves (peers drop the old id at once
// instead of detecting a failure) and shuts down, then protoactor tears down remoting without
// stopping grains (the silo stopped its partition grains already). Unlike Shutdown(c, p, true)
// it does not wait for protoactor's graceful path, which sleeps 2 s and hands grains over.
func Leave(c *protocluster.Cluster, p *Provider) error {
	err := p.Shutdown(true)
	c.Shutdown(false)
	return err
}

// ErrRefused marks an error of NewMember whose cause is that the cluster refuses this silo
// (its data belongs to another cluster, or the silo was retired): starting it again cannot
// succeed.
var ErrRefused = errors.New("refused by the cluster")

func startCluster(ctx context.Context, cfg MemberConfig, client bool) (*protocluster.Cluster, *Provider, error) {
	if cfg.Name == "" {
		return nil, nil, errors.New("cluster name is required")
	}
	if cfg.Host == "" {
		cfg.Host = DefaultBindHost
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	gossip := cfg.Gossip
	gossip.MutualTLS = cfg.TLS != nil
	if gossip.Logger == nil {
		gossip.Logger = cfg.Logger
	}
	if gossip.LogLevel == nil {
		gossip.LogLevel = cfg.LogLevel
	}
	provider, err := NewProvider(gossip)
	if err != nil {
		return nil, nil, err
	}
	creds := cfg.TLS
	if creds != nil {
		switch id := creds.Identity(); {
		case client && id.IsSilo():
			return nil, nil, fmt.Errorf("tls_cert: a cluster client needs a certificate naming a principal, not %s", id)
		case !client && !id.IsSilo():
			return nil, nil, fmt.Errorf("tls_cert: a silo needs a certificate naming a silo, not %s", id)
		}
		creds = creds.WithLogger(cfg.Logger)
		if client {
			creds = creds.ForClient()
		}
	}
	lookup := cfg.IdentityLookup
	if lookup == nil {
		lookup = disthash.New()
	}
	options := []protocluster.ConfigOption{
		protocluster.WithKinds(cfg.Kinds...),
		protocluster.WithHeartbeatExpiration(heartbeatExpiration),
	}
	if cfg.RequestTimeout > 0 {
		options = append(options, protocluster.WithRequestTimeout(cfg.RequestTimeout))
	}

	var c *protocluster.Cluster
	err = recovered(func() {
		system := actor.NewActorSystem(actors.LoggerOption(cfg.Logger.Handler(), cfg.LogLevel))
		config := protocluster.Configure(cfg.Name, provider, lookup, remote.Configure(cfg.Host, cfg.Port, remoteOptions(creds)...), options...)
		c = protocluster.New(system, config)
		if client {
			c.StartClient()
		} else {
			c.StartMember()
		}
	})
	if err != nil {
		abandon(c, provider)
		return nil, nil, fmt.Errorf("start cluster %s on %s:%d: %w", cfg.Name, cfg.Host, cfg.Port, err)
	}
	wait := ctx
	if cfg.JoinTimeout > 0 {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, cfg.JoinTimeout)
		defer cancel()
	}
	// A client stops waiting once its seeds have refused the connection twice in a row
	// (clientRefusedJoins): nothing listens there, and its caller would rather know now.
	var refusedTick <-chan time.Time
	if client {
		ticker := time.NewTicker(refusedPoll)
		defer ticker.Stop()
		refusedTick = ticker.C
	}
	for {
		select {
		case <-refusedTick:
			if provider.RefusedJoins() < clientRefusedJoins {
				continue
			}
			joinErr := provider.JoinError()
			id := c.ActorSystem.ID
			abandon(c, provider)
			return nil, nil, fmt.Errorf("member %s: nothing listens at the seeds (every one refused the connection %d times in a row): %w",
				id, clientRefusedJoins, seedsError(cfg.Name, cfg.Gossip.Seeds, joinErr))
		case <-provider.Ready():
			return c, provider, nil
		case <-provider.Refused():
			id := c.ActorSystem.ID
			abandon(c, provider)
			return nil, nil, fmt.Errorf("member %s (silo %s) refused to join cluster %q: %w (%w)",
				id, FormatID(provider.SiloID()), cfg.Name, provider.RefuseCause(), ErrRefused)
		case <-wait.Done():
			joinErr, waiting := provider.JoinError(), provider.waitingFor()
			id := c.ActorSystem.ID
			abandon(c, provider)
			why := seedsError(cfg.Name, cfg.Gossip.Seeds, joinErr)
			if joinErr == nil && waiting != "" {
				why = fmt.Errorf("joined the seeds %v, but %s", cfg.Gossip.Seeds, waiting)
			}
			if ctx.Err() == nil {
				return nil, nil, fmt.Errorf("member %s did not join within %v: %w", id, cfg.JoinTimeout, why)
			}
			return nil, nil, fmt.Errorf("member %s did not join before the deadline: %w: %w", id, ctx.Err(), why)
		}
	}
}

// clientRefusedJoins is how many joins in a row whose every seed refused the connection make a
// client's start fail before its JoinTimeout; refusedPoll is how often it looks.
const (
	clientRefusedJoins = 2
	refusedPoll        = 50 * time.Millisecond
)

// recovered runs fn and turns a panic (protoactor panics when remoting cannot listen or the
// provider fails to start) into an error.
func recovered(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = e
				return
			}
			err = fmt.Errorf("%v", r)
		}
	}()
	fn()
	return nil
}

// abandon stops whatever a failed start left running, tolerating half-built clusters.
func abandon(c *protocluster.Cluster, p *Provider) {
	_ = p.Shutdown(false)
	if c == nil || c.Remote == nil {
		return
	}
	_ = recovered(func() { _ = Shutdown(c, p, false) })
}

// seedsError describes a failed join: each seed memberlist tried and what it answered, and what
// to check.
func seedsError(clusterName string, seeds []string, joinErr error) error {
	var answers []string
	var multi *multierror.Error
	switch {
	case errors.As(joinErr, &multi):
		for _, e := range multi.Errors {
			answers = append(answers, e.Error())
		}
	case joinErr != nil:
		answers = append(answers, joinErr.Error())
	default:
		answers = append(answers, "no join attempt has finished yet")
	}
	return fmt.Errorf("seeds %v answered: %s (a seed must be the gossip address of a silo, its --gossip-port and not its actor --port, "+
		"in cluster %q: a seed of another cluster name closes the connection, EOF; and with the cluster's gossip key, --gossip-key-file: "+
		"a member with another key or none cannot decrypt or be read)", seeds, strings.Join(answers, "; "), clusterName)
}
