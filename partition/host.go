package partition

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/actors"
	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/grains/engine"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/persistence"
	"github.com/orreryhq/orrery/replication"
)

// HostConfig configures a silo's partition replicas.
type HostConfig struct {
	// DataRoot holds the silo store, <DataRoot>/store.
	DataRoot string
	// Partitions is the cluster's partition count.
	Partitions int
	// Store configures the silo store's Badger database.
	Store persistence.Options
	// Limits are the state machines' limits; every silo of a cluster must use the same.
	Limits input.Limits
	// KnownApplyVersion, when positive, stands for batch.KnownApplyVersion, the newest apply
	// version this binary knows: a test's older or newer binary.
	KnownApplyVersion uint32
	// WarmCacheBytes bounds the keys and values a partition keeps from its applies for the
	// next ones' reads (default DefaultWarmCacheBytes; see kv.Warm).
	WarmCacheBytes int
	// LeadTimeout bounds how long opening the groups waits for every group whose only voter is
	// this replica to elect it and apply its first entry (default DefaultLeadTimeout).
	LeadTimeout time.Duration
	// RaftTick is the time one Raft tick stands for (default 100 ms); ElectionTicks and
	// HeartbeatTicks are the groups' election timeout and heartbeat period in ticks
	// (replication.Config defaults).
	RaftTick                      time.Duration
	ElectionTicks, HeartbeatTicks int
	// Clock ticks the Raft groups and tells the time leaders stamp entries with (default
	// clock.Real()); the grains' Config.Clock should be the same.
	Clock clock.Clock
	// ClockUnjudged opens the replicas as SetClockUnjudged(true) leaves them: until the silo
	// has judged its wall clock against its peers' (and says so through SetClockUnjudged and
	// SetClockUnfit), they win no election a peer could win. A silo that judges its clock sets
	// it, so that one restarted on a skewed clock leads nothing before its first probes are
	// answered.
	ClockUnjudged bool
	// Failpoints arms crash boundaries (default: none).
	Failpoints *Failpoints
	// Logger receives the replicas' logs (default slog.Default()).
	Logger *slog.Logger

	// wrapLog, when set, wraps the Raft log the driver persists to (tests hold or fail it).
	wrapLog func(persistence.RaftLog) persistence.RaftLog
}

// Defaults of HostConfig.
const (
	// DefaultWarmCacheBytes holds a partition's recurring reads (its schedules' records, its
	// lanes' counters) many times over; 32 partitions keep 8 MiB. At 1 MiB a partition the
	// warm sets were a sixth of a busy silo's live heap and emitted no faster.
	DefaultWarmCacheBytes = 256 << 10
	DefaultLeadTimeout    = 30 * time.Second
)

// Host is a silo's partition replicas: the silo store, one Raft group per partition driven by
// one replication.Driver, and each partition's state machine, which applies the group's
// committed entries on a goroutine of its own and hands the results to the partition grain
// attached to it.
//
// Groups exist once the silo belongs to a cluster. The silo that creates the cluster
// (JoinCluster with minted) creates every group with itself as its only voter; a silo that
// joins an existing cluster opens every group empty, with no voter, and receives its replicas
// from the groups' leaders, which add it as a learner, catch it up by snapshot (Snapshot,
// Install) and promote it (AddLearner, PromoteLearner). The Raft traffic between replicas goes
// through the Transport set with SetTransport; until then it is dropped, and Raft re-sends.
type Host struct {
	cfg      HostConfig
	log      *slog.Logger
	store    *persistence.SiloStore
	driver   *replication.Driver
	machines []*machine
	// pool runs the mailboxes of the partition grains whose Config names no pool of its own;
	// Close closes it.
	pool *actors.Pool

	// transport is where the driver's sends go: the Transport SetTransport set, or nothing.
	transport boundTransport
	// checks are the replica consistency checks (consistency.go); hashing counts the
	// checksums being computed, which Close waits for before it closes the store.
	checks  *consistency
	hashing sync.WaitGroup
	// repairing counts the goroutines of repairs (repair.go), which stopping, closed as Close
	// begins, ends; Close waits for them.
	repairing sync.WaitGroup
	stopping  chan struct{}
	// lateness receives the enqueue lateness of due occurrences (ObserveEnqueueLateness).
	lateness atomic.Pointer[EnqueueLatenessObserver]
	// stages receives the commands' stage timings (ObserveStages).
	stages atomic.Pointer[StageObserver]
	// inspectDenials receives the inspections refused Unauthorized (ObserveInspectDenials).
	inspectDenials atomic.Pointer[InspectDenialObserver]
	// belowFloor is whether the last command found the disk below the store's free-space
	// floor, and refusedBelowFloor counts the commands refused for it (RefusedBelowFloor).
	belowFloor        atomic.Bool
	refusedBelowFloor atomic.Uint64

	failOnce sync.Once
	failed   chan struct{}
	failErr  error
	closed   sync.Once
}

// OpenHost opens the silo store under cfg.DataRoot and starts its Raft loop. When the store
// belongs to a cluster it opens every partition's group, replays the committed entries each
// partition's state has not applied, and returns once this replica leads every group whose only
// voter it is; otherwise the groups wait for JoinCluster.
func OpenHost(cfg HostConfig) (*Host, error) {
	if cfg.Limits.MaxMutationsPerBatch == 0 {
		cfg.Limits = input.DefaultLimits()
	}
	if cfg.WarmCacheBytes <= 0 {
		cfg.WarmCacheBytes = DefaultWarmCacheBytes
	}
	if cfg.LeadTimeout <= 0 {
		cfg.LeadTimeout = DefaultLeadTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if err := persistence.RefuseOldLayout(cfg.DataRoot); err != nil {
		return nil, err
	}
	store, err := persistence.OpenSiloStore(persistence.SiloStoreDir(cfg.DataRoot), cfg.Partitions, cfg.Store)
	if err != nil {
		return nil, err
	}
	h := &Host{cfg: cfg, pool: actors.NewPool(actors.DefaultPoolIdle), log: cfg.Logger.With("silo_store", store.Dir()), store: store, failed: make(chan struct{}), checks: newConsistency(), stopping: make(chan struct{})}
	if err := h.open(); err != nil {
		h.driverStop()
		_ = store.Close()
		return nil, err
	}
	return h, nil
}

// open starts the Raft loop with no group, then opens the groups if the store belongs to a
// cluster.
func (h *Host) open() error {
	groups, err := replication.New(replication.Config{
		ReplicaID: h.store.SiloID(), ElectionTicks: h.cfg.ElectionTicks, HeartbeatTicks: h.cfg.HeartbeatTicks,
	}, h.store.RaftLog())
	if err != nil {
		return err
	}
	groups.SetClockUnjudged(h.cfg.ClockUnjudged)
	h.machines = make([]*machine, h.cfg.Partitions)
	for n := range h.machines {
		state, err := h.store.Partition(n)
		if err != nil {
			return err
		}
		h.machines[n] = newMachine(h, n, state)
	}
	var raftLog persistence.RaftLog = h.store.RaftLog()
	if h.cfg.wrapLog != nil {
		raftLog = h.cfg.wrapLog(raftLog)
	}
	h.driver = replication.NewDriver(replication.DriverConfig{
		Groups: groups, Log: failpointLog{RaftLog: raftLog, failpoints: h.cfg.Failpoints},
		Transport: &h.transport, StateMachine: h, Clock: h.cfg.Clock, TickInterval: h.cfg.RaftTick,
	})
	h.driver.Start()
	go h.watchDriver()
	if h.store.ClusterID() == 0 {
		return nil
	}
	return h.openGroups()
}

// JoinCluster records that the silo belongs to cluster id and opens the partitions' groups.
// The silo that creates the cluster (minted) first creates every group with itself as its only
// voter, and JoinCluster returns once it leads them all; a joining silo opens them empty. The
// groups are created before the id is recorded: a crash in between leaves a store with no
// cluster id, whose next start mints again (the same silo does, by the formation rule) and
// finds the groups there.
func (h *Host) JoinCluster(id uint64, minted bool) error {
	if minted {
		groups := make([]int, h.cfg.Partitions)
		for n := range groups {
			groups[n] = n
		}
		if err := replication.Bootstrap(h.store.RaftLog(), []uint64{h.store.SiloID()}, groups); err != nil {
			return orrery.Wrap(orrery.CodeUnavailable, err, "silo store %s: create the partitions' raft groups", h.store.Dir())
		}
	}
	if err := h.store.SetClusterID(id); err != nil {
		return err
	}
	return h.openGroups()
}

// openGroups opens every partition's group on its persisted state and, once the log each one
// had committed is applied again (the conf changes in it included: until then a group's
// configuration is its log's snapshot record's), campaigns at once in those whose only voter is
// this replica, and waits until it leads them.
func (h *Host) openGroups() error {
	self := h.store.SiloID()
	for n, m := range h.machines {
		mark := m.state.Applied()
		if err := h.driver.Open(n, replication.Applied{Index: mark.Index, LoggedTimeMicros: mark.LoggedTimeMicros}); err != nil {
			return orrery.Wrap(orrery.CodeUnavailable, err, "partition %d", n)
		}
	}
	deadline := h.cfg.Clock.Now().Add(h.cfg.LeadTimeout)
	var alone []int
	for n := range h.machines {
		for {
			st, _ := h.driver.Status(n)
			if st.ConfCurrent {
				if slices.Equal(st.Voters, []uint64{self}) {
					alone = append(alone, n)
				}
				break
			}
			if err := h.pause(deadline, "partition %d: its log not applied again after %v (applied %d)", n, h.cfg.LeadTimeout, st.AppliedIndex); err != nil {
				return err
			}
		}
	}
	for _, n := range alone {
		if err := h.driver.Campaign(n); err != nil {
			return orrery.Wrap(orrery.CodeUnavailable, err, "partition %d: campaign", n)
		}
	}
	return h.awaitLeadership(alone, deadline)
}

// pause waits a moment before a wait's next look, and fails with the host's fatal error, or
// with the message when deadline has passed.
func (h *Host) pause(deadline time.Time, format string, args ...any) error {
	select {
	case <-h.failed:
		return h.failErr
	case <-time.After(5 * time.Millisecond):
	}
	if h.cfg.Clock.Now().After(deadline) {
		return orrery.Errorf(orrery.CodeUnavailable, format, args...)
	}
	return nil
}

// awaitLeadership waits until every group can propose and its state machine has applied
// every entry committed before, or deadline passes.
func (h *Host) awaitLeadership(groups []int, deadline time.Time) error {
	for _, n := range groups {
		for {
			st, _ := h.driver.Status(n)
			if st.CanPropose && h.machines[n].state.Applied().Index >= st.AppliedIndex {
				break
			}
			if err := h.pause(deadline, "partition %d: not leading its raft group after %v (term %d, leader %d)",
				n, h.cfg.LeadTimeout, st.Term, st.Leader); err != nil {
				return err
			}
		}
	}
	return nil
}

// watchDriver fails the host when the driver's loop ends on a fatal error.
func (h *Host) watchDriver() {
	<-h.driver.Done()
	if err := h.driver.Stop(); err != nil {
		h.fail(fmt.Errorf("raft loop: %w", err))
	}
}

// fail records the host's first fatal error and closes Failed: the silo must stop, and its
// next start recovers from the store.
func (h *Host) fail(err error) {
	h.failOnce.Do(func() {
		h.failErr = err
		h.log.Error("partition replicas failed; the silo must stop", "err", err)
		close(h.failed)
		for _, m := range h.machines {
			if m != nil {
				m.deliver(engine.HostFailed{Err: err})
			}
		}
	})
}

// Failed is closed after a fatal error (a failed write or apply); Err then says what it was.
func (h *Host) Failed() <-chan struct{} { return h.failed }

// Err is the fatal error that closed Failed, nil before.
func (h *Host) Err() error {
	select {
	case <-h.failed:
		return h.failErr
	default:
		return nil
	}
}

// SiloID is the stable id of this silo's store (replication.Config.ReplicaID).
func (h *Host) SiloID() uint64 { return h.store.SiloID() }

// Receiver is where a Transport delivers the Raft traffic other voters send this replica.
func (h *Host) Receiver() replication.Receiver { return h.driver }

// Status returns partition n's group as this replica sees it (replication.Groups.Status); ok
// is false before the group is open.
func (h *Host) Status(n int) (replication.Status, bool) { return h.driver.Status(n) }

// ApplyVersion is the apply version partition n's state machine applies under on this replica
// (batch.LoadApplyVersion); 0 for a partition this host does not hold.
func (h *Host) ApplyVersion(n int) uint32 {
	if n < 0 || n >= len(h.machines) || h.machines[n] == nil {
		return 0
	}
	return h.machines[n].ApplyVersion()
}

// Leads reports whether this replica leads partition n's group and can propose there, as of
// the last Raft round (replication.Driver.Lead: it takes no lock, and every request asks).
func (h *Host) Leads(n int) bool {
	l, ok := h.driver.Lead(n)
	return ok && l.CanPropose
}

// SetClockUnfit tells every group whether this silo's wall clock is judged beyond the bound
// from most of its peers' (replication.Groups.SetClockUnfit): while it is, the replicas take
// no leadership a fit voter can take, and those leading a group with another voter refuse
// proposals (replication.ErrClockUnfit, Unavailable) until the silo hands them over.
func (h *Host) SetClockUnfit(unfit bool) { h.driver.SetClockUnfit(unfit) }

// SetClockUnjudged tells every group whether this silo has yet to judge its wall clock
// against its peers' (replication.Groups.SetClockUnjudged): while it has, the replicas take no
// leadership a peer can take.
func (h *Host) SetClockUnjudged(unjudged bool) { h.driver.SetClockUnjudged(unjudged) }

// Leader is the silo id this replica believes leads partition n's group; 0 when it knows none
// or does not host n.
func (h *Host) Leader(n int) uint64 {
	l, _ := h.driver.Lead(n)
	return l.Leader
}

// Close stops the Raft loop and every state machine (each finishes the entries handed to it),
// then closes the store. Closing twice is not an error.
func (h *Host) Close() error {
	var err error
	h.closed.Do(func() {
		close(h.stopping)
		h.repairing.Wait()
		h.driverStop()
		for _, m := range h.machines {
			if m != nil {
				m.stop()
			}
		}
		h.hashing.Wait()
		err = h.store.Close()
		h.pool.Close()
	})
	return err
}

func (h *Host) driverStop() {
	if h.driver != nil {
		if err := h.driver.Stop(); err != nil {
			h.fail(err)
		}
	}
}

// propose proposes cmd, encoded, to partition n's group on behalf of principal. It refuses
// with Unavailable when the host has failed, the disk is below its free-space floor (a command
// that drains, engine.Drains, below its drain floor), or this replica cannot propose
// (replication.Groups.Propose).
func (h *Host) propose(n int, principal string, cmd []byte, drains bool) (replication.Proposal, error) {
	if err := h.Err(); err != nil {
		return replication.Proposal{}, orrery.Wrap(orrery.CodeUnavailable, err, "partition %d: the silo's replicas failed", n)
	}
	if err := h.checkFreeSpace(drains); err != nil {
		return replication.Proposal{}, err
	}
	if size := int64(len(cmd) + len(principal) + entryOverhead); size > h.store.MaxValueBytes() {
		return replication.Proposal{}, orrery.FieldErrorf(orrery.CodeValidation, "batch",
			"the command encodes to %d bytes, more than the largest log entry of %d bytes; split it", size, h.store.MaxValueBytes())
	}
	return h.driver.Propose(n, principal, cmd)
}

// checkFreeSpace is the store's free-space check (persistence.SiloStore.CheckFreeSpace) for a
// command: a command that drains is judged against the drain floor instead
// (CheckDrainSpace). It counts a refusal, and logs when the disk goes below the floor and when
// it is back above it, once each time.
func (h *Host) checkFreeSpace(drains bool) error {
	err := h.store.CheckFreeSpace()
	if err != nil {
		if h.belowFloor.CompareAndSwap(false, true) {
			h.log.Warn("the silo store's disk is below its free-space floor: refusing new commands until space is freed; receives, acks, releases, lease extensions and schedule pauses, cancels and deletes are taken down to half the floor", "err", err)
		}
		if drains {
			err = h.store.CheckDrainSpace()
		}
		if err != nil {
			h.refusedBelowFloor.Add(1)
		}
		return err
	}
	if h.belowFloor.CompareAndSwap(true, false) {
		h.log.Info("the silo store's disk is back above its free-space floor: accepting commands")
	}
	return nil
}

// CheckFreeSpace is nil unless the silo store's disk is below its free-space floor
// (persistence.SiloStore.CheckFreeSpace), when it is the Unavailable error that new commands
// are refused with.
func (h *Host) CheckFreeSpace() error { return h.store.CheckFreeSpace() }

// RefusedBelowFloor is how many commands this host refused because the silo store's disk was
// below its free-space floor.
func (h *Host) RefusedBelowFloor() uint64 { return h.refusedBelowFloor.Load() }

// readTimeout bounds a read's confirmation that this replica still leads its group.
const readTimeout = 5 * time.Second

// confirmRead returns nil once a read of partition n's state may be answered from this
// replica: at once when this replica is the group's only voter, otherwise once a quorum has
// confirmed it still leads and its state has applied through the group's commit index then
// (replication.Driver.Read). A deposed leader, cut off from the others, never confirms.
func (h *Host) confirmRead(n int) error {
	if h.soleVoter(n) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	return h.driver.Read(ctx, n)
}

// soleVoter reports whether this replica is partition n's only voter: a leader nobody can
// depose, whose reads need no confirmation.
func (h *Host) soleVoter(n int) bool {
	st, _ := h.driver.Status(n)
	return slices.Equal(st.Voters, []uint64{h.store.SiloID()})
}

// term is the term of partition n's group as this replica knows it.
func (h *Host) term(n int) uint64 {
	l, _ := h.driver.Lead(n)
	return l.Term
}

// Apply implements replication.StateMachine: it hands each group's committed entries to its
// state machine, which applies them in order on its own goroutine and then calls applied, so
// groups apply at the same time and while the next rounds persist.
func (h *Host) Apply(c replication.Committed, applied func(error)) error {
	if len(c.Entries) > 0 {
		h.cfg.Failpoints.HitEntries(FailpointEntryCommitted, c.Entries)
	}
	return h.machines[c.Group].enqueue(applyJob{c: c, handed: h.cfg.Clock.Now(), done: applied})
}

// Snapshot implements replication.StateMachine: a consistent read of partition group's state
// and applied mark as last applied, in chunks (persistence.PartitionState.Snapshot).
func (h *Host) Snapshot(group int) (replication.SnapshotReader, error) {
	m, err := h.machine(group)
	if err != nil {
		return nil, err
	}
	snap, err := m.state.Snapshot()
	if err != nil {
		return nil, err
	}
	return snapshotReader{snap}, nil
}

// snapshotReader is a state snapshot as the replication layer reads it.
type snapshotReader struct{ *persistence.StateSnapshot }

// AppliedIndex implements replication.SnapshotReader.
func (r snapshotReader) AppliedIndex() uint64 { return r.Mark().Index }

// Install implements replication.StateMachine: partition group's state becomes the snapshot's,
// at meta's index and logged time (persistence.PartitionState.Install), and the partition's
// machine and grain drop what they kept of the old state (see machine.install).
func (h *Host) Install(group int, meta replication.SnapshotMeta, chunks replication.Chunks) error {
	m, err := h.machine(group)
	if err != nil {
		return err
	}
	return m.install(persistence.AppliedMark{Index: meta.Index, LoggedTimeMicros: meta.LoggedTimeMicros}, chunks)
}

// machine is partition n's state machine.
func (h *Host) machine(n int) (*machine, error) {
	if n < 0 || n >= len(h.machines) {
		return nil, orrery.Errorf(orrery.CodeInternal, "partition %d: not hosted here (0 to %d)", n, len(h.machines)-1)
	}
	return h.machines[n], nil
}

// Settle implements replication.StateMachine: lost proposals go to their partitions' grains.
// Committed ones are answered once applied (see machine).
func (h *Host) Settle(outcomes []replication.Outcome) {
	lost := map[int][]engine.Proposal{}
	for _, o := range outcomes {
		if !o.Committed {
			lost[o.Group] = append(lost[o.Group], engine.Proposal{Index: o.Proposal.Index, Term: o.Proposal.Term})
		}
	}
	for n, ps := range lost {
		h.machines[n].deliver(engine.Lost{Proposals: ps})
	}
}

// entryOverhead bounds what a log entry adds to its command and principal: the entry's index,
// term and type, and the PartitionEntry's logged time and field tags.
const entryOverhead = 64

// boundTransport is the driver's Transport: the one SetTransport set, or, before that,
// nothing: messages are dropped (Raft re-sends them) and snapshots fail.
type boundTransport struct {
	t atomic.Pointer[replication.Transport]
}

func (b *boundTransport) Send(to uint64, msgs []replication.Message) {
	if t := b.t.Load(); t != nil {
		(*t).Send(to, msgs)
	}
}

func (b *boundTransport) SendSnapshot(to uint64, snap replication.OutboundSnapshot) {
	if t := b.t.Load(); t != nil {
		(*t).SendSnapshot(to, snap)
		return
	}
	_ = snap.Chunks.Close()
	snap.Done(orrery.Errorf(orrery.CodeUnavailable, "replica %d: no raft transport yet", to))
}

// SetTransport makes t carry this replica's Raft messages and snapshots to the other replicas;
// what they send reaches Receiver. A nil t detaches the transport: messages are dropped (Raft
// re-sends them) and snapshots fail, as before the first SetTransport. A replica counts the
// time without a leader that lets a clock-unjudged or unfit one campaign
// (replication.Groups.Reconnected) from its last SetTransport of a non-nil t.
func (h *Host) SetTransport(t replication.Transport) {
	if t == nil {
		h.transport.t.Store(nil)
		return
	}
	h.transport.t.Store(&t)
	h.driver.Reconnected()
}

// failpointLog hits FailpointEntryAppended after each Persist that wrote entries.
type failpointLog struct {
	persistence.RaftLog
	failpoints *Failpoints
}

func (l failpointLog) Persist(writes []persistence.RaftWrite) error {
	if err := l.RaftLog.Persist(writes); err != nil {
		return err
	}
	for _, w := range writes {
		for _, e := range w.Entries {
			if len(e.GetData()) > 0 {
				l.failpoints.Hit(FailpointEntryAppended)
				return nil
			}
		}
	}
	return nil
}

// attach attaches a grain to partition n's state machine: sink receives its results from now
// on. It returns the partition's state, which the grain reads.
func (h *Host) attach(n int, owner any, sink func(engine.Event)) (*persistence.PartitionState, error) {
	m, err := h.machine(n)
	if err != nil {
		return nil, err
	}
	if err := h.Err(); err != nil {
		return nil, orrery.Wrap(orrery.CodeUnavailable, err, "partition %d: the silo's replicas failed", n)
	}
	m.attach(owner, sink)
	return m.state, nil
}

// detach detaches owner from partition n's state machine.
func (h *Host) detach(n int, owner any) {
	if n >= 0 && n < len(h.machines) {
		h.machines[n].detach(owner)
	}
}
