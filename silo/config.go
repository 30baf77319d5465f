package silo

import (
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/cluster/clockoffset"
	"github.com/orreryhq/orrery/cluster/raftnet"
	"github.com/orreryhq/orrery/cluster/transportauth"
	"github.com/orreryhq/orrery/grains/duecoordinator"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/partition"
	"github.com/orreryhq/orrery/persistence"
)

// Defaults of Config.
const (
	DefaultClusterName = "orrery"
	DefaultPartitions  = 32
	DefaultHost        = "127.0.0.1"
	DefaultPort        = 7381
	DefaultGossipPort  = 7382
	DefaultAdmin       = "127.0.0.1:7380"
	DefaultDataDir     = "./data"
	DefaultOpenTimeout = 30 * time.Second
	DefaultReplicas    = 3
	DefaultDeadAfter   = time.Minute
	DefaultLateAfter   = duecoordinator.DefaultLateAfter
	// DefaultMaxClockOffset is Config.MaxClockOffset's default.
	DefaultMaxClockOffset = clockoffset.DefaultMaxOffset
	// DefaultMinFreeBytes is the free-disk floor of the silo store (Config.Store.MinFreeBytes):
	// four memtables plus 64 MiB.
	DefaultMinFreeBytes = uint64(4*persistence.DefaultMemTableBytes) + 64<<20
)

// Config configures a silo. Start fills zero fields with the defaults; a zero port means a
// free port chosen at start (tests); the cmd/silo flags default to the fixed ports above.
type Config struct {
	// DataDir is the data root: the silo store is <DataDir>/store. One silo uses a data root
	// at a time (the store's directory lock).
	DataDir string
	// ClusterName separates clusters that share a network (default "orrery").
	ClusterName string
	// Host is the loopback or private address the actor transport and gossip bind and
	// advertise (default 127.0.0.1).
	Host string
	// Port is the actor transport port (0: a free port).
	Port int
	// GossipPort is the memberlist port (0: a free port).
	GossipPort int
	// Seeds are gossip addresses of silos to join; every silo of a cluster can be given the
	// same list (a silo ignores its own address).
	Seeds []string
	// BootstrapExpect is how many silos create a new cluster together: a silo whose data dir
	// belongs to no cluster, and that sees no silo of one, waits until it sees this many such
	// silos with the same BootstrapExpect, and the one with the lowest silo id creates the
	// cluster (cluster.ProviderConfig.BootstrapExpect). Zero: 1 without Seeds (other than its
	// own address); with Seeds the silo only joins an existing cluster. A silo whose data dir
	// belongs to a cluster never creates one.
	BootstrapExpect int
	// Partitions is the cluster's partition count (default 32); it must equal the count the
	// data root was created with.
	Partitions int
	// Admin is the admin HTTP address (default 127.0.0.1:7380; "off" disables it; port 0 picks a
	// free one).
	Admin string
	// Limits are the state machines' limits (default input.DefaultLimits()). Start refuses
	// limits whose largest command or reply does not fit the actor transport
	// (cluster.CheckLimits).
	Limits input.Limits
	// Store configures the silo store's Badger database. A zero MinFreeBytes gets
	// DefaultMinFreeBytes (a full disk would otherwise crash the silo): below it the partitions
	// refuse new commands with Unavailable, /readyz answers 503, and closing the store syncs
	// its write-ahead log instead of flushing (persistence.SiloStore.Close).
	Store persistence.Options
	// Failpoints arms crash boundaries (default: none). The silo binary arms them from
	// partition.FailpointEnv; the library reads no environment.
	Failpoints *partition.Failpoints
	// Clock is the wall clock the partitions stamp logged time from and the due coordinator
	// judges what is due by (default clock.Real()). The silo binary offsets it for testing only
	// (ORRERY_CLOCK_OFFSET).
	Clock clock.Clock
	// MaxClockOffset is the bound on this silo's wall-clock offset from its peers' (default
	// DefaultMaxClockOffset; negative disables the judgment, offsets are still measured). The
	// silo measures its offset from every live peer every few seconds over the Raft transport;
	// beyond the bound (the measurement's uncertainty, half the round trip, given the benefit
	// of the doubt) from a strict majority of the silos it sees, itself counted on its side, it
	// is clock-unfit: it hands the leadership of every partition it leads to a fit voter, takes
	// none, and its /readyz answers 503, until it is within the bound again. Logged time is
	// stamped from the leader's clock, so the bound is also how far logged time may run ahead
	// of the cluster's clocks, or stall behind them, because of one silo's clock.
	MaxClockOffset time.Duration
	// RaftFaults drops or delays the Raft traffic between this silo and named silos (default:
	// none; the silo binary reads raftnet.FaultsEnv; see raftnet.ParseFaults).
	RaftFaults *raftnet.Faults
	// RaftFaultsFile names a file the silo follows while it runs, replacing RaftFaults with
	// the ParseFaults spec it holds each time it changes (default: none; the silo binary reads
	// raftnet.FaultsFileEnv; see raftnet.Faults.Follow).
	RaftFaultsFile string
	// Diverge names partitions whose replica on this silo takes, once the silo is ready, a key
	// no state machine writes (partition.Host.Diverge): a test of the consistency checker. The
	// silo binary reads partition.DivergeEnv.
	Diverge []int
	// Replicas is how many replicas each partition has once enough silos are live (default
	// DefaultReplicas); every silo of a cluster must use the same.
	Replicas int
	// FailureProfile names the failure detection profile (FailureProfiles; default
	// DefaultFailureProfile); every silo of a cluster should use the same.
	FailureProfile string
	// DeadAfter is how long a silo must have been missing from the membership before the
	// partitions' leaders remove its replicas and re-create them elsewhere (default
	// DefaultDeadAfter). Until then a replacement replica is added beside it.
	DeadAfter time.Duration
	// OpenTimeout bounds how long Start waits for the silo to join its cluster (its seeds to
	// answer and its cluster id to be known), and then for the partitions' groups to replay and
	// the partitions this silo leads to answer (default DefaultOpenTimeout); past it the silo stops and
	// Start fails with what it waited for, or the first failing partition's reason.
	OpenTimeout time.Duration
	// RequestTimeout bounds one attempt of an internal request (default 2 s).
	RequestTimeout time.Duration
	// ConsistencyCheckEvery is how often each partition's leader checks that its replicas hold
	// the same state (a CheckConsistency entry, every replica's checksum of its state as of it,
	// compared by the leader): default partition.DefaultCheckEvery; negative: never.
	ConsistencyCheckEvery time.Duration
	// LateAfter is the liveness bound (default DefaultLateAfter, 30 s): a schedule or saga
	// whose due instant is further past without an outcome is reported late, and a partition
	// replica of this silo whose group has had no leader for longer is reported without
	// quorum (a log line per change, /metrics, inspection).
	LateAfter time.Duration
	// MetricsSchedules are the schedule ids whose occurrences /metrics counts on their own
	// (orrery_schedule_occurrences_enqueued_total and orrery_schedule_enqueue_lateness_seconds,
	// labelled schedule), at most MaxMetricsSchedules; every other schedule is counted only in
	// the per-partition and silo-wide series. Default none.
	MetricsSchedules []string
	// Logger receives the silo's logs (default slog.Default()); protoactor and memberlist are
	// kept at WARN.
	Logger *slog.Logger
	// InsecureDev runs the silo for development: it starts without the credentials below, and
	// grants every capability on every namespace to client.DefaultPrincipal (a client that names
	// no principal, an admin request without a token when there are no AdminTokens), to
	// ClientPrincipal (the embedder's in-process client) and to Principal (the silo's own).
	InsecureDev bool
	// ClientPrincipal is who the embedder's in-process client (Silo.Client) acts as, under its
	// grants (default client.DefaultPrincipal, which InsecureDev grants everything; with
	// credentials, grant it in Grants). It may not be one of Orrery's own principals
	// (system:...).
	ClientPrincipal string

	// Credentials: Start refuses a silo missing any of them unless InsecureDev (the error names
	// each missing flag; see credentials in auth.go).

	// AdminTokens are the admin endpoint's bearer tokens (ParseAdminTokens, --admin-tokens-file),
	// each bound to the principal its requests act as; not needed with Admin "off".
	AdminTokens []AdminToken
	// GossipKey encrypts the cluster's gossip (cluster.ProviderConfig.SecretKey, 16, 24 or 32
	// bytes; cluster.ParseSecretKey, --gossip-key-file); every silo and client of the cluster
	// needs the same.
	GossipKey []byte
	// Grants are put on every partition (client.PutGrant, as Principal) on every start: before
	// Start returns on the silo that creates the cluster, in the background on the others.
	// Putting them again changes nothing; a grant changed since is put back as configured.
	Grants []*orreryv1.PutGrant
	// TLSCA, TLSCert and TLSKey are the PEM files of mutual TLS on the actor transport
	// (cluster/transportauth): the cluster CA, this silo's certificate, which must name a silo
	// (URI SAN orrery:silo:<name>), and its key. All three or none (an unsecured transport).
	// With them, silos and clients must present certificates of the CA, and a client acts as
	// the principal its certificate names.
	TLSCA, TLSCert, TLSKey string
	// OTLPEndpoint, when set, sends the silo's traces (an emission span per occurrence its due
	// coordinator enqueues; package tracing) to this OTLP/HTTP collector, "host:port" (plain
	// HTTP) or an http:// or https:// URL (path default /v1/traces), as service
	// TraceServiceName. Default empty: no traces.
	OTLPEndpoint string
	// TracerProvider, when set, receives the silo's spans instead (an embedder's or a test's
	// provider; build it with tracing.IDGenerator so emission spans get their derived ids).
	TracerProvider trace.TracerProvider
}

// transportFiles are the TLS files, or the zero Files when none is set.
func (c Config) transportFiles() transportauth.Files {
	return transportauth.Files{CA: c.TLSCA, Cert: c.TLSCert, Key: c.TLSKey}
}

func (c Config) withDefaults() (Config, error) {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.ClusterName == "" {
		c.ClusterName = DefaultClusterName
	}
	if c.Host == "" {
		c.Host = DefaultHost
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.Partitions < 1 || c.Partitions > 4096 {
		return c, fmt.Errorf("partitions: must be between 1 and 4096, got %d", c.Partitions)
	}
	if _, err := endpointOptions(c.OTLPEndpoint); c.OTLPEndpoint != "" && err != nil {
		return c, err
	}
	if c.Port < 0 || c.Port > 65535 || c.GossipPort < 0 || c.GossipPort > 65535 {
		return c, fmt.Errorf("port and gossip port must be between 0 and 65535, got %d and %d", c.Port, c.GossipPort)
	}
	if c.BootstrapExpect < 0 {
		return c, fmt.Errorf("bootstrap expect: must be at least 0, got %d", c.BootstrapExpect)
	}
	if c.Admin == "" {
		c.Admin = DefaultAdmin
	}
	if c.ClientPrincipal == "" {
		c.ClientPrincipal = client.DefaultPrincipal
	}
	if input.IsSystem(c.ClientPrincipal) {
		return c, fmt.Errorf("client principal: %q is one of Orrery's own principals (%s...), which an embedder's client may not act as", c.ClientPrincipal, input.SystemPrincipalPrefix)
	}
	if len(c.MetricsSchedules) > MaxMetricsSchedules {
		return c, fmt.Errorf("metrics schedules: at most %d, got %d", MaxMetricsSchedules, len(c.MetricsSchedules))
	}
	for i, id := range c.MetricsSchedules {
		if err := input.UUID(fmt.Sprintf("metrics_schedules[%d]", i), id); err != nil {
			return c, fmt.Errorf("metrics schedules: %w", err)
		}
	}
	if c.Limits.MaxMutationsPerBatch == 0 {
		c.Limits = input.DefaultLimits()
	}
	if err := cluster.CheckLimits(c.Limits); err != nil {
		return c, err
	}
	if err := input.PriorityStep("limits.priority_step_micros", c.Limits.PriorityStepMicros); err != nil {
		return c, err
	}
	if c.Store.MinFreeBytes == 0 {
		c.Store.MinFreeBytes = DefaultMinFreeBytes
	}
	if c.OpenTimeout <= 0 {
		c.OpenTimeout = DefaultOpenTimeout
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Replicas == 0 {
		c.Replicas = DefaultReplicas
	}
	if c.Replicas < 1 || c.Replicas > 7 {
		return c, fmt.Errorf("replicas: must be between 1 and 7, got %d", c.Replicas)
	}
	if c.DeadAfter <= 0 {
		c.DeadAfter = DefaultDeadAfter
	}
	if c.LateAfter <= 0 {
		c.LateAfter = DefaultLateAfter
	}
	if c.MaxClockOffset == 0 {
		c.MaxClockOffset = DefaultMaxClockOffset
	}
	if c.FailureProfile == "" {
		c.FailureProfile = DefaultFailureProfile
	}
	if _, err := FailureProfileNamed(c.FailureProfile); err != nil {
		return c, err
	}
	if c.RaftFaults == nil {
		c.RaftFaults = &raftnet.Faults{}
	}
	for i, put := range c.Grants {
		if err := grants.Validate(put); err != nil {
			return c, fmt.Errorf("grants[%d]: %w", i, err)
		}
	}
	if err := validateAdminTokens(c.AdminTokens); err != nil {
		return c, err
	}
	switch len(c.GossipKey) {
	case 0, 16, 24, 32:
	default:
		return c, fmt.Errorf("gossip key: must be 16, 24 or 32 bytes, got %d", len(c.GossipKey))
	}
	if err := c.checkCredentials(); err != nil {
		return c, err
	}
	if c.Failpoints == nil {
		c.Failpoints = &partition.Failpoints{}
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	return c, nil
}
