package replication

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/persistence"
)

// DriverConfig configures a Driver.
type DriverConfig struct {
	Groups       *Groups
	Log          persistence.RaftLog
	Transport    Transport
	StateMachine StateMachine
	// Clock ticks Groups and reads the now Propose stamps with. Default clock.Real().
	Clock clock.Clock
	// TickInterval is the time one Raft tick stands for. Default 100 ms.
	TickInterval time.Duration
}

// Driver performs the rounds of Groups: it ticks them every TickInterval of its clock,
// and whenever a group has work it installs the snapshots Raft accepted, persists the round
// (one RaftLog.Persist), sends its messages, applies its committed entries, settles its
// outcomes, advances, sends the snapshots Raft asked for and compacts the logs; and it answers
// Read calls once Raft confirmed them and the state applied far enough. Step, Receive,
// ReceiveSnapshot, ReportSnapshot, Propose, Read, Status and the membership changes (AddLearner,
// PromoteLearner, RemoveReplica, TransferLeadership) may be called from any goroutine.
// Tick and RunRound are what its goroutine does; tests that step replicas themselves call them
// instead of Start.
type Driver struct {
	cfg     DriverConfig
	mu      sync.Mutex // guards Groups, inbound and reads
	inbound []InboundSnapshot
	// rebuilds are the rebuild streams delivered (ReceiveSnapshot), installed at the start
	// of the next round.
	rebuilds []InboundSnapshot
	reads    driverReads
	wake     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	err      error // the fatal error that stopped the loop; read after done is closed
	tick     clock.Timer
	started  bool
	// observer receives each round's timing (ObserveRounds); nil when none does.
	observer atomic.Pointer[func(RoundTiming)]
	// leads is every hosted group's Lead as of the last round (or Open), for Lead.
	leads atomic.Pointer[map[int]Lead]
	// applies are the committed entries handed to the state machine and not yet applied.
	applies *applies
	// snapshots are the snapshot sends a round deferred until their groups' applies end, and
	// snapshotsDeferred counts them; only the driver's goroutine touches them.
	snapshots         []SnapshotSend
	snapshotsDeferred int
}

// RoundTiming is what one round the driver performed took, as its clock measured it.
type RoundTiming struct {
	// Persist is how long the round's RaftLog.Persist (one synced write) took; zero when the
	// round wrote nothing.
	Persist time.Duration
	// PersistedEntries counts the log entries Persist wrote; Committed counts the
	// PartitionEntries handed to the state machine.
	PersistedEntries, Committed int
	// Duration is the whole round, from collecting it to its last compaction.
	Duration time.Duration
}

// ObserveRounds makes fn receive the timing of every round performed from now on (nil: stop).
// fn runs on the driver's goroutine after each round that succeeded and must not block.
func (d *Driver) ObserveRounds(fn func(RoundTiming)) {
	if fn == nil {
		d.observer.Store(nil)
		return
	}
	d.observer.Store(&fn)
}

// NewDriver returns a driver that is not running yet.
func NewDriver(cfg DriverConfig) *Driver {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = 100 * time.Millisecond
	}
	d := &Driver{cfg: cfg, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	d.applies = newApplies(d.signal)
	return d
}

// Start runs the loop on a goroutine of its own until Stop or a fatal error. Call it once.
func (d *Driver) Start() {
	d.mu.Lock()
	d.started = true
	d.mu.Unlock()
	d.armTick()
	go d.run()
}

// Stop ends the loop (if Start ran) and returns the fatal error that ended it first, if any.
func (d *Driver) Stop() error {
	d.mu.Lock()
	started := d.started
	select {
	case <-d.stop:
	default:
		close(d.stop)
	}
	if d.tick != nil {
		d.tick.Stop()
	}
	d.mu.Unlock()
	if !started {
		return nil
	}
	<-d.done
	return d.err
}

// Done is closed once the loop has ended; Stop returns why.
func (d *Driver) Done() <-chan struct{} { return d.done }

func (d *Driver) armTick() {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.stop:
		return
	default:
	}
	d.tick = d.cfg.Clock.AfterFunc(d.cfg.TickInterval, func() {
		d.Tick()
		d.armTick()
	})
}

func (d *Driver) run() {
	defer close(d.done)
	for {
		select {
		case <-d.stop:
			return
		case <-d.wake:
		}
		for {
			did, err := d.RunRound()
			if err != nil {
				d.err = err
				return
			}
			if !did {
				break
			}
		}
	}
}

// signal wakes the loop.
func (d *Driver) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Tick advances every group by one Raft tick.
func (d *Driver) Tick() {
	d.mu.Lock()
	d.cfg.Groups.Tick()
	d.mu.Unlock()
	d.signal()
}

// Step hands one group a message from another replica; it reports Groups' refusal.
func (d *Driver) Step(group int, m *raftpb.Message) error {
	d.mu.Lock()
	err := d.cfg.Groups.Step(group, m)
	d.mu.Unlock()
	d.signal()
	return err
}

// Receive steps a batch a Transport delivered, ignoring the messages Groups refuses
// (for a group not hosted here, from a replica outside the group): Raft re-sends what matters.
func (d *Driver) Receive(msgs []Message) {
	d.mu.Lock()
	for _, m := range msgs {
		_ = d.cfg.Groups.Step(m.Group, m.Raft)
	}
	d.mu.Unlock()
	d.signal()
}

// ReceiveSnapshot queues a snapshot a Transport delivered; the next round steps it and, if
// Raft accepts it, installs its state. A rebuild (in.Rebuild) is installed at the start of the
// next round unless refused (see the package doc, "Rebuilds"). in.Done is called once that is
// settled.
func (d *Driver) ReceiveSnapshot(in InboundSnapshot) {
	d.mu.Lock()
	if in.Rebuild {
		d.rebuilds = append(d.rebuilds, in)
	} else {
		d.inbound = append(d.inbound, in)
	}
	d.mu.Unlock()
	d.signal()
}

// rebuild installs the rebuild streams delivered since the last round: each one's state
// replaces its group's (StateMachine.Install at the header's index and logged time) and the
// group reopens from its log above that index. One refused (ErrRebuildLeader,
// ErrRebuildTooOld, an unknown group) or whose chunks fail leaves the state as it was; its
// Done says why. It runs at the start of a round, when none is outstanding; a rebuild of a
// group whose entries are still applying waits for a round after they have.
func (d *Driver) rebuild(busy map[int]bool) error {
	d.mu.Lock()
	rebuilds := d.rebuilds
	d.rebuilds = nil
	for _, in := range rebuilds {
		if busy[in.Group] {
			d.rebuilds = append(d.rebuilds, in)
		}
	}
	d.mu.Unlock()
	for _, in := range rebuilds {
		if busy[in.Group] {
			continue
		}
		meta, err := snapshotMeta(in.Raft.GetSnapshot())
		if err == nil {
			d.mu.Lock()
			err = d.cfg.Groups.rebuildable(in.Group, meta.Index)
			d.mu.Unlock()
		}
		if err != nil {
			in.Done(err)
			continue
		}
		chunks := &watchedChunks{Chunks: in.Chunks}
		if err := d.cfg.StateMachine.Install(in.Group, meta, chunks); err != nil {
			if chunks.err == nil || !errors.Is(err, chunks.err) {
				return fmt.Errorf("rebuild raft group %d at %d: %w", in.Group, meta.Index, err)
			}
			in.Done(chunks.err)
			continue
		}
		d.mu.Lock()
		lost, err := d.cfg.Groups.rebuilt(in.Group, Applied{Index: meta.Index, LoggedTimeMicros: meta.LoggedTimeMicros})
		d.mu.Unlock()
		if err != nil {
			return fmt.Errorf("rebuild raft group %d at %d: %w", in.Group, meta.Index, err)
		}
		if len(lost) > 0 {
			d.cfg.StateMachine.Settle(lost)
		}
		in.Done(nil)
	}
	return nil
}

// ReportSnapshot tells Groups how a snapshot this replica sent to replica to for group
// ended: err nil once the follower installed it.
func (d *Driver) ReportSnapshot(group int, to uint64, err error) {
	d.mu.Lock()
	d.cfg.Groups.ReportSnapshot(group, to, err == nil)
	d.mu.Unlock()
	d.signal()
}

// Propose proposes a command to group, stamped from the driver's clock (Groups.Propose).
func (d *Driver) Propose(group int, principal string, command []byte) (Proposal, error) {
	now := d.cfg.Clock.Now()
	d.mu.Lock()
	p, err := d.cfg.Groups.Propose(group, principal, command, now)
	d.mu.Unlock()
	d.signal()
	return p, err
}

// Lead returns group's Lead as of the last round, without taking the driver's lock: what a
// replica consults on every request. A change of leadership always comes with a round, so it
// is at most one round old; a Propose on a replica that no longer leads still fails
// ErrNotLeader. ok is false for a group not hosted here (as of that round).
func (d *Driver) Lead(group int) (Lead, bool) {
	leads := d.leads.Load()
	if leads == nil {
		return Lead{}, false
	}
	l, ok := (*leads)[group]
	return l, ok
}

// publishLeads publishes every hosted group's Lead. The caller holds mu.
func (d *Driver) publishLeads() {
	leads := d.cfg.Groups.leads()
	d.leads.Store(&leads)
}

// Status returns group's status (Groups.Status).
func (d *Driver) Status(group int) (Status, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg.Groups.Status(group)
}

// ErrSnapshotRefused settles an inbound snapshot Raft did not take (it is not newer than what
// this replica has committed, or this replica does not follow the sender's term).
var ErrSnapshotRefused = errors.New("snapshot refused by raft")

// RunRound performs one round if some group has work, in the etcd raft order: install the
// states of the snapshots Raft accepted, persist, send, apply and settle, advance; then send
// the snapshots Raft asked for and compact the logs. Each group waits for its own applies, not
// for the others' (see applies): a group whose committed entries are still applying is left
// out of the round, with the inbound snapshots and rebuilds for it, until they have. Before it
// collects the round it makes the ReadIndex requests of queued Read calls, and it answers the
// confirmed ones whose groups have applied through their indexes. It reports whether there was
// a round; an error is fatal (never continue after a failed Persist or apply: what reached the
// disk is unknown).
func (d *Driver) RunRound() (bool, error) {
	if err := d.applies.failed(); err != nil {
		return false, fmt.Errorf("apply raft round: %w", err)
	}
	busy := d.applies.busyGroups()
	if err := d.rebuild(busy); err != nil {
		return false, err
	}
	d.sendDeferredSnapshots(busy)
	observe := d.observer.Load()
	var timing RoundTiming
	var roundStart time.Time
	if observe != nil {
		roundStart = d.cfg.Clock.Now()
	}
	d.mu.Lock()
	inbound := d.inbound
	d.inbound = nil
	var stepped []InboundSnapshot
	var refused []refusal
	for _, in := range inbound {
		if busy[in.Group] {
			d.inbound = append(d.inbound, in) // stepped once the group's applies have ended
			continue
		}
		if err := d.cfg.Groups.StepSnapshot(in.Group, in.Raft); err != nil {
			refused = append(refused, refusal{in, err})
			continue
		}
		stepped = append(stepped, in)
	}
	d.issueReads()
	round, err := d.cfg.Groups.Ready(busy)
	if round != nil {
		d.confirmReads(round)
	}
	d.answerReads(busy)
	d.mu.Unlock()
	for _, r := range refused {
		r.in.Done(r.err)
	}
	if err != nil {
		return false, err
	}
	if round == nil {
		for _, in := range stepped {
			in.Done(ErrSnapshotRefused)
		}
		return false, nil
	}
	installed, err := d.install(round, stepped)
	if err != nil {
		return false, err
	}
	// The committed entries a previous round persisted apply now, while this round persists:
	// a command waits for the sync that made its entry durable, not for the next one too. The
	// rest (a follower's entries that this very round appends) apply after the persist.
	durable, appended := round.splitDurable()
	for _, c := range durable {
		if err := d.apply(c); err != nil {
			return false, err
		}
	}
	if len(round.Writes) > 0 {
		var persistStart time.Time
		if observe != nil {
			persistStart = d.cfg.Clock.Now()
		}
		if err := d.cfg.Log.Persist(round.Writes); err != nil {
			return false, fmt.Errorf("persist raft round: %w", err)
		}
		if observe != nil {
			timing.Persist = d.cfg.Clock.Now().Sub(persistStart)
			for _, w := range round.Writes {
				timing.PersistedEntries += len(w.Entries)
			}
		}
	}
	for _, in := range installed {
		in.Done(nil)
	}
	for _, out := range round.Messages {
		d.cfg.Transport.Send(out.To, out.Messages)
	}
	for _, c := range appended {
		if err := d.apply(c); err != nil {
			return false, err
		}
	}
	if len(round.Outcomes) > 0 {
		d.cfg.StateMachine.Settle(round.Outcomes)
	}
	d.mu.Lock()
	err = d.cfg.Groups.Advance(round)
	if err == nil {
		d.settleReads()
		d.answerReads(d.applies.busyGroups())
	}
	d.publishLeads()
	d.mu.Unlock()
	if err != nil {
		return true, err
	}
	// A snapshot is read from the state at Groups' applied index, so one whose group is still
	// applying the entries this round handed over waits for a later round.
	for _, s := range round.Snapshots {
		if d.applies.busy(s.Group) {
			d.snapshots = append(d.snapshots, s)
			d.snapshotsDeferred++
			continue
		}
		d.sendSnapshot(s)
	}
	// A compaction reaches no further than the applied index the group had when the round was
	// collected, which its applies had reached (the group was not busy).
	for _, c := range round.Compactions {
		if err := d.cfg.Log.Compact(c.Group, c.Index, c.ConfState); err != nil {
			return true, fmt.Errorf("compact raft group %d before %d: %w", c.Group, c.Index, err)
		}
	}
	if observe != nil {
		for _, c := range round.Committed {
			timing.Committed += len(c.Entries)
		}
		timing.Duration = d.cfg.Clock.Now().Sub(roundStart)
		(*observe)(timing)
	}
	return true, nil
}

// apply hands c to the state machine, counting it among its group's applies until the state
// machine reports it applied.
func (d *Driver) apply(c Committed) error {
	done := d.applies.handOver(c.Group)
	if err := d.cfg.StateMachine.Apply(c, done); err != nil {
		done(nil)
		return fmt.Errorf("apply raft group %d: %w", c.Group, err)
	}
	return nil
}

// sendDeferredSnapshots sends the snapshots a round deferred whose groups are no longer busy.
func (d *Driver) sendDeferredSnapshots(busy map[int]bool) {
	if len(d.snapshots) == 0 {
		return
	}
	waiting := d.snapshots[:0:0]
	for _, s := range d.snapshots {
		if busy[s.Group] {
			waiting = append(waiting, s)
			continue
		}
		d.sendSnapshot(s)
	}
	d.snapshots = waiting
}

// refusal is an inbound snapshot Groups refused to step, and why.
type refusal struct {
	in  InboundSnapshot
	err error
}

// install installs the state of each snapshot Raft accepted in round, from the inbound
// snapshot it came with, and settles the inbound snapshots Raft did not take. A snapshot whose
// chunks fail is reported failed and its group discarded from the round; it returns the
// installed ones, to be settled once the round is persisted.
func (d *Driver) install(round *Round, stepped []InboundSnapshot) (installed []InboundSnapshot, err error) {
	taken := make([]bool, len(stepped))
	for _, r := range slices.Clone(round.Restores) {
		found := -1
		for i, in := range stepped {
			md := in.Raft.GetSnapshot().GetMetadata()
			if in.Group == r.Group && md.GetIndex() == r.Meta.Index && md.GetTerm() == r.Meta.Term {
				found = i
			}
		}
		if found < 0 {
			return nil, fmt.Errorf("raft group %d: raft restored a snapshot at %d that came without its state", r.Group, r.Meta.Index)
		}
		taken[found] = true
		in := stepped[found]
		chunks := &watchedChunks{Chunks: in.Chunks}
		if err := d.cfg.StateMachine.Install(r.Group, r.Meta, chunks); err != nil {
			if chunks.err == nil || !errors.Is(err, chunks.err) {
				return nil, fmt.Errorf("install a snapshot of raft group %d at %d: %w", r.Group, r.Meta.Index, err)
			}
			d.mu.Lock()
			err := d.cfg.Groups.Discard(round, r.Group)
			d.mu.Unlock()
			if err != nil {
				return nil, err
			}
			in.Done(chunks.err)
			continue
		}
		installed = append(installed, in)
	}
	for i, in := range stepped {
		if !taken[i] {
			in.Done(ErrSnapshotRefused)
		}
	}
	return installed, nil
}

// watchedChunks records the error that broke an inbound stream.
type watchedChunks struct {
	Chunks
	err error
}

func (c *watchedChunks) Next() ([]byte, error) {
	chunk, err := c.Chunks.Next()
	if err != nil && err != io.EOF {
		c.err = err
	}
	return chunk, err
}

// sendSnapshot takes a state snapshot of s.Group and hands it to the transport, or reports the
// send failed when it cannot.
func (d *Driver) sendSnapshot(s SnapshotSend) {
	reader, err := d.cfg.StateMachine.Snapshot(s.Group)
	if err != nil {
		d.ReportSnapshot(s.Group, s.To, err)
		return
	}
	d.mu.Lock()
	m, err := d.cfg.Groups.SnapshotMessage(s, reader.AppliedIndex())
	d.mu.Unlock()
	if err != nil {
		_ = reader.Close()
		d.ReportSnapshot(s.Group, s.To, err)
		return
	}
	d.cfg.Transport.SendSnapshot(s.To, OutboundSnapshot{
		Group:  s.Group,
		Raft:   m,
		Chunks: boundedReader{reader},
		Done:   func(err error) { d.ReportSnapshot(s.Group, s.To, err) },
	})
}

// ErrChunkTooBig fails a snapshot whose reader returned a chunk over MaxSnapshotChunkBytes.
var ErrChunkTooBig = errors.New("snapshot chunk over MaxSnapshotChunkBytes")

// boundedReader fails the stream at a chunk over MaxSnapshotChunkBytes.
type boundedReader struct{ SnapshotReader }

func (r boundedReader) Next() ([]byte, error) {
	chunk, err := r.SnapshotReader.Next()
	if err == nil && len(chunk) > MaxSnapshotChunkBytes {
		return nil, fmt.Errorf("%w: %d bytes", ErrChunkTooBig, len(chunk))
	}
	return chunk, err
}

// SetClockUnfit tells the groups whether this silo's clock is judged unfit
// (Groups.SetClockUnfit).
func (d *Driver) SetClockUnfit(unfit bool) {
	d.mu.Lock()
	d.cfg.Groups.SetClockUnfit(unfit)
	d.mu.Unlock()
	d.signal()
}

// Reconnected tells the groups that this replica can reach its peers from now on
// (Groups.Reconnected).
func (d *Driver) Reconnected() {
	d.mu.Lock()
	d.cfg.Groups.Reconnected()
	d.mu.Unlock()
}

// SetClockUnjudged tells the groups whether this silo has yet to judge its clock
// (Groups.SetClockUnjudged).
func (d *Driver) SetClockUnjudged(unjudged bool) {
	d.mu.Lock()
	d.cfg.Groups.SetClockUnjudged(unjudged)
	d.mu.Unlock()
	d.signal()
}

// Campaign makes group campaign at once (Groups.Campaign).
func (d *Driver) Campaign(group int) error {
	d.mu.Lock()
	err := d.cfg.Groups.Campaign(group)
	d.mu.Unlock()
	d.signal()
	return err
}

// Open starts hosting group from its persisted Raft state while the loop runs (Groups.Open).
func (d *Driver) Open(group int, applied Applied) error {
	d.mu.Lock()
	err := d.cfg.Groups.Open(group, applied)
	d.publishLeads()
	d.mu.Unlock()
	d.signal()
	return err
}

// AddLearner adds replica to group as a learner (Groups.AddLearner).
func (d *Driver) AddLearner(group int, replica uint64) error {
	return d.change(func(g *Groups) error { return g.AddLearner(group, replica) })
}

// PromoteLearner makes learner replica a voter of group (Groups.PromoteLearner).
func (d *Driver) PromoteLearner(group int, replica uint64) error {
	return d.change(func(g *Groups) error { return g.PromoteLearner(group, replica) })
}

// RemoveReplica removes replica from group (Groups.RemoveReplica).
func (d *Driver) RemoveReplica(group int, replica uint64) error {
	return d.change(func(g *Groups) error { return g.RemoveReplica(group, replica) })
}

// TransferLeadership hands group's leadership to voter to (Groups.TransferLeadership).
func (d *Driver) TransferLeadership(group int, to uint64) error {
	return d.change(func(g *Groups) error { return g.TransferLeadership(group, to) })
}

// change calls a membership method of Groups and wakes the loop.
func (d *Driver) change(call func(*Groups) error) error {
	d.mu.Lock()
	err := call(d.cfg.Groups)
	d.mu.Unlock()
	d.signal()
	return err
}
