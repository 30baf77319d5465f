package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	protocluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/actors"
	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/cluster/lookup"
	"github.com/orreryhq/orrery/cluster/transportauth"
)

// DialConfig configures Dial.
type DialConfig struct {
	// Seeds are gossip addresses ("host:port") of silos; at least one is required.
	Seeds []string
	// ClusterName must match the silos' (default "orrery").
	ClusterName string
	// Host is the loopback or private address this client binds and advertises for its actor
	// transport and gossip (default 127.0.0.1); ports are chosen free.
	Host string
	// Partitions is the cluster's partition count; zero asks the cluster (partition 0).
	Partitions int
	// GossipKey is the cluster's gossip encryption key (silo.Config.GossipKey,
	// cluster.ParseSecretKey); empty for a cluster whose gossip is not encrypted.
	GossipKey []byte
	// AttemptTimeout bounds one request attempt (default 2 s).
	AttemptTimeout time.Duration
	// JoinTimeout bounds joining the cluster through Seeds (default DefaultJoinTimeout). Dial
	// fails once it passes (or ctx ends first) with an Unavailable error naming each seed and
	// what it answered: not a gossip port, another cluster's name. When every seed refuses the
	// connection twice in a row (nothing listens there, about 0.3 s), Dial fails at once.
	JoinTimeout time.Duration
	// TLSCA, TLSCert and TLSKey are the PEM files of mutual TLS on the actor transport
	// (cluster/transportauth), as the silos have them: the cluster CA, this client's
	// certificate, which names its principal (URI SAN orrery:principal:<p> or common name), and
	// its key. All three or none. With them the client acts as its certificate's principal:
	// Options.Principal is ignored (Dial sets it to the certificate's), and the silos overwrite
	// the principal of every request with the certificate's whatever it carries.
	TLSCA, TLSCert, TLSKey string
	// Options configure the client (principal, retries, logger). Options.Logger also receives
	// the cluster layer's records (protoactor, memberlist, the membership provider), all at
	// DEBUG with their own level in "logged_level": the connection errors of a silo restart are
	// retried through by the calls. When it is nil those go to slog.Default() (which drops
	// DEBUG by default) while the client's own diagnostics are discarded. When Options.Limits is nil,
	// Dial asks partition 0 for the cluster's limits (DefaultLimits when it reports none).
	Options Options
}

// DefaultJoinTimeout is DialConfig.JoinTimeout's default.
const DefaultJoinTimeout = 5 * time.Second

// Dial joins the cluster as a client (a member with no kinds, never in the topology) and
// returns a Client whose calls reach the partition grains. Close leaves the cluster.
func Dial(ctx context.Context, cfg DialConfig) (*Client, error) {
	if len(cfg.Seeds) == 0 {
		return nil, orrery.Invalid("seeds", "at least one silo gossip address is required")
	}
	if cfg.ClusterName == "" {
		cfg.ClusterName = "orrery"
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.JoinTimeout <= 0 {
		cfg.JoinTimeout = DefaultJoinTimeout
	}
	logger := cfg.Options.Logger
	if logger == nil {
		logger = slog.Default()
	}
	// The cluster layer logs at DEBUG: the connection errors of a silo restart are retried
	// through by the calls, and the client's own state changes (Worker) are what to read.
	logger = slog.New(actors.NewDemoteHandler(logger.Handler(), slog.LevelDebug))
	var creds *transportauth.Credentials
	if files := (transportauth.Files{CA: cfg.TLSCA, Cert: cfg.TLSCert, Key: cfg.TLSKey}); files.Enabled() {
		var err error
		if creds, err = transportauth.Load(files); err != nil {
			return nil, err
		}
		if creds.Identity().IsSilo() {
			return nil, orrery.Invalid("tls_cert", "names %s: a client's certificate names its principal", creds.Identity())
		}
		cfg.Options.Principal = creds.Identity().Principal
	}
	c, provider, err := cluster.NewClient(ctx, cluster.MemberConfig{
		Name: cfg.ClusterName, Host: cfg.Host, Logger: logger, JoinTimeout: cfg.JoinTimeout, TLS: creds,
		Gossip:         cluster.ProviderConfig{BindHost: cfg.Host, Seeds: cfg.Seeds, SecretKey: cfg.GossipKey, Logger: logger},
		IdentityLookup: lookup.New(lookup.Config{Kind: cluster.PartitionKind, Logger: logger}),
	})
	if err != nil {
		return nil, orrery.Wrap(orrery.CodeUnavailable, err, "dial cluster %q", cfg.ClusterName)
	}
	closer := func() error { return cluster.Shutdown(c, provider, true) }
	if silos := provider.SilosRequiringTLS(); creds == nil && len(silos) > 0 {
		_ = closer()
		return nil, orrery.Invalid("tls_cert",
			"the silos of cluster %q require mutual TLS on their actor transport (silo %s announces it), and this client has no certificate: dial with the cluster's CA and a client certificate (DialConfig.TLSCA, TLSCert and TLSKey; orrery --tls-ca, --tls-cert and --tls-key)",
			cfg.ClusterName, cluster.FormatID(silos[0]))
	}
	partitions := cfg.Partitions
	if partitions == 0 || cfg.Options.Limits == nil {
		discovered, limits, err := discover(ctx, c, cfg.AttemptTimeout)
		if err != nil {
			_ = closer()
			return nil, err
		}
		if partitions == 0 {
			partitions = discovered
		}
		if cfg.Options.Limits == nil {
			cfg.Options.Limits = &limits
		}
	}
	t := &dialedTransport{PartitionTransport: cluster.NewPartitionTransport(c, partitions, cfg.AttemptTimeout), close: closer}
	cl := New(t, cfg.Options)
	if creds != nil {
		cl.certPrincipal = cl.principal
	}
	return cl, nil
}

// discover asks partition 0 for the cluster's partition count and command limits (DefaultLimits
// when it reports none), retrying until ctx ends (the silos may still be starting).
func discover(ctx context.Context, c *protocluster.Cluster, attempt time.Duration) (int, Limits, error) {
	transport := cluster.NewPartitionTransport(c, 1, attempt)
	defer transport.Close()
	status, err := New(transport, Options{}).PartitionStatus(ctx, 0)
	if err != nil {
		return 0, Limits{}, fmt.Errorf("ask partition 0 for the partition count and limits: %w", err)
	}
	if status.GetPartitions() < 1 {
		return 0, Limits{}, orrery.Errorf(orrery.CodeInternal, "partition 0 reported %d partitions", status.GetPartitions())
	}
	limits, ok := limitsOf(status.GetCommandLimits())
	if !ok {
		limits = DefaultLimits()
	}
	return int(status.GetPartitions()), limits, nil
}

// dialedTransport is a cluster transport that leaves the cluster on Close.
type dialedTransport struct {
	*cluster.PartitionTransport
	close func() error
}

// Close leaves the cluster.
func (t *dialedTransport) Close() error {
	if t.close == nil {
		return errors.New("already closed")
	}
	_ = t.PartitionTransport.Close()
	err := t.close()
	t.close = nil
	return err
}

var _ Transport = (*dialedTransport)(nil)
