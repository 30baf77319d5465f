package partition

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/engine"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/persistence"
	"github.com/orreryhq/orrery/replication"
)

// machineQueue bounds the rounds of committed entries waiting for a machine to apply them;
// beyond it the Raft loop waits.
const machineQueue = 256

// machine is one partition's state machine on this replica: it applies the group's committed
// entries, in log order, onto the partition's state, each round's entries in one transaction
// (split when it would exceed the store's limit) at each entry's logged time, and hands the
// results to the grain attached to it. A platform failure of an apply is fatal to the host: a
// committed entry cannot be skipped, and the next start applies it again from the log.
type machine struct {
	host  *Host
	n     int
	state *persistence.PartitionState
	// applier applies under limits, the partition's (batch.LoadLimits): read from the state
	// when the machine starts or a snapshot replaces it, and again after an entry that set
	// them; the grain reads them too (Limits).
	applier batch.Applier
	limits  atomic.Pointer[input.Limits]
	// version is the partition's apply version (batch.LoadApplyVersion), read and kept as
	// limits are.
	version atomic.Uint32
	// warm and floors are what applied entries read and wrote, for the next ones' reads
	// (kv.Warm, kv.Floors); only the apply goroutine touches them.
	warm   *kv.Warm
	floors *kv.Floors

	queue chan applyJob
	done  chan struct{}
	// queued is what the attached grain's engine held in flight as of its last step
	// (Host.Queued).
	queued atomic.Int64
	// dueHead is how many due-index entries the attached grain's engine held in memory as of
	// its last step (Host.DueHeadEntries).
	dueHead atomic.Int64

	// tamper, set by Diverge, writes behind the state machine's back in the next apply's
	// transaction (then clears itself): a replica whose state diverged.
	tamper atomic.Pointer[func(*persistence.Txn) error]

	mu    sync.Mutex
	owner any                // the attached grain, nil when none is
	sink  func(engine.Event) // its mailbox
}

func newMachine(h *Host, n int, state *persistence.PartitionState) *machine {
	m := &machine{
		host: h, n: n, state: state,
		applier: batch.Applier{Partitions: h.cfg.Partitions, Partition: n, KnownApplyVersion: h.cfg.KnownApplyVersion},
		warm:    kv.NewWarm(h.cfg.WarmCacheBytes),
		floors:  engine.NewVisibilityFloors(),
		queue:   make(chan applyJob, machineQueue),
		done:    make(chan struct{}),
	}
	if err := m.loadLimits(); err != nil {
		h.log.Warn("partition limits did not read; applying under the defaults", "partition", n, "err", err)
	}
	go m.run()
	return m
}

// loadLimits reads the partition's limits and apply version from its state
// (batch.LoadLimits, batch.LoadApplyVersion).
func (m *machine) loadLimits() error {
	lim, version := input.DefaultLimits(), uint32(1)
	err := m.state.View(func(r kv.Reader) error {
		var err error
		if lim, err = batch.LoadLimits(r); err != nil {
			return err
		}
		version, err = batch.LoadApplyVersion(r)
		return err
	})
	m.limits.Store(&lim)
	m.version.Store(version)
	return err
}

// Limits are the limits the partition applies under.
func (m *machine) Limits() input.Limits { return *m.limits.Load() }

// ApplyVersion is the apply version the partition applies under.
func (m *machine) ApplyVersion() uint32 { return m.version.Load() }

// attach makes sink receive the partition's results from now on, on behalf of owner,
// replacing any earlier one.
func (m *machine) attach(owner any, sink func(engine.Event)) {
	m.mu.Lock()
	m.owner, m.sink = owner, sink
	m.mu.Unlock()
}

// detach stops results going to owner, if it is still the one attached.
func (m *machine) detach(owner any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.owner == owner {
		m.owner, m.sink = nil, nil
	}
}

func (m *machine) deliver(ev engine.Event) {
	m.mu.Lock()
	sink := m.sink
	m.mu.Unlock()
	if sink != nil {
		sink(ev)
	}
}

// applyJob is a round's committed entries for the apply goroutine (or, when install is set,
// the installation of a snapshot), and what to call once they are applied (or failed).
type applyJob struct {
	c       replication.Committed
	install func() error
	done    func(error)
	// handed is when the driver handed c over (Host.Apply).
	handed time.Time
}

// enqueue hands a round's committed entries to the apply goroutine; it fails once the
// machine has stopped.
func (m *machine) enqueue(job applyJob) error {
	select {
	case <-m.done:
		return orrery.Errorf(orrery.CodeUnavailable, "partition %d: its state machine has stopped", m.n)
	default:
	}
	m.queue <- job
	return nil
}

// stop ends the apply goroutine once the entries handed to it are applied.
func (m *machine) stop() {
	close(m.queue)
	<-m.done
}

func (m *machine) run() {
	defer close(m.done)
	var failed error
	for job := range m.queue {
		if failed != nil {
			job.done(failed)
			continue
		}
		if job.install != nil {
			job.done(job.install()) // its caller decides whether a failure is fatal
			continue
		}
		if err := m.apply(job.c, job.handed); err != nil {
			failed = orrery.Wrap(orrery.CodeInternal, err, "partition %d: apply entries up to %d", m.n, job.c.AppliedIndex)
			m.host.fail(failed)
		}
		job.done(failed)
	}
}

// install replaces the partition's state with a snapshot's chunks at mark
// (persistence.PartitionState.Install) and returns its error. It runs on the apply goroutine,
// after the entries handed to it before: the warm cache and the floors belong to that
// goroutine, and describe the old state, so they are replaced there, and the grain hears of
// the new state (stateReplaced) before the results of any entry applied on it. The Raft driver
// calls it before it persists a round, and only while the group has no entries applying (its
// barrier is per group), so no apply is waiting anyway; going through the apply goroutine
// keeps the reset safe regardless.
func (m *machine) install(mark persistence.AppliedMark, chunks replication.Chunks) error {
	result := make(chan error, 1)
	job := applyJob{done: func(err error) { result <- err }, install: func() error {
		err := m.state.Install(mark, chunks)
		// Reset even after a failure: the state may be either one after a failed Install's
		// switch (which fails the host), and the caches fill again from the store.
		m.warm = kv.NewWarm(m.host.cfg.WarmCacheBytes)
		m.floors = engine.NewVisibilityFloors()
		if err != nil {
			return err
		}
		if err := m.loadLimits(); err != nil {
			return err
		}
		m.deliver(engine.StateReplaced{})
		return nil
	}}
	if err := m.enqueue(job); err != nil {
		return err
	}
	return <-result
}

// apply applies one round's committed entries, handed over at handed, and delivers their
// results.
func (m *machine) apply(c replication.Committed, handed time.Time) error {
	if len(c.Entries) == 0 { // Raft's own entries only (a new term's empty entry, conf changes)
		mark := m.state.Applied()
		if c.AppliedIndex <= mark.Index {
			return nil
		}
		mark.Index = c.AppliedIndex
		return m.state.Apply(mark, func(*persistence.Txn) error { return nil })
	}
	out := &engine.Applied{Results: make([]engine.Result, 0, len(c.Entries))}
	// A CheckConsistency entry ends its transaction, so that the state is read for its
	// checksum exactly as of that entry.
	entries := c.Entries
	for len(entries) > 0 {
		end := slices.IndexFunc(entries, isCheck)
		if end < 0 {
			if err := m.applySplit(entries, c.AppliedIndex, out); err != nil {
				return err
			}
			break
		}
		check := entries[end]
		if err := m.applySplit(entries[:end+1], check.Index, out); err != nil {
			return err
		}
		m.checksum(check.Index)
		entries = entries[end+1:]
	}
	m.host.cfg.Failpoints.HitEntries(FailpointEntryApplied, c.Entries)
	m.observeStages(c.Entries, handed)
	m.deliver(*out)
	return nil
}

// observeStages reports, when a stage observer is set and this replica leads the partition,
// each entry's time from its logged time to its hand-over (engine.StageCommitted) and to now,
// applied (engine.StageApplied).
func (m *machine) observeStages(entries []replication.Entry, handed time.Time) {
	observe := m.host.stages.Load()
	if observe == nil || !m.host.Leads(m.n) {
		return
	}
	applied := m.host.cfg.Clock.Now()
	for _, e := range entries {
		logged := time.UnixMicro(e.GetLoggedTimeUnixMicros())
		(*observe)(m.n, engine.StageCommitted, handed.Sub(logged))
		(*observe)(m.n, engine.StageApplied, applied.Sub(logged))
	}
}

// setsLimits reports whether b carries a SetLimits mutation.
func setsLimits(b *orreryv1.Batch) bool {
	return slices.ContainsFunc(b.GetMutations(), func(m *orreryv1.Mutation) bool { return m.GetSetLimits() != nil })
}

// maxCheckCommandBytes is more than a CheckConsistency command encodes to: larger commands
// are not decoded to look for one.
const maxCheckCommandBytes = 256

// isCheck reports whether e carries a CheckConsistency mutation.
func isCheck(e replication.Entry) bool {
	if len(e.GetCommand()) > maxCheckCommandBytes {
		return false
	}
	cmd := &orreryv1.PartitionCommand{}
	if proto.Unmarshal(e.GetCommand(), cmd) != nil {
		return false
	}
	for _, mut := range cmd.GetBatch().GetMutations() {
		if mut.GetCheckConsistency() != nil {
			return true
		}
	}
	return false
}

// checksum starts hashing the state as just applied, through the CheckConsistency entry at
// index (Host.checksumState). The read begins here, on the apply goroutine, before the next
// apply; the hashing runs on a goroutine of its own.
func (m *machine) checksum(index uint64) {
	snap, err := m.state.Snapshot()
	if err != nil {
		m.host.log.Warn("consistency check: the partition state did not open for reading", "partition", m.n, "index", index, "err", err)
		return
	}
	if snap.Mark().Index != index {
		_ = snap.Close()
		return
	}
	m.host.hashing.Add(1)
	go func() {
		defer m.host.hashing.Done()
		m.host.checksumState(m.n, index, snap)
	}()
}

// applySplit applies entries in one transaction whose mark is index, halving them while the
// transaction exceeds the store's limit. One entry that alone exceeds it fails Validation, and
// its mark is applied with nothing else.
func (m *machine) applySplit(entries []replication.Entry, index uint64, out *engine.Applied) error {
	err := m.applyOnce(entries, index, out)
	if !errors.Is(err, persistence.ErrBatchTooBig) {
		return err
	}
	if len(entries) == 1 {
		e := entries[0]
		mark := persistence.AppliedMark{Index: index, LoggedTimeMicros: e.GetLoggedTimeUnixMicros()}
		if err := m.state.Apply(mark, func(*persistence.Txn) error { return nil }); err != nil {
			return err
		}
		out.Results = append(out.Results, engine.Result{Index: e.Index, Term: e.Term, Reply: engine.ErrorReply(orrery.FieldErrorf(orrery.CodeValidation, "batch",
			"command %s/%s writes more than the partition's transaction limit of %d bytes; split it",
			e.GetPrincipal(), commandID(e), m.state.MaxBatchBytes()))})
		return nil
	}
	half := len(entries) / 2
	if err := m.applySplit(entries[:half], entries[half-1].Index, out); err != nil {
		return err
	}
	return m.applySplit(entries[half:], index, out)
}

// commandID is the command id of an entry's batch, for messages ("" when it does not decode).
func commandID(e replication.Entry) string {
	cmd := &orreryv1.PartitionCommand{}
	_ = proto.Unmarshal(e.GetCommand(), cmd)
	return cmd.GetBatch().GetCommandId()
}

// applyOnce applies entries in one transaction at mark index and the last entry's logged time.
func (m *machine) applyOnce(entries []replication.Entry, index uint64, out *engine.Applied) error {
	results := make([]engine.Result, 0, len(entries))
	var cached *kv.ReadCache
	var recorded *engine.Recorder
	var floored *kv.FloorView
	mark := persistence.AppliedMark{Index: index, LoggedTimeMicros: entries[len(entries)-1].GetLoggedTimeUnixMicros()}
	before, beforeVersion := m.limits.Load(), m.version.Load() // an entry may set them; a failed transaction takes that back
	err := m.state.Apply(mark, func(txn *persistence.Txn) error {
		floored = m.floors.View(txn)
		recorded = &engine.Recorder{View: floored}
		cached = kv.NewReadCache(recorded, m.warm) // every write goes through it
		for _, e := range entries {
			r, err := m.applyEntry(cached, e)
			if err != nil {
				return err
			}
			results = append(results, r)
		}
		if tamper := m.tamper.Swap(nil); tamper != nil {
			return (*tamper)(txn)
		}
		return nil
	})
	if err != nil {
		m.limits.Store(before)
		m.version.Store(beforeVersion)
		return err
	}
	cached.Promote() // applied: the next applies read what this one read and wrote
	out.Results = append(out.Results, results...)
	out.DueWrites = append(out.DueWrites, recorded.Writes...)
	out.Visible = append(out.Visible, recorded.Visible...)
	out.Floors = append(out.Floors, floored.Promote())
	if recorded.MinDue > 0 && (out.MinDueWritten == 0 || recorded.MinDue < out.MinDueWritten) {
		out.MinDueWritten = recorded.MinDue
	}
	return nil
}

// applyEntry applies one entry's command (engine.ApplyEntry) under the partition's limits,
// never this silo's flags, and observes what it did: the enqueues of a due command, the
// partition's new limits after a SetLimits.
func (m *machine) applyEntry(v kv.View, e replication.Entry) (engine.Result, error) {
	r := engine.Result{Index: e.Index, Term: e.Term}
	applier := m.applier
	applier.Limits, applier.ApplyVersion = *m.limits.Load(), m.version.Load()
	out, err := engine.ApplyEntry(applier, v, e.GetPrincipal(), e.GetCommand(), e.GetLoggedTimeUnixMicros())
	if err != nil {
		return r, orrery.Wrap(orrery.CodeOf(err), err, "partition %d: entry %d", m.n, e.Index)
	}
	r.Reply, r.Waiting = out.Reply, out.Waiting
	if out.DueReceipt != nil {
		m.observeEnqueues(v, out.Command.GetBatch(), out.DueReceipt)
	}
	if out.Reply.GetError() == nil && !out.Command.GetDue() && setsLimits(out.Command.GetBatch()) {
		lim, err := batch.LoadLimits(v)
		if err != nil {
			return r, err
		}
		m.limits.Store(&lim)
	}
	if out.Reply.GetError() == nil && !out.Command.GetDue() && setsApplyVersion(out.Command.GetBatch()) {
		version, err := batch.LoadApplyVersion(v)
		if err != nil {
			return r, err
		}
		m.version.Store(version)
	}
	return r, nil
}

// setsApplyVersion reports whether b carries a SetApplyVersion mutation.
func setsApplyVersion(b *orreryv1.Batch) bool {
	return slices.ContainsFunc(b.GetMutations(), func(m *orreryv1.Mutation) bool { return m.GetSetApplyVersion() != nil })
}
