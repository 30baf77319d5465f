package replication

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/persistence"
)

// Round is the work of every group that had some, in the order the caller must do it: install
// the states of Restores (or Discard the groups whose install failed); persist Writes with one
// RaftLog.Persist call; once it returned, send Messages; apply Committed and settle Outcomes;
// hand the round back to Advance; then send Snapshots and do Compactions. Reads are answered
// once their groups' states have applied through their indexes. Nothing in it may be kept
// after Advance except the entries' payloads and Reads.
type Round struct {
	// Restores are the snapshots Raft accepted this round, one per group at most: each
	// group's state must be installed before Writes are persisted.
	Restores []Restore
	// Writes holds, per group with something to persist, its new entries and hard state.
	Writes []persistence.RaftWrite
	// Messages are the messages to send, one batch per destination replica, by ascending id.
	Messages []Outbound
	// Committed holds, per group with newly committed entries, the PartitionEntries to apply,
	// in log order, by ascending group.
	Committed []Committed
	// Outcomes settle the proposals whose fate this round decided.
	Outcomes []Outcome
	// Snapshots are the followers this replica, as leader, must catch up by snapshot.
	Snapshots []SnapshotSend
	// Compactions are the log compactions the groups' applied indexes now allow.
	Compactions []Compaction
	// Reads are the read requests (Groups.ReadIndex) a quorum confirmed this round.
	Reads []ReadState

	readies []groupReady
}

// splitDurable divides the round's Committed in two, keeping each group's log order: the
// entries already in the persisted log (a previous round's Writes), which may apply before
// this round's Writes are persisted, and those this round's Writes append (a follower told of
// a commit index along with the entries it covers), which apply only once they are. A group
// whose entries fall on both sides appears in both, its durable part first; AppliedIndex of
// the durable part is its last entry's index (Raft's own entries between it and the appended
// part are recorded by the second).
func (r *Round) splitDurable() (durable, appended []Committed) {
	firstAppended := map[int]uint64{}
	for _, w := range r.Writes {
		if len(w.Entries) > 0 {
			firstAppended[w.Group] = w.Entries[0].GetIndex()
		}
	}
	for _, c := range r.Committed {
		first, ok := firstAppended[c.Group]
		if !ok {
			durable = append(durable, c)
			continue
		}
		cut := 0
		for cut < len(c.Entries) && c.Entries[cut].Index < first {
			cut++
		}
		switch cut {
		case len(c.Entries):
			if c.AppliedIndex < first {
				durable = append(durable, c)
			} else {
				appended = append(appended, c)
			}
		case 0:
			appended = append(appended, c)
		default:
			durable = append(durable, Committed{Group: c.Group, Entries: c.Entries[:cut], AppliedIndex: c.Entries[cut-1].Index})
			appended = append(appended, Committed{Group: c.Group, Entries: c.Entries[cut:], AppliedIndex: c.AppliedIndex})
		}
	}
	return durable, appended
}

// Outbound is a batch of messages for one replica.
type Outbound struct {
	To       uint64
	Messages []Message
}

// Message is a Raft message of one group: what the transport carries between replicas.
type Message struct {
	Group int
	Raft  *raftpb.Message
}

// Committed is one group's newly committed entries of a round.
type Committed struct {
	Group int
	// Entries are the PartitionEntries to apply, in log order. Raft's own entries (a new
	// leader's empty entry, conf changes) are not among them.
	Entries []Entry
	// AppliedIndex is the group's applied index once the round's entries are applied,
	// Raft's own entries included: what the state machine records with its writes.
	AppliedIndex uint64
}

// Entry is one committed PartitionEntry and its log position.
type Entry struct {
	Index uint64
	Term  uint64
	*orreryv1.PartitionEntry
}

// Outcome settles one Proposal. Committed: its entry is among this round's committed entries,
// to be answered once applied. Not committed (lost): another entry took its index, or this
// replica stopped leading the proposal's term; the entry may still commit under a later
// leader, so the caller answers Unavailable and the client retries with the same command id.
type Outcome struct {
	Proposal
	Committed bool
}

// ReadState confirms a read request: when the request was made, this replica led Group and
// had committed through Index, and a quorum acknowledged it still led afterwards. A read
// answered from Group's state once that state has applied through Index (and not before)
// reflects every entry committed before the request was made.
type ReadState struct {
	Group int
	Index uint64
	// Context is the ctx the request was made with.
	Context []byte
}

// groupReady is one group's raft.Ready inside a round.
type groupReady struct {
	group     *group
	ready     raft.Ready
	committed Committed
}

// ErrRoundOutstanding is returned by Ready while the previous round has not been advanced.
var ErrRoundOutstanding = errors.New("the previous round has not been advanced")

// HasReady reports whether some group has work for a round.
func (g *Groups) HasReady() bool {
	if g.round != nil {
		return false
	}
	for _, id := range g.order {
		if g.groups[id].node.HasReady() {
			return true
		}
	}
	return false
}

// Ready collects the work of every group that has some into one Round, leaving out the groups
// in skip (a group whose committed entries are still applying: its work waits in Raft for a
// later round, so that its Advance, compaction and snapshots follow its applies). It fails with
// ErrRoundOutstanding before the previous round was advanced, and when a committed entry does
// not decode (a corrupt log: fatal to the replica). An empty round (no group had work) needs no
// Advance and is returned as nil.
func (g *Groups) Ready(skip map[int]bool) (*Round, error) {
	if g.round != nil {
		return nil, ErrRoundOutstanding
	}
	r := &Round{}
	byDest := map[uint64][]Message{}
	for _, id := range g.order {
		gr := g.groups[id]
		if skip[id] || !gr.node.HasReady() {
			continue
		}
		rd := gr.node.Ready()
		if rd.SoftState != nil {
			gr.observeSoftState(rd.SoftState)
		}
		w := persistence.RaftWrite{Group: id, Entries: rd.Entries}
		if !raft.IsEmptySnap(rd.Snapshot) {
			w.Snapshot = rd.Snapshot
		}
		if !raft.IsEmptyHardState(rd.HardState) {
			w.HardState = rd.HardState
		}
		if w.Snapshot != nil || w.HardState != nil || len(w.Entries) > 0 {
			r.Writes = append(r.Writes, w)
		}
		if w.Snapshot != nil {
			meta, err := snapshotMeta(w.Snapshot)
			if err != nil {
				return nil, fmt.Errorf("raft group %d: %w", id, err)
			}
			r.Restores = append(r.Restores, Restore{Group: id, Meta: meta})
			gr.lastIndex = meta.Index
		} else if c, ok := g.compaction(gr); ok {
			r.Compactions = append(r.Compactions, c)
		}
		if n := len(rd.Entries); n > 0 {
			gr.lastIndex = rd.Entries[n-1].GetIndex()
		}
		for _, m := range rd.Messages {
			if m.GetType() == raftpb.MsgSnap {
				r.Snapshots = append(r.Snapshots, SnapshotSend{Group: id, To: m.GetTo(), raft: m})
				continue
			}
			byDest[m.GetTo()] = append(byDest[m.GetTo()], Message{Group: id, Raft: m})
		}
		c, err := gr.committed(rd.CommittedEntries, &r.Outcomes)
		if err != nil {
			return nil, err
		}
		if c.AppliedIndex > max(gr.appliedIndex, gr.skipThrough) {
			r.Committed = append(r.Committed, c)
		}
		gr.settleLost(&r.Outcomes)
		for _, rs := range rd.ReadStates {
			r.Reads = append(r.Reads, ReadState{Group: id, Index: rs.Index, Context: rs.RequestCtx})
		}
		r.readies = append(r.readies, groupReady{group: gr, ready: rd, committed: c})
	}
	if len(r.readies) == 0 {
		return nil, nil
	}
	for to, msgs := range byDest {
		r.Messages = append(r.Messages, Outbound{To: to, Messages: msgs})
	}
	slices.SortFunc(r.Messages, func(a, b Outbound) int { return cmp.Compare(a.To, b.To) })
	g.round = r
	return r, nil
}

// committed decodes a group's committed entries and settles the pending proposals they reach.
// Entries the state machine already holds (up to skipThrough) are not handed out.
func (gr *group) committed(ents []*raftpb.Entry, outcomes *[]Outcome) (Committed, error) {
	c := Committed{Group: gr.id, AppliedIndex: max(gr.appliedIndex, gr.skipThrough)}
	for _, e := range ents {
		for len(gr.pending) > 0 && gr.pending[0].Index <= e.GetIndex() {
			p := gr.pending[0]
			gr.pending = gr.pending[1:]
			*outcomes = append(*outcomes, Outcome{Proposal: p, Committed: p.Index == e.GetIndex() && p.Term == e.GetTerm()})
		}
		if e.GetIndex() <= gr.skipThrough {
			continue
		}
		c.AppliedIndex = e.GetIndex()
		if e.GetType() != raftpb.EntryNormal || len(e.GetData()) == 0 {
			continue
		}
		pe := &orreryv1.PartitionEntry{}
		if err := proto.Unmarshal(e.GetData(), pe); err != nil {
			return Committed{}, fmt.Errorf("raft group %d: entry %d: decode: %w", gr.id, e.GetIndex(), err)
		}
		c.Entries = append(c.Entries, Entry{Index: e.GetIndex(), Term: e.GetTerm(), PartitionEntry: pe})
	}
	return c, nil
}

// observeSoftState counts a change of this replica's leadership of the group.
func (gr *group) observeSoftState(st *raft.SoftState) {
	if leading := st.RaftState == raft.StateLeader; leading != gr.leading {
		gr.leading = leading
		gr.leaderTransitions++
	}
}

// settleLost settles as lost every pending proposal of a term this replica no longer leads.
func (gr *group) settleLost(outcomes *[]Outcome) {
	st := gr.node.BasicStatus()
	leading := st.RaftState == raft.StateLeader
	kept := gr.pending[:0]
	for _, p := range gr.pending {
		if leading && p.Term == st.HardState.GetTerm() {
			kept = append(kept, p)
			continue
		}
		*outcomes = append(*outcomes, Outcome{Proposal: p})
	}
	clear(gr.pending[len(kept):])
	gr.pending = kept
}

// Advance tells Groups that round was persisted, sent and applied: it applies the round's
// conf-change entries to Raft, records each group's applied index, term and logged time, and
// lets every group go on. round must be the one Ready returned last.
func (g *Groups) Advance(round *Round) error {
	if round == nil {
		return nil
	}
	if round != g.round {
		return errors.New("advance: not the outstanding round")
	}
	g.round = nil
	for _, gr := range round.readies {
		if snap := gr.ready.Snapshot; !raft.IsEmptySnap(snap) {
			meta, err := snapshotMeta(snap)
			if err != nil {
				return fmt.Errorf("raft group %d: %w", gr.group.id, err)
			}
			gr.group.restored(meta)
		}
		for _, e := range gr.ready.CommittedEntries {
			if err := gr.group.applyConfChange(e); err != nil {
				return err
			}
			gr.group.appliedIndex = e.GetIndex()
			gr.group.appliedTerm = e.GetTerm()
		}
		if gr.group.appliedIndex >= gr.group.skipThrough {
			gr.group.skipThrough = 0
		}
		if n := len(gr.committed.Entries); n > 0 {
			gr.group.appliedMicros = gr.committed.Entries[n-1].GetLoggedTimeUnixMicros()
		}
		gr.group.node.Advance(gr.ready)
	}
	return nil
}

// applyConfChange applies e to Raft when it is a conf change.
func (gr *group) applyConfChange(e *raftpb.Entry) error {
	var cc raftpb.ConfChangeI
	switch e.GetType() {
	case raftpb.EntryConfChange:
		cc = &raftpb.ConfChange{}
	case raftpb.EntryConfChangeV2:
		cc = &raftpb.ConfChangeV2{}
	default:
		return nil
	}
	if err := proto.Unmarshal(e.GetData(), cc.(proto.Message)); err != nil {
		return fmt.Errorf("raft group %d: conf change %d: decode: %w", gr.id, e.GetIndex(), err)
	}
	gr.recordConf(e.GetIndex(), gr.node.ApplyConfChange(cc))
	return nil
}
