package replication

import (
	"errors"
	"fmt"
	"io"
	"log"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/persistence"
)

// Errors Propose, ReadIndex and Driver.Read wrap in an *orrery.Error of code Unavailable; match
// them with errors.Is.
var (
	// ErrNotLeader: this replica does not lead the group.
	ErrNotLeader = errors.New("not the group's leader")
	// ErrNotCaughtUp: this replica leads the group but has not yet applied an entry of its
	// own term, so entries of earlier terms may still be unapplied and their logged times
	// unknown.
	ErrNotCaughtUp = errors.New("leader has not applied its own term's first entry")
	// ErrUnknownGroup: this replica does not host the group.
	ErrUnknownGroup = errors.New("group not hosted here")
	// ErrClockUnfit: this replica's silo judged its wall clock beyond the bound from most of
	// its peers' (SetClockUnfit), so it stamps no logged time in a group that has another
	// voter to lead it.
	ErrClockUnfit = errors.New("this silo's clock is off its peers' beyond the bound")
	// ErrConfNotCurrent: the group has not yet applied again the entries its log had
	// committed when it was opened, so its configuration may be an old one (Campaign).
	ErrConfNotCurrent = errors.New("configuration not applied again since the group opened")
)

// Config configures Groups. Zero fields take their defaults.
type Config struct {
	// ReplicaID is this silo's replica id in every group it hosts; not zero.
	ReplicaID uint64
	// ElectionTicks is the number of ticks a follower waits without hearing from a leader
	// before it campaigns (randomized by Raft in [ElectionTicks, 2×ElectionTicks)), and after
	// which a leader that heard from no quorum steps down (CheckQuorum). Default 10.
	ElectionTicks int
	// HeartbeatTicks is the number of ticks between a leader's heartbeats. Default 1.
	HeartbeatTicks int
	// MaxSizePerMsg bounds the bytes of entries in one append message. Default 1 MiB.
	MaxSizePerMsg uint64
	// MaxInflightMsgs bounds the append messages in flight to one follower. Default 256.
	MaxInflightMsgs int
	// MaxUncommittedBytes bounds the bytes of a leader's uncommitted entries; beyond it
	// Propose fails with Unavailable. Default 64 MiB.
	MaxUncommittedBytes uint64
	// MaxLogEntries is the number of entries a group's log holds before it is compacted
	// (see the package doc, "Log compaction"). Default 10,000.
	MaxLogEntries int
	// Logger receives Raft's own logs. Default: discarded.
	Logger raft.Logger
}

func (c Config) withDefaults() Config {
	if c.ElectionTicks == 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = 1
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = 1 << 20
	}
	if c.MaxInflightMsgs == 0 {
		c.MaxInflightMsgs = 256
	}
	if c.MaxUncommittedBytes == 0 {
		c.MaxUncommittedBytes = 64 << 20
	}
	if c.MaxLogEntries <= 0 {
		c.MaxLogEntries = 10_000
	}
	if c.Logger == nil {
		c.Logger = &raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)}
	}
	return c
}

// Groups is the pure multi-group Raft core: one raft.RawNode per group this replica hosts, all
// driven by one round loop (see the package doc for the contract). It is not safe for
// concurrent use; its driver serializes calls.
type Groups struct {
	cfg    Config
	log    persistence.RaftLog
	groups map[int]*group
	order  []int  // hosted groups, ascending: rounds visit them in this order
	round  *Round // the round Ready returned and Advance has not yet taken back
	// clockUnfit is SetClockUnfit's: this replica takes no leadership a peer could take, and
	// stamps nothing where another voter could. clockUnjudged is SetClockUnjudged's: it takes
	// no leadership a peer could take.
	clockUnfit, clockUnjudged bool
}

// group is one hosted group's RawNode and what Groups tracks beside it.
type group struct {
	id   int
	node *raft.RawNode
	// lastIndex is the index of the last entry in the log, counting proposals appended since
	// the last Ready; firstIndex is the first one the log holds (or will, once a round's
	// compaction is done).
	lastIndex, firstIndex uint64
	// appliedIndex and appliedTerm are Raft's applied position. skipThrough, when above it,
	// is the state machine's own applied index: a snapshot installed there before a crash
	// kept the log from recording it, and committed entries up to it are not handed out
	// again.
	appliedIndex  uint64
	appliedTerm   uint64
	skipThrough   uint64
	appliedMicros int64 // logged time of the last applied PartitionEntry
	stampedMicros int64 // logged time of the last entry this replica stamped
	// confState is the conf state as of appliedIndex; confs the conf states since the log's
	// snapshot record, ascending by the index each took effect at (the first the record's), so
	// that a compaction records the one current at its index.
	confState *raftpb.ConfState
	confs     []confAt
	// pendingConfIndex is the index of the last conf change this replica proposed: pending
	// while above appliedIndex.
	pendingConfIndex uint64
	pending          []Proposal
	// openCommit is the commit index the group's persisted state had when it was opened: once
	// appliedIndex reaches it, the conf changes of the log have been applied again and
	// confState is current.
	openCommit uint64
	// leading is whether this replica led the group as of the last Ready that reported a
	// change of Raft's soft state; leaderTransitions counts the changes of it since Open.
	leading           bool
	leaderTransitions uint64
	// leaderlessTicks counts the ticks since this replica last knew a leader of the group.
	leaderlessTicks int
}

// Applied is what a group's state machine has applied, handed to Open on a restart: the last
// applied index and the logged time of the last applied entry. The zero value opens a group
// that has applied nothing.
type Applied struct {
	Index            uint64
	LoggedTimeMicros int64
}

// New returns a Groups hosting no group yet; Open adds groups.
func New(cfg Config, raftLog persistence.RaftLog) (*Groups, error) {
	if cfg.ReplicaID == 0 {
		return nil, orrery.Invalid("ReplicaID", "must not be zero")
	}
	return &Groups{cfg: cfg.withDefaults(), log: raftLog, groups: map[int]*group{}}, nil
}

// Open starts hosting group from its persisted Raft state, which Bootstrap, an earlier life of
// this replica or nothing wrote. applied is what the group's state machine has already applied
// (or installed): committed entries after applied.Index are handed out again by the coming
// rounds. A group with nothing persisted (no voters) has this replica wait for a leader to
// send it a snapshot and the log: it never campaigns until a conf change makes it a voter.
//
// Raft starts at the log's snapshot record, whose conf state InitialState returns, and the
// coming rounds hand it the committed entries after the record again, so that it applies their
// conf changes once more; their PartitionEntries up to applied.Index are not handed out (see
// the package doc, "Membership").
func (g *Groups) Open(id int, applied Applied) error {
	if _, ok := g.groups[id]; ok {
		return fmt.Errorf("raft group %d: already open", id)
	}
	gr, err := g.open(id, applied)
	if err != nil {
		return err
	}
	g.groups[id] = gr
	i, _ := slices.BinarySearch(g.order, id)
	g.order = slices.Insert(g.order, i, id)
	return nil
}

// open builds group id's RawNode on its persisted Raft state.
func (g *Groups) open(id int, applied Applied) (*group, error) {
	storage, err := g.log.Storage(id)
	if err != nil {
		return nil, fmt.Errorf("raft group %d: %w", id, err)
	}
	first, err := storage.FirstIndex()
	if err != nil {
		return nil, fmt.Errorf("raft group %d: first index: %w", id, err)
	}
	last, err := storage.LastIndex()
	if err != nil {
		return nil, fmt.Errorf("raft group %d: last index: %w", id, err)
	}
	hard, confState, err := storage.InitialState()
	if err != nil {
		return nil, fmt.Errorf("raft group %d: initial state: %w", id, err)
	}
	// Raft applies the log again from its snapshot record, so that it sees every conf change
	// after it. The entries up to the state's own applied index are not handed out again,
	// including those of a state installed from a snapshot whose round then never reached the
	// log, which is ahead of the log's commit.
	appliedIndex := first - 1
	appliedTerm, err := storage.Term(appliedIndex)
	if err != nil {
		return nil, fmt.Errorf("raft group %d: term at applied index %d: %w", id, appliedIndex, err)
	}
	node, err := raft.NewRawNode(&raft.Config{
		ID:                        g.cfg.ReplicaID,
		ElectionTick:              g.cfg.ElectionTicks,
		HeartbeatTick:             g.cfg.HeartbeatTicks,
		Storage:                   storage,
		Applied:                   appliedIndex,
		MaxSizePerMsg:             g.cfg.MaxSizePerMsg,
		MaxInflightMsgs:           g.cfg.MaxInflightMsgs,
		MaxUncommittedEntriesSize: g.cfg.MaxUncommittedBytes,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
		Logger:                    g.cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("raft group %d: %w", id, err)
	}
	gr := &group{
		id:            id,
		node:          node,
		lastIndex:     last,
		firstIndex:    first,
		appliedIndex:  appliedIndex,
		appliedTerm:   appliedTerm,
		appliedMicros: applied.LoggedTimeMicros,
		openCommit:    hard.GetCommit(),
	}
	gr.resetConfs(appliedIndex, confState)
	if applied.Index > appliedIndex {
		gr.skipThrough = applied.Index
	}
	return gr, nil
}

// Tick advances every group's logical clock by one tick: heartbeats, elections, quorum checks.
func (g *Groups) Tick() {
	for _, id := range g.order {
		gr := g.groups[id]
		gr.node.Tick()
		if gr.node.BasicStatus().Lead == raft.None {
			gr.leaderlessTicks++
		} else {
			gr.leaderlessTicks = 0
		}
	}
}

// Reconnected tells every group that this replica can reach its peers from now on (its silo
// attached a transport, after joining or rejoining its cluster): the count of ticks without a
// leader starts again, so that the time it could hear nobody (its silo's join) does not count
// toward the unfitCampaignElections election timeouts after which an unfit or unjudged replica
// takes the pre-votes granted to it.
func (g *Groups) Reconnected() {
	for _, gr := range g.groups {
		gr.leaderlessTicks = 0
	}
}

// unfitCampaignElections is how many election timeouts a clock-unfit replica lets pass
// without a leader before it takes the pre-votes granted to it after all (SetClockUnfit).
const unfitCampaignElections = 3

// Step hands group a message another replica sent. Messages for a group not hosted here, or
// from a replica outside the group, are refused with an error the caller may ignore (Raft
// re-sends what matters); so is a snapshot message, which comes with its state through
// StepSnapshot.
func (g *Groups) Step(id int, m *raftpb.Message) error {
	gr, ok := g.groups[id]
	if !ok {
		return fmt.Errorf("raft group %d: %w", id, ErrUnknownGroup)
	}
	if m.GetType() == raftpb.MsgSnap {
		return fmt.Errorf("raft group %d: %w", id, ErrSnapshotWithoutState)
	}
	if g.refusesToBeElected(gr, m) {
		return fmt.Errorf("raft group %d: %s from %d dropped: %w", id, m.GetType(), m.GetFrom(), ErrClockUnfit)
	}
	return gr.node.Step(m)
}

// refusesToBeElected reports whether this replica drops m, which would elect it, because of
// its silo's clock (SetClockUnfit, SetClockUnjudged): a transfer's MsgTimeoutNow while unfit
// or unjudged, a granted pre-vote while unfit or unjudged until the group has had no leader
// for unfitCampaignElections election timeouts.
func (g *Groups) refusesToBeElected(gr *group, m *raftpb.Message) bool {
	switch {
	case !electsThisReplica(m):
		return false
	case m.GetType() == raftpb.MsgTimeoutNow:
		return g.clockUnfit || g.clockUnjudged
	default:
		return (g.clockUnfit || g.clockUnjudged) && gr.leaderlessTicks < unfitCampaignElections*g.cfg.ElectionTicks
	}
}

// electsThisReplica reports whether m would have this replica lead: a pre-vote granted to it
// (PreVote is on, so every election it starts on its own begins with one), or the leader's
// MsgTimeoutNow ending a leadership transfer to it (which campaigns without a pre-vote).
func electsThisReplica(m *raftpb.Message) bool {
	switch m.GetType() {
	case raftpb.MsgPreVoteResp:
		return !m.GetReject()
	case raftpb.MsgTimeoutNow:
		return true
	}
	return false
}

// SetClockUnfit tells every group whether this replica's silo judged its wall clock beyond
// the bound from most of its peers' (cluster/clockoffset), the clock Propose stamps logged
// time from. While unfit, the replica takes no leadership its peers could take: Step drops
// the MsgTimeoutNow of a leadership transfer to it (the leader abandons the transfer after an
// election timeout), and the pre-votes granted to it, so an election it starts does not get
// past its pre-vote, until the group has had no leader for unfitCampaignElections election
// timeouts: then no fit voter could win (a fit voter whose log is behind this replica's gets
// no vote from it), and it takes the leadership to hand it over. Propose refuses with
// ErrClockUnfit in a group with another voter, so a leadership it holds (won that way, won
// before it was judged unfit, or whose vote was under way) stamps nothing until it is handed
// over (the silo's placement hands it to a fit voter, which Raft brings up to date first). A
// group whose only voter it is elects it and has it stamp, as nobody else can. Reads and
// configuration changes carry no logged time and are not refused.
func (g *Groups) SetClockUnfit(unfit bool) { g.clockUnfit = unfit }

// SetClockUnjudged tells every group whether this replica's silo has yet to judge its wall
// clock against its peers' (it has just started, or cannot tell): while it has, the replica
// takes no leadership its peers could take, as while unfit (SetClockUnfit): it refuses a
// transfer (the leader's silo may have judged it on what an earlier run of this silo answered,
// before a restart on another clock), and wins an election only once the group has had no
// leader for unfitCampaignElections election timeouts. A leadership it holds stamps as usual
// (it was fit when it took it, or nobody else could take it).
func (g *Groups) SetClockUnjudged(unjudged bool) { g.clockUnjudged = unjudged }

// Proposal identifies an accepted proposal: the log position its entry was appended at and
// the logged time stamped on it. One Outcome of a later round settles it.
type Proposal struct {
	Group            int
	Index            uint64
	Term             uint64
	LoggedTimeMicros int64
}

// Propose appends a PartitionEntry carrying principal and command to group's log, stamped with
// the logged time max(now in µs, last stamped + 1, last applied + 1). It fails with code
// Unavailable when this replica does not lead the group (ErrNotLeader), leads it but has not
// applied an entry of its own term (ErrNotCaughtUp), or Raft drops the proposal (too many
// uncommitted bytes, a leadership transfer under way), and with ErrClockUnfit while this
// replica's silo is clock-unfit (SetClockUnfit) and the group has another voter.
func (g *Groups) Propose(id int, principal string, command []byte, now time.Time) (Proposal, error) {
	gr, term, err := g.leading(id)
	if err != nil {
		return Proposal{}, err
	}
	if g.clockUnfit && len(gr.confState.GetVoters()) > 1 {
		return Proposal{}, orrery.Wrap(orrery.CodeUnavailable, ErrClockUnfit, "partition %d: handing the leadership over", id)
	}
	stamp := persistence.NextLoggedTime(max(gr.stampedMicros, gr.appliedMicros), now.UnixMicro())
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(&orreryv1.PartitionEntry{
		LoggedTimeUnixMicros: stamp,
		Principal:            principal,
		Command:              command,
	})
	if err != nil {
		return Proposal{}, orrery.Wrap(orrery.CodeInternal, err, "partition %d: encode entry", id)
	}
	if err := gr.node.Propose(data); err != nil {
		return Proposal{}, orrery.Wrap(orrery.CodeUnavailable, err, "partition %d", id)
	}
	gr.lastIndex++
	gr.stampedMicros = stamp
	p := Proposal{Group: id, Index: gr.lastIndex, Term: term, LoggedTimeMicros: stamp}
	gr.pending = append(gr.pending, p)
	return p, nil
}

// leading returns group id and the term it leads, or the Unavailable error that says why this
// replica cannot answer as its leader: it does not host the group (ErrUnknownGroup), does not
// lead it (ErrNotLeader), or leads it but has not applied an entry of its own term
// (ErrNotCaughtUp).
func (g *Groups) leading(id int) (*group, uint64, error) {
	gr, ok := g.groups[id]
	if !ok {
		return nil, 0, orrery.Wrap(orrery.CodeUnavailable, ErrUnknownGroup, "partition %d", id)
	}
	st := gr.node.BasicStatus()
	if st.RaftState != raft.StateLeader {
		return nil, 0, orrery.Wrap(orrery.CodeUnavailable, ErrNotLeader, "partition %d: leader is replica %d", id, st.Lead)
	}
	term := st.HardState.GetTerm()
	if gr.appliedTerm != term {
		return nil, 0, orrery.Wrap(orrery.CodeUnavailable, ErrNotCaughtUp, "partition %d: term %d, applied through term %d", id, term, gr.appliedTerm)
	}
	return gr, term, nil
}

// ReadIndex asks Raft to confirm that this replica still leads group before a read is
// answered from its state (Raft's ReadIndex, with ReadOnlySafe): the leader records its
// commit index C, then sends a heartbeat carrying the request; once a quorum of the group
// acknowledged one, a later round's Reads carry ReadState{group, C, ctx}, and the read may be
// answered from the state once it has applied through C. ctx identifies the request; the
// caller makes it unique.
//
// It refuses with the errors of Propose (code Unavailable): ErrUnknownGroup, ErrNotLeader
// (requests are never forwarded to the leader), and ErrNotCaughtUp for a leader that has not
// applied an entry of its own term. Raft would hold such a leader's requests until it commits
// an entry of its term, in a list it keeps across a loss of leadership (answering them only
// if this replica leads again); refusing keeps every request tied to the term it was made in.
//
// A request gets no ReadState when this replica stops leading the term before a quorum
// acknowledged it (Raft forgets its pending reads on every term change); while it leads the
// term, every heartbeat asks for the acknowledgements again. A group whose only voter is this
// replica gets its ReadState at once.
func (g *Groups) ReadIndex(id int, ctx []byte) error {
	gr, _, err := g.leading(id)
	if err != nil {
		return err
	}
	gr.node.ReadIndex(ctx)
	return nil
}

// Status is one group's state as this replica sees it.
type Status struct {
	Group int
	// Leader is the replica this one believes leads the group, 0 when it knows none.
	Leader uint64
	// Term is this replica's current term.
	Term uint64
	// AppliedIndex is the index of the last entry Advance recorded as applied.
	AppliedIndex uint64
	// AppliedLoggedTimeMicros is the logged time of the last PartitionEntry applied.
	AppliedLoggedTimeMicros int64
	// CanPropose reports whether this replica leads and has applied an entry of its own term,
	// so that Propose stamps (unless the silo is clock-unfit: SetClockUnfit).
	CanPropose bool
	// Voters and Learners are the group's configuration as of AppliedIndex, ascending.
	Voters, Learners []uint64
	// ConfCurrent reports whether the configuration is current: the group has applied again
	// every entry its log had committed when it was opened (the conf changes among them).
	// Before that, Voters and Learners are those of the log's snapshot record.
	ConfCurrent bool
	// ConfChangePending reports whether a conf change this replica proposed has not applied.
	ConfChangePending bool
	// Progress is, on the leader only, its view of every replica of the group, itself
	// included.
	Progress map[uint64]ReplicaProgress
	// CommitIndex is the highest index this replica knows to be committed.
	CommitIndex uint64
	// PendingProposals counts the proposals this replica made whose fate no round has
	// settled yet (neither committed nor lost).
	PendingProposals int
	// LeaderTransitions counts how often this replica became or stopped being the group's
	// leader since the group was opened here, as the rounds reported it.
	LeaderTransitions uint64
}

// Status returns group's status; ok is false when the group is not hosted here.
func (g *Groups) Status(id int) (st Status, ok bool) {
	gr, ok := g.groups[id]
	if !ok {
		return Status{}, false
	}
	bs := gr.node.BasicStatus()
	voters, learners := slices.Clone(gr.confState.GetVoters()), slices.Clone(gr.confState.GetLearners())
	slices.Sort(voters)
	slices.Sort(learners)
	return Status{
		Group:                   id,
		Leader:                  bs.Lead,
		Term:                    bs.HardState.GetTerm(),
		AppliedIndex:            max(gr.appliedIndex, gr.skipThrough),
		AppliedLoggedTimeMicros: gr.appliedMicros,
		CanPropose:              bs.RaftState == raft.StateLeader && gr.appliedTerm == bs.HardState.GetTerm(),
		Voters:                  voters,
		Learners:                learners,
		ConfChangePending:       gr.confChangePending(),
		ConfCurrent:             gr.appliedIndex >= gr.openCommit,
		Progress:                gr.progress(g.cfg.ReplicaID),
		CommitIndex:             bs.HardState.GetCommit(),
		PendingProposals:        len(gr.pending),
		LeaderTransitions:       gr.leaderTransitions,
	}, true
}

// Lead is the part of a group's Status a replica consults on every request, published by the
// Driver after each round so that reading it takes no lock (Driver.Lead).
type Lead struct {
	// Leader is the replica this one believes leads the group, 0 when it knows none.
	Leader uint64
	// Term is this replica's current term.
	Term uint64
	// CanPropose is Status.CanPropose.
	CanPropose bool
}

// leads returns the Lead of every hosted group.
func (g *Groups) leads() map[int]Lead {
	out := make(map[int]Lead, len(g.groups))
	for id, gr := range g.groups {
		bs := gr.node.BasicStatus()
		out[id] = Lead{
			Leader:     bs.Lead,
			Term:       bs.HardState.GetTerm(),
			CanPropose: bs.RaftState == raft.StateLeader && gr.appliedTerm == bs.HardState.GetTerm(),
		}
	}
	return out
}

// Hosted returns the ids of the groups hosted here, ascending.
func (g *Groups) Hosted() []int { return slices.Clone(g.order) }

// Campaign makes this replica campaign for group's leadership at once instead of waiting for
// its election timeout: for a replica that is its group's only voter, which then leads as soon
// as the campaign's round is persisted. It fails for a replica that is not a voter of the group
// as of its applied index (one opened empty, a learner, a removed replica), and, with
// ErrConfNotCurrent, before the group has applied again the entries its log had committed
// (a configuration it would campaign in may be an old one: a replica that was its group's
// only voter and then added others would otherwise elect itself alone).
func (g *Groups) Campaign(id int) error {
	gr, ok := g.groups[id]
	if !ok {
		return fmt.Errorf("raft group %d: %w", id, ErrUnknownGroup)
	}
	if gr.appliedIndex < gr.openCommit {
		return fmt.Errorf("raft group %d: applied %d of the %d committed when opened: %w", id, gr.appliedIndex, gr.openCommit, ErrConfNotCurrent)
	}
	if !slices.Contains(gr.confState.GetVoters(), g.cfg.ReplicaID) {
		return fmt.Errorf("raft group %d: replica %d is not a voter, so it cannot campaign", id, g.cfg.ReplicaID)
	}
	return gr.node.Campaign()
}
