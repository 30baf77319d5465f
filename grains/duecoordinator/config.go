package duecoordinator

import (
	"context"
	"github.com/orreryhq/orrery/actors"
	"log/slog"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/clock"
)

// Partitions is the seam to the partition grains. The silo's implementation sends the requests
// to partition/<n> over the cluster; tests use coordinatortest.Twin. Failures travel either as
// a returned error or in the reply's error field; both are treated alike.
type Partitions interface {
	// ScanDue asks a partition for a bounded oldest-first scan of its due index.
	ScanDue(ctx context.Context, partition int, req *orreryv1.ScanDueRequest) (*orreryv1.ScanDueReply, error)
	// Command submits one batch to a partition.
	Command(ctx context.Context, partition int, req *orreryv1.CommandRequest) (*orreryv1.CommandReply, error)
}

// Defaults used when a Config field is zero.
const (
	// DefaultRefsPerRound is the per-partition budget of one round.
	DefaultRefsPerRound = 256
	// DefaultEmitMax is EmitOccurrences.max.
	DefaultEmitMax = 32
	// DefaultSafetyRescan is the longest an owned partition goes without a scan.
	DefaultSafetyRescan = 30 * time.Second
	// DefaultRequestTimeout bounds one ScanDue or Command call.
	DefaultRequestTimeout = 5 * time.Second
	// DefaultWorkers is how many partitions are served at once.
	DefaultWorkers = 2
	// DefaultLateAfter is how far past its due instant a record may be before it is late.
	DefaultLateAfter = 30 * time.Second
	// MaxRefsPerRound caps RefsPerRound: one round's refs go in one batch, and a partition's
	// default MaxMutationsPerBatch is 256.
	MaxRefsPerRound = 256
)

// Config configures a Coordinator.
type Config struct {
	// Partitions reaches the partition grains (required).
	Partitions Partitions
	// Clock drives every timer and backoff (default clock.Real()).
	Clock clock.Clock
	// CommandIDPrefix names this coordinator's commands in logs and receipts (the silo id,
	// say): command ids are CommandIDPrefix + "-" + a counter from 1. Due commands keep no
	// inbox entry, so a reused id is harmless. Empty means "coordinator-" and the clock's start
	// instant in hexadecimal nanoseconds.
	CommandIDPrefix string
	// RefsPerRound is the per-partition budget of one round: ScanDue's max_refs and the most
	// mutations in one batch (default DefaultRefsPerRound, at most MaxRefsPerRound).
	RefsPerRound int
	// EmitMax is EmitOccurrences.max (default DefaultEmitMax; a partition caps it at 32).
	EmitMax uint32
	// SafetyRescan is how long an owned partition may go without a scan (default 30 s).
	SafetyRescan time.Duration
	// RequestTimeout bounds each ScanDue and Command call (default 5 s).
	RequestTimeout time.Duration
	// Logger receives warnings about failing partitions (default slog.Default()).
	Logger *slog.Logger
	// Workers is how many partitions are served at once (default 2).
	Workers int
	// Pool runs the dispatches of due refs (default: a pool of the coordinator's own, which
	// Stop closes; a silo shares one with its partition grains and closes it itself).
	Pool *actors.Pool
	// LateAfter is how far past its due instant, by its partition's logged time, a record
	// seen due may be before the watchdog reports it late (default DefaultLateAfter).
	LateAfter time.Duration
	// TracerProvider, when set, receives an emission span per enqueued occurrence (package
	// tracing; build it with tracing.IDGenerator so the spans get their derived ids).
	TracerProvider trace.TracerProvider
}

// withDefaults fills zero fields.
func (cfg Config) withDefaults() Config {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.CommandIDPrefix == "" {
		cfg.CommandIDPrefix = "coordinator-" + strconv.FormatInt(cfg.Clock.Now().UnixNano(), 16)
	}
	if cfg.RefsPerRound <= 0 {
		cfg.RefsPerRound = DefaultRefsPerRound
	}
	if cfg.RefsPerRound > MaxRefsPerRound {
		cfg.RefsPerRound = MaxRefsPerRound
	}
	if cfg.EmitMax == 0 {
		cfg.EmitMax = DefaultEmitMax
	}
	if cfg.SafetyRescan <= 0 {
		cfg.SafetyRescan = DefaultSafetyRescan
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Pool == nil {
		cfg.Pool = actors.NewPool(actors.DefaultPoolIdle)
	}
	if cfg.LateAfter <= 0 {
		cfg.LateAfter = DefaultLateAfter
	}
	return cfg
}

// Stats are the coordinator's counters since New, and the state of each owned partition.
type Stats struct {
	// Rounds counts partition services (one scan sequence and at most one dispatch each).
	Rounds uint64
	// Scans counts ScanDue calls.
	Scans uint64
	// CommandsSent counts Command calls, retries included.
	CommandsSent uint64
	// RefsDispatched counts refs sent in commands (a retry with the same id is not counted).
	RefsDispatched uint64
	// StaleIgnored counts refs answered TokenInvalidated, RevisionConflict or NotFound.
	StaleIgnored uint64
	// RefsSkipped counts refs that failed for a lasting reason (Expired, Validation, a full
	// lane, ...) and were put on backoff.
	RefsSkipped uint64
	// Retries counts Command calls repeated with the same command id.
	Retries uint64
	// Errors counts failed rounds and unexpected per-ref failures.
	Errors uint64
	// LivenessChanges counts the watchdog's state changes (a record became late or failing,
	// or recovered).
	LivenessChanges uint64
	// Partitions describes each owned partition, by partition number.
	Partitions []PartitionStats
}

// PartitionStats is the coordinator's view of one owned partition.
type PartitionStats struct {
	// Partition is the partition number.
	Partition int
	// NextDueAt is the partition's next due instant as last reported by a scan or hint (zero
	// when none is known).
	NextDueAt time.Time
	// TimerAt is when the partition will next be served (zero while queued or in a round).
	TimerAt time.Time
	// Queued and InFlight say the partition waits for a worker or is being served.
	Queued, InFlight bool
	// ConsecutiveFailures counts failed rounds since the last good one.
	ConsecutiveFailures int
	// SkippedRefs is how many refs are on backoff.
	SkippedRefs int
	// ActivationEpoch is the partition's activation epoch from its last reply or hint.
	ActivationEpoch uint64
	// LateRecords and FailingRecords count the partition's records the watchdog reports
	// late and failing (see Coordinator.Liveness; at most MaxWatchedRecords in all).
	LateRecords, FailingRecords int
}
