package partition

import (
	"github.com/orreryhq/orrery/actors"
	"log/slog"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/clock"
)

// Kind is the protoactor cluster kind of partition grains; identities are "<n>".
const Kind = "partition"

// Defaults of Config.
const (
	DefaultMaxPending     = 10_000
	DefaultMaxWait        = 30 * time.Second
	DefaultMaxWaiters     = 4096
	DefaultHousekeepEvery = 10 * time.Second
	DefaultCheckEvery     = 10 * time.Minute
)

// Config configures every partition grain of a silo.
type Config struct {
	// Host is the silo's partition replicas, which the grains propose to and read from; its
	// configuration holds the partition count and the state machines' limits.
	Host *Host
	// MaxPending bounds the commands in flight and parked; beyond it the grain answers
	// Unavailable at once (default DefaultMaxPending).
	MaxPending int
	// MaxWait bounds a long-poll receive (default DefaultMaxWait); MaxWaiters bounds how many
	// may wait at once (default DefaultMaxWaiters): one beyond it is answered Unavailable, and
	// its caller retries after a backoff.
	MaxWait    time.Duration
	MaxWaiters int
	// HousekeepEvery is how often the grain runs a Housekeep command (retention of receipts
	// and message tombstones); it repeats at once while one reports more (default
	// DefaultHousekeepEvery).
	HousekeepEvery time.Duration
	// CheckEvery is how often the grain of a partition's leader proposes a CheckConsistency
	// command: every replica hashes its state as of it and the leader compares the checksums
	// (Host.Consistency). Default DefaultCheckEvery; negative: never.
	CheckEvery time.Duration
	// Clock is the time the grain steps its engine at and runs the engine's timers on (default
	// clock.Real()); entries are stamped by the Host's clock, which should be the same.
	Clock clock.Clock
	// OnNextDue receives the partition's earliest due instant after every apply that wrote an
	// earlier one, and on activation. It must not block (the due coordinator's Notify).
	OnNextDue func(*orreryv1.NextDueNotice)
	// Liveness, when set, says what this silo's due coordinator reports of a due record of
	// the partition (nil: neither late nor failing); a schedule inspection carries it. It must
	// not block.
	Liveness func(partition int, kind orreryv1.DueKind, lane *orreryv1.Lane, id string) *orreryv1.DueLiveness
	// SiloApplyVersions, when set, reports the newest apply version each live peer silo
	// announces, by silo id (cluster.Provider.SiloApplyVersions). A partition's leader raises
	// its partition's apply version to the newest one every voter of the group knows, this
	// silo's binary included (batch.KnownApplyVersion); nil: never.
	SiloApplyVersions func() map[uint64]uint32
	// Failpoints arms crash boundaries (default: none).
	Failpoints *Failpoints
	// Pool runs the grains' mailboxes (default: the Host's, which Host.Close closes; a silo
	// shares one with its due coordinator).
	Pool *actors.Pool
	// Registry, when set, tracks live activations for a graceful shutdown.
	Registry *Registry
	// Logger receives the grain's logs (default slog.Default()).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MaxPending <= 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.MaxWait <= 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.MaxWaiters <= 0 {
		c.MaxWaiters = DefaultMaxWaiters
	}
	if c.HousekeepEvery <= 0 {
		c.HousekeepEvery = DefaultHousekeepEvery
	}
	if c.CheckEvery == 0 {
		c.CheckEvery = DefaultCheckEvery
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.OnNextDue == nil {
		c.OnNextDue = func(*orreryv1.NextDueNotice) {}
	}
	if c.Pool == nil && c.Host != nil {
		c.Pool = c.Host.pool
	}
	return c
}
