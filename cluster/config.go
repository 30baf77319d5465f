package cluster

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/memberlist"
)

// Failure-detection defaults, tuned for loopback and LAN silos of one host. With them memberlist
// declares a SIGKILLed member dead in about 1.5–2 s: it is probed within one or two probe
// intervals (400 ms each, round robin over the peers), the probe fails at the end of its
// interval (direct ping with a 200 ms timeout, then an indirect ping and a TCP fallback), and
// the suspicion then lasts SuspicionMult × ProbeInterval = 1.2 s (memberlist's minimum for
// clusters under 10 nodes; Lifeguard's confirmation speed-up needs more peers than we have).
// Memberlist DefaultLocalConfig needs about 4 s. Shorter settings detect faster but turn more
// CPU stalls into false deaths, and with protoactor a false death is permanent for the member
// id: it is blocked and the silo rejoins under a new one (see Lost).
const (
	DefaultProbeInterval  = 400 * time.Millisecond
	DefaultProbeTimeout   = 200 * time.Millisecond
	DefaultSuspicionMult  = 3
	DefaultGossipInterval = 50 * time.Millisecond
	// DefaultPushPullInterval is how often a node exchanges its full state with one live peer
	// over TCP. Memberlist's local default is 15 s; an exchange is what tells a node that its
	// peers declared it dead while it was cut off, paused or too slow (so that it refutes, or
	// loses its member id and rejoins), so 15 s was how long a healed silo could stay unlisted.
	// The state of a cluster of tens of nodes is a few KB.
	DefaultPushPullInterval = 2 * time.Second
	DefaultResyncInterval   = time.Second
	DefaultJoinRetry        = 200 * time.Millisecond
	DefaultJoinRetryMax     = 2 * time.Second
	DefaultLeaveTimeout     = 2 * time.Second
	DefaultBindHost         = "127.0.0.1"
)

// ProviderConfig configures the memberlist provider. Zero fields take the defaults above.
type ProviderConfig struct {
	// Build, for a silo, names what of its binary decides how it applies entries (its zone
	// rules release and cron evaluator version, "tzdata 2025c, cron 1"); peers list it
	// (Provider.SiloBuilds). Keep it short: it travels in the node metadata (512 bytes in all).
	Build string
	// ApplyVersion, for a silo, announces the newest apply version its binary knows
	// (batch.KnownApplyVersion): a partition's leader raises the partition's version only to
	// one every voter announces (Provider.SiloApplyVersions).
	ApplyVersion uint32
	// MutualTLS, for a silo, announces that its actor transport requires mutual TLS (NewMember
	// sets it from MemberConfig.TLS), so that a client dialing without a certificate can say
	// so at once (Provider.SilosRequiringTLS) instead of timing out.
	MutualTLS bool
	// BindHost is the gossip address, used for both UDP and TCP (default 127.0.0.1). It is also
	// advertised unless AdvertiseHost is set, so it must be an address peers can reach, not a
	// wildcard.
	BindHost string
	// BindPort is the gossip port; 0 picks a free one (see Provider.GossipAddress).
	BindPort int
	// AdvertiseHost, when set, is the gossip address announced to peers instead of BindHost.
	AdvertiseHost string
	// Seeds are gossip addresses ("host:port") of other nodes to join. Entries naming this
	// node's own gossip address are ignored.
	Seeds []string

	// SiloID is the member's stable silo id (persistence.SiloStore.SiloID), announced in its
	// metadata; zero: a random id for this provider (members without a store, tests). Clients
	// announce none.
	SiloID uint64
	// ClusterID is the id of the cluster the member's store says it belongs to; zero: none yet,
	// and the member adopts or creates one (doc.go, "Cluster identity"). A member with a cluster
	// id only ever joins peers of that cluster.
	ClusterID uint64
	// BootstrapExpect is how many silos create a new cluster together: a member with no cluster
	// id that sees no peer with one waits until it sees this many members with no cluster id
	// and the same BootstrapExpect (itself included), and the one with the lowest silo id among
	// them mints the cluster id. Zero: 1 for a member with no seed other than itself; with
	// seeds, the member never creates a cluster and only joins an existing one. Every founding
	// silo must be given the same value, the number of silos started to form the cluster.
	BootstrapExpect int
	// OnClusterID, when set, is called with a cluster id this member has just minted (minted
	// true: it creates the cluster) or adopted, from the provider's goroutine, before the
	// member announces it or publishes any topology: the silo persists it there
	// (persistence.SiloStore.SetClusterID) and, when it creates the cluster, creates the
	// partitions' Raft groups. An error refuses the start (see Provider.Refused). It is not
	// called for a ClusterID given in the config.
	OnClusterID func(clusterID uint64, minted bool) error
	// Retired are the silos the member's store records as retired from its cluster
	// (persistence.SiloStore.RetiredSilos; see retired.go). A member whose own SiloID is among
	// them refuses to start.
	Retired []uint64
	// OnRetired, when set, persists the retired silos this member knows (all of them, ascending:
	// persistence.SiloStore.RecordRetired) before it acts on them: called by Provider.Retire,
	// and from the provider's goroutine for those peers reported. An error fails the Retire;
	// peers' reports are retried at the next sync.
	OnRetired func(retired []uint64) error

	// ProbeInterval is memberlist's failure-probe period (default 400 ms).
	ProbeInterval time.Duration
	// ProbeTimeout is how long a direct probe waits for an ack (default 200 ms).
	ProbeTimeout time.Duration
	// SuspicionMult scales how long a suspected node may refute before it is declared dead
	// (default 3, i.e. 3 probe intervals for clusters under 10 nodes).
	SuspicionMult int
	// GossipInterval is memberlist's gossip period (default 50 ms).
	GossipInterval time.Duration
	// PushPullInterval is memberlist's period of full state exchanges with one random live
	// peer (default DefaultPushPullInterval).
	PushPullInterval time.Duration

	// ResyncInterval is how often the full member set is republished even without events
	// (default 1 s).
	ResyncInterval time.Duration
	// JoinRetry is the first wait between failed joins; it doubles up to 2 s (default 200 ms).
	JoinRetry time.Duration
	// LeaveTimeout bounds the wait for the leave broadcast in a graceful Shutdown (default 2 s).
	LeaveTimeout time.Duration

	// SecretKey, when set, enables memberlist's AES-GCM encryption of all gossip; it must be 16,
	// 24 or 32 bytes, and every node of the cluster needs the same key.
	SecretKey []byte

	// Logger receives the provider's and memberlist's logs (nil: slog.Default()).
	Logger *slog.Logger
	// LogLevel drops memberlist's records below it (nil: WARN). The provider's own records,
	// one per change of state (a peer silo joined, left or failed; the join), pass at their level.
	LogLevel slog.Leveler
	// OnFenced, when set, is called once, in its own goroutine, when this member fences itself
	// because its silo was retired (see Provider.Fenced).
	OnFenced func(cause error)
	// OnLost, when set, is called once, in its own goroutine, when the cluster no longer accepts
	// this member id (see Provider.Lost): the silo rejoins under a new one.
	OnLost func(cause error)

	// tuneMemberlist, when set, changes memberlist's configuration last (tests: a transport
	// that drops packets, slower state exchanges).
	tuneMemberlist func(*memberlist.Config) error
}

// withDefaults fills zero fields and validates the rest.
func (c ProviderConfig) withDefaults() (ProviderConfig, error) {
	if c.BindHost == "" {
		c.BindHost = DefaultBindHost
	}
	if c.BindPort < 0 || c.BindPort > 65535 {
		return c, fmt.Errorf("gossip BindPort %d out of range", c.BindPort)
	}
	if c.ProbeInterval <= 0 {
		c.ProbeInterval = DefaultProbeInterval
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	if c.ProbeTimeout > c.ProbeInterval {
		return c, fmt.Errorf("gossip ProbeTimeout %v exceeds ProbeInterval %v", c.ProbeTimeout, c.ProbeInterval)
	}
	if c.SuspicionMult <= 0 {
		c.SuspicionMult = DefaultSuspicionMult
	}
	if c.GossipInterval <= 0 {
		c.GossipInterval = DefaultGossipInterval
	}
	if c.PushPullInterval <= 0 {
		c.PushPullInterval = DefaultPushPullInterval
	}
	if c.ResyncInterval <= 0 {
		c.ResyncInterval = DefaultResyncInterval
	}
	if c.JoinRetry <= 0 {
		c.JoinRetry = DefaultJoinRetry
	}
	if c.LeaveTimeout <= 0 {
		c.LeaveTimeout = DefaultLeaveTimeout
	}
	switch len(c.SecretKey) {
	case 0, 16, 24, 32:
	default:
		return c, fmt.Errorf("gossip SecretKey must be 16, 24 or 32 bytes, not %d", len(c.SecretKey))
	}
	if c.BootstrapExpect < 0 {
		return c, fmt.Errorf("BootstrapExpect %d is negative", c.BootstrapExpect)
	}
	if c.SiloID == 0 {
		id, err := randomID()
		if err != nil {
			return c, fmt.Errorf("create a silo id: %w", err)
		}
		c.SiloID = id
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// memberlistConfig builds memberlist's configuration for the node named nodeName in the
// cluster clusterName. The cluster name is also memberlist's packet label, so gossip of two
// clusters sharing addresses never mixes.
func (c ProviderConfig) memberlistConfig(nodeName, clusterName string, delegate memberlist.Delegate, events memberlist.EventDelegate) (*memberlist.Config, error) {
	if len(clusterName) > memberlist.LabelMaxSize {
		return nil, fmt.Errorf("cluster name longer than %d bytes", memberlist.LabelMaxSize)
	}
	mc := memberlist.DefaultLocalConfig()
	mc.Name = nodeName
	mc.Label = clusterName
	mc.BindAddr = c.BindHost
	mc.BindPort = c.BindPort
	mc.AdvertiseAddr = c.AdvertiseHost
	mc.AdvertisePort = c.BindPort // memberlist replaces it with the chosen port when BindPort is 0
	mc.ProbeInterval = c.ProbeInterval
	mc.ProbeTimeout = c.ProbeTimeout
	mc.SuspicionMult = c.SuspicionMult
	mc.GossipInterval = c.GossipInterval
	mc.PushPullInterval = c.PushPullInterval
	mc.SecretKey = c.SecretKey
	mc.Delegate = delegate
	mc.Events = events
	mc.Logger = newMemberlistLogger(c.Logger)
	if c.tuneMemberlist != nil {
		if err := c.tuneMemberlist(mc); err != nil {
			return nil, err
		}
	}
	return mc, nil
}
