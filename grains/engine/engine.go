package engine

import (
	"log/slog"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// State is the partition's state on this replica, as the engine reads it.
type State interface {
	// View runs fn on a consistent read of the partition's keys.
	View(fn func(kv.Reader) error) error
	// Applied is the index and logged time of the last entry applied to the state.
	Applied() (index uint64, loggedMicros int64)
	// Term is the partition's Raft term as this replica knows it.
	Term() uint64
}

// Config configures an Engine. Every field is required; the driver resolves its defaults.
type Config struct {
	// Partition is the partition's number and Partitions the cluster's partition count.
	Partition, Partitions int
	// Applier checks waiting receives and housekeeping as the partition's applies would.
	Applier batch.Applier
	// MaxPending bounds the commands in flight and parked; beyond it a command is answered
	// Unavailable.
	MaxPending int
	// MaxWaiters bounds the parked long-poll receives, and MaxWait each one's wait.
	MaxWaiters int
	MaxWait    time.Duration
	// HousekeepEvery is how often the engine proposes a Housekeep command when something has
	// expired; it proposes the next at once while one reports more.
	HousekeepEvery time.Duration
	// CheckEvery is how often the engine proposes a CheckConsistency command (0: never).
	CheckEvery time.Duration
	// Limits are this silo's configured limits: on Open the engine proposes them (SetLimits)
	// when the partition applies under others (zero: never). Applier.Limits are replaced by
	// the partition's own.
	Limits input.Limits
	// VotersApplyVersion, when set, reports the newest apply version every voter of the
	// partition's group knows (each silo announces its binary's), or false while a voter's is
	// not known: a leader raises the partition's apply version to it (SetApplyVersion). Nil:
	// never (a twin, a test).
	VotersApplyVersion func() (uint32, bool)
	// Logger receives the engine's warnings.
	Logger *slog.Logger
}

// Bounds of the engine's reads and memory.
const (
	// dueHeadAhead is how far past the read time a due head is loaded: the head is read from
	// the store again about this often when due entries keep coming.
	dueHeadAhead = 4_000_000 // µs
	// dueHeadEntries bounds the due head (about 200 bytes an entry).
	dueHeadEntries = 4096
	// MaxScanRefs bounds one ScanDue.
	MaxScanRefs = 4096
	// MaxVisibilityFloors bounds the visibility indexes (a queue's priority bands each count)
	// whose floors the engine, and a partition's state machine, remember (NewVisibilityFloors).
	MaxVisibilityFloors = 4096
	// HousekeepRecords bounds one housekeeping command.
	HousekeepRecords = 5000
)

// HousekeepingPrincipal is the principal of the engine's own housekeeping commands.
const HousekeepingPrincipal = input.SystemPrincipalPrefix + "housekeeping"

// Engine is one partition grain's logic. It is not safe for concurrent use: one driver steps
// it, one event at a time.
type Engine struct {
	cfg   Config
	state State

	stopped bool
	// failed is why the host failed (nil while it has not): the engine answers what is in
	// flight and goes on answering, since every proposal is refused from then on.
	failed error

	// nextRef numbers the proposals handed out in Ready.Propose; proposing holds them until
	// their Proposed event, inflight holds the accepted ones by log index.
	nextRef   uint64
	proposing map[uint64]*pending
	inflight  map[uint64]*pending
	waiters   []*pending
	// leasing counts the waiting receives proposed (lease) and not answered, by waitKey;
	// abandoned holds the waiting receives their callers abandoned, by waitKey, until when a
	// late copy of one is still refused (rememberAbandoned).
	leasing   map[string]int
	abandoned map[string]time.Time
	// carried counts the parked receives that entries in flight carry (pending.attached).
	carried int
	// applyVersion is the partition's apply version as the engine last read it (on Open, after
	// a snapshot, and when it raises it): it carries waiting receives in entries only from
	// batch.ApplyVersionWaitingInEntry.
	applyVersion uint32

	// dueFloor is an instant no due-index entry is earlier than (0: unknown, scan from the
	// start). Scans start there: the index behaves like a queue, and an LSM iterator starting
	// at its front would step over every entry deleted since the last compaction.
	dueFloor int64
	// dueTold is the latest instant the due coordinator is known to wake at or before, from
	// the last next-due notice or due scan (input.MaxInstantMicros: nothing it knows of; 0:
	// unknown). An apply that writes an earlier due entry sends a notice; later entries need
	// none, because the coordinator wakes by then, scans, and learns them.
	dueTold int64
	// head is the front of the due index in memory, as of the last Applied event.
	head *due.Head
	// readFloors replicates the state machine's visibility floors for the engine's own reads
	// of the visibility indexes (a parked receive's check, the wait timer), which would
	// otherwise step over every leased and acked entry since the last compaction. It is as of
	// the last Applied event; a read meanwhile may miss a message written below a floor by a
	// later entry, and that entry's Applied event checks the waiters again.
	readFloors *kv.Floors
	// nextVisible holds, per waited queue (by keys.QueuePrefix), when it next has a visible
	// message, so that the wait timer and the Applied events need not read the visibility
	// index for every waiter each time (see visibleHint).
	nextVisible map[string]visibleHint
	// housekeeping is set while a Housekeep command is proposed and not answered.
	housekeeping bool
	// steppingVersion is set while the engine's SetApplyVersion command is in flight.
	steppingVersion bool
	// checking is set while a CheckConsistency command is proposed and not answered.
	checking bool

	ready Ready
}

// pending is a command proposed and not yet applied, or a parked long-poll receive.
type pending struct {
	req  *orreryv1.CommandRequest
	from any // where the reply goes; nil for the engine's own housekeeping command
	// housekeep, check, limits, zones and version mark the engine's own Housekeep,
	// CheckConsistency, SetLimits, RefreshZoneRules and SetApplyVersion commands, whose replies
	// it takes itself.
	housekeep, check, limits, zones, version bool
	deadline                                 time.Time // a parked receive's end of wait
	// queue is a parked receive's queue, its keys.QueuePrefix (the key of its visibility hint).
	queue string
	// leasing marks a waiting receive proposed once its queue had a visible message (lease),
	// or carried by another command's entry (attached).
	leasing bool
	// attached are the parked receives this command's entry carries (PartitionCommand.waiting).
	// solo marks a parked receive whose carrying entry failed as a whole: it is not carried
	// again, only proposed on its own.
	attached []*pending
	solo     bool
	// admitted is when the command arrived, proposedAt when its proposal was accepted, and
	// woken when a waiting receive was proposed (lease): the instants of Ready.Stages.
	admitted, proposedAt, woken time.Time
	index                       uint64 // the accepted proposal's log index and term
	term                        uint64
}

// New returns the engine of a partition whose replica state is state. Step it with Open first.
func New(cfg Config, state State) *Engine {
	return &Engine{
		cfg: cfg, state: state,
		proposing:   map[uint64]*pending{},
		inflight:    map[uint64]*pending{},
		leasing:     map[string]int{},
		nextVisible: map[string]visibleHint{},
		abandoned:   map[string]time.Time{},
		head:        due.NewHead(dueHeadEntries),
		readFloors:  NewVisibilityFloors(),
	}
}

// Ready is what the engine wants done after a Step, in this order: send Replies (and hit the
// reply-sent failpoint when AnsweredApplied), hand Notices to the due coordinator, arm Timers,
// then propose each of Propose and step its Proposed.
type Ready struct {
	Replies []Reply
	// AnsweredApplied is set when Replies answer commands whose entries applied.
	AnsweredApplied bool
	Notices         []*orreryv1.NextDueNotice
	Timers          []Timer
	Propose         []Propose
	// Scanned answers a ScanDue event (nil after any other).
	Scanned *orreryv1.ScanDueReply
	// Stages are the timings of the commands this step answered after their entries applied
	// (the engine's own housekeeping commands aside).
	Stages []StageTiming
}

// Stage names a span of a command's life on the partition, timed in Ready.Stages.
type Stage int

// The stages the engine times, each ending when the command's applied entry answers it.
const (
	// StageApply runs from the accepted proposal: the Raft rounds that persist, commit and
	// apply the entry.
	StageApply Stage = iota + 1
	// StageCommand runs from the arrival of a command that is neither a due command nor a
	// long poll.
	StageCommand
	// StageDue runs from the arrival of a due coordinator's due command.
	StageDue
	// StageLease runs from the moment a long poll's queue had a visible message and it was
	// proposed, or from the proposal of the entry that carried it and leased for it.
	StageLease
	// StageCommitted and StageApplied are timed by the partition's state machine, not the
	// engine, for every entry it applies while its replica leads: from the entry's logged
	// time (the leader's clock when it was proposed) to its hand-over to the state machine
	// once committed, and to the commit of its apply transaction.
	StageCommitted
	StageApplied
)

// String names the stage as the silo's metrics label it.
func (s Stage) String() string {
	switch s {
	case StageApply:
		return "apply"
	case StageCommand:
		return "command"
	case StageDue:
		return "due"
	case StageLease:
		return "lease"
	case StageCommitted:
		return "committed"
	case StageApplied:
		return "applied"
	}
	return "unknown"
}

// StageTiming is how long one command spent in Stage.
type StageTiming struct {
	Stage Stage
	Took  time.Duration
}

// Reply is a reply for the sender a Command came from.
type Reply struct {
	To    any
	Reply *orreryv1.CommandReply
}

// Propose is an entry the engine wants proposed to the partition's Raft group: Command is an
// encoded PartitionCommand on behalf of Principal. The driver steps Proposed with Ref.
type Propose struct {
	Ref       uint64
	Principal string
	Command   []byte
	// Drains is whether the command only consumes, settles or stops work (Drains): a silo
	// whose disk is below its free-space floor still takes it, down to a lower one, so that
	// workers can go on draining their queues and an operator can stop what fills them.
	Drains bool
}

// TimerKind names one of the engine's timers; each is armed at one instant at a time.
type TimerKind int

// The engine's timers.
const (
	// WaitTimer wakes the parked long-poll receives: step WaitTimerFired.
	WaitTimer TimerKind = iota + 1
	// HousekeepTimer runs housekeeping: step HousekeepTimerFired.
	HousekeepTimer
	// CheckTimer proposes a consistency check: step CheckTimerFired.
	CheckTimer
)

// Timer arms Kind at At, replacing its earlier instant; a zero At disarms it.
type Timer struct {
	Kind TimerKind
	At   time.Time
}

// Fired is the event to step when a timer of kind k fires (nil for an unknown kind).
func (k TimerKind) Fired() Event {
	switch k {
	case WaitTimer:
		return WaitTimerFired{}
	case HousekeepTimer:
		return HousekeepTimerFired{}
	case CheckTimer:
		return CheckTimerFired{}
	}
	return nil
}

// Event is what the driver steps the engine with: one of the event types below. The interface
// is sealed (only this package's types implement it), so Step takes nothing else.
type Event interface{ isEvent() }

func (Open) isEvent()                {}
func (Command) isEvent()             {}
func (Proposed) isEvent()            {}
func (Applied) isEvent()             {}
func (Lost) isEvent()                {}
func (HostFailed) isEvent()          {}
func (StateReplaced) isEvent()       {}
func (WaitTimerFired) isEvent()      {}
func (HousekeepTimerFired) isEvent() {}
func (CheckTimerFired) isEvent()     {}
func (ScanDue) isEvent()             {}
func (Stop) isEvent()                {}

// Events the driver steps the engine with.
type (
	// Open starts the engine on its state: it reads the next due instant (a notice for the
	// coordinator) and arms housekeeping.
	Open struct{}
	// Command is a request from From (opaque to the engine: where its Reply goes).
	Command struct {
		Request *orreryv1.CommandRequest
		From    any
	}
	// Proposed is the outcome of proposing Ready.Propose's Ref: Err, or the entry's index and
	// term in the partition's log.
	Proposed struct {
		Ref         uint64
		Index, Term uint64
		Err         error
	}
	// Applied is a round of entries the partition's state machine applied, in log order.
	Applied struct {
		Results []Result
		// MinDueWritten is the earliest due-index entry the applies wrote (0: none).
		MinDueWritten int64
		// DueWrites are the due-index writes the applies made, in order.
		DueWrites []DueWrite
		// Floors are the visibility floors the applies promoted, in order.
		Floors []kv.Promoted
		// Visible are the earliest visibility-index entries the applies set, per queue
		// (Recorder.Visible; a queue may appear once per apply).
		Visible []VisibleSet
	}
	// Lost are proposals whose entries will not apply in their term.
	Lost struct{ Proposals []Proposal }
	// HostFailed reports that the silo's replicas failed: nothing in flight will apply.
	HostFailed struct{ Err error }
	// StateReplaced reports that a snapshot replaced the partition's state.
	StateReplaced struct{}
	// WaitTimerFired, HousekeepTimerFired and CheckTimerFired are the engine's timers firing.
	WaitTimerFired      struct{}
	HousekeepTimerFired struct{}
	CheckTimerFired     struct{}
	// ScanDue is a due coordinator's scan of the partition's due records, answered in
	// Ready.Scanned from the due head (see scanDue).
	ScanDue struct{ Request *orreryv1.ScanDueRequest }
	// Stop answers everything in flight and parked; the engine answers nothing after it.
	Stop struct{}
)

// Result is the outcome of one applied entry: its index and term, and the reply for whoever
// proposed it.
type Result struct {
	Index, Term uint64
	Reply       *orreryv1.CommandReply
	// Waiting answers the waiting receives the entry carried (EntryApplied.Waiting): nil
	// for one that stays parked.
	Waiting []*orreryv1.CommandReply
}

// Proposal names an entry proposed in a term.
type Proposal struct{ Index, Term uint64 }

// DueWrite is a due-index write an apply made: Value nil for a delete.
type DueWrite struct{ Key, Value []byte }

// Step takes one event at now and returns what to do about it.
func (e *Engine) Step(now time.Time, event Event) Ready {
	switch ev := event.(type) {
	case Open:
		e.open(now)
	case Command:
		e.admit(now, ev)
	case Proposed:
		e.proposed(now, ev)
	case Applied:
		e.applied(now, &ev)
	case Lost:
		e.lost(now, ev)
	case HostFailed:
		e.hostFailed(now, ev.Err)
	case StateReplaced:
		e.reload(now)
	case WaitTimerFired:
		e.wakeWaiters(now)
	case HousekeepTimerFired:
		e.stepApplyVersion(now)
		e.housekeep(now)
	case CheckTimerFired:
		e.check(now)
	case ScanDue:
		e.ready.Scanned = e.scanDue(now, ev.Request)
	case Stop:
		e.stop(now)
	default:
		e.cfg.Logger.Error("partition engine: a nil event")
	}
	rd := e.ready
	e.ready = Ready{}
	return rd
}

// DueHeadEntries is how many due-index entries the engine holds in memory (due.Head): every
// entry due before the head's horizon, a few seconds past the last scan's read time, at most
// dueHeadEntries; 0 before a scan loaded it.
func (e *Engine) DueHeadEntries() int { return e.head.Len() }

// Queued counts the commands waiting: proposed and not applied, and parked.
func (e *Engine) Queued() int {
	return len(e.proposing) + len(e.inflight) + len(e.waiters) + e.carried
}

// open adopts the partition's limits (proposing this silo's when they differ), proposes this
// silo's zone rules where the partition's are older, reads the next due instant and arms
// housekeeping and the consistency checks.
func (e *Engine) open(now time.Time) {
	e.readApplyVersion()
	e.adoptLimits(now)
	e.refreshZones(now)
	e.stepApplyVersion(now)
	e.arm(HousekeepTimer, now.Add(e.cfg.HousekeepEvery))
	if e.cfg.CheckEvery > 0 {
		e.arm(CheckTimer, now.Add(e.cfg.CheckEvery))
	}
	e.reportNextDue()
}

// reload takes a state a snapshot replaced: the due head, due floor and visibility floors
// described the old state, so they are dropped and read again as on Open (the coordinator is
// told the new next due instant), and parked receives look at the new state.
func (e *Engine) reload(now time.Time) {
	index, logged := e.state.Applied()
	e.cfg.Logger.Info("partition state replaced by a snapshot", "applied_index", index, "logged_time", logged)
	e.head.Reset()
	e.readLimits()
	e.readApplyVersion()
	e.readFloors = NewVisibilityFloors()
	clear(e.nextVisible)
	e.dueFloor = 0
	e.reportNextDue()
	e.wakeWaiters(now)
}

// readTime is the logged time a read judges dueness and visibility by: what the next entry
// would get.
func (e *Engine) readTime(now time.Time) int64 {
	_, logged := e.state.Applied()
	return max(now.UTC().UnixMicro(), logged+1)
}

// arm asks for timer kind at at (zero: disarm).
func (e *Engine) arm(kind TimerKind, at time.Time) {
	e.ready.Timers = append(e.ready.Timers, Timer{Kind: kind, At: at})
}

// reply answers p: to its sender, or to the engine itself for its housekeeping command.
func (e *Engine) reply(now time.Time, p *pending, r *orreryv1.CommandReply) {
	r.ActivationEpoch = e.state.Term()
	if p.leasing {
		e.leased(p)
	}
	if p.housekeep {
		e.housekept(now, r)
		return
	}
	if p.check {
		e.checked(now)
		return
	}
	if p.limits {
		e.limitsSet(r)
		return
	}
	if p.zones {
		e.zonesRefreshed(now, r)
		return
	}
	if p.version {
		e.applyVersionSet(now, r)
		return
	}
	if p.from != nil {
		e.ready.Replies = append(e.ready.Replies, Reply{To: p.from, Reply: r})
	}
}

// NewVisibilityFloors returns empty visibility floors of a partition's queues, one per priority
// band a queue uses (keys.VisibilityBandPrefix), bounded to MaxVisibilityFloors bands: what the
// engine's reads and a state machine's applies keep.
func NewVisibilityFloors() *kv.Floors {
	return kv.NewFloors(keys.VisibilityBandPrefix, MaxVisibilityFloors)
}

// ErrorReply is the reply carrying err, as an orrery.Error.
func ErrorReply(err error) *orreryv1.CommandReply {
	return &orreryv1.CommandReply{Error: orrery.AsError(err).Proto()}
}
