package replication

import (
	"errors"
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Errors a rebuild is refused with (see the package doc, "Rebuilds").
var (
	// ErrRebuildLeader: a leader's state is not rebuilt; it hands its leadership over first.
	ErrRebuildLeader = errors.New("a leader's state is not rebuilt: it hands its leadership to another voter first")
	// ErrRebuildTooOld: the state is older than this replica's log reaches back, so the
	// entries between the two could not be applied onto it.
	ErrRebuildTooOld = errors.New("the rebuild's state is older than this replica's log")
)

// RebuildMessage is the header of a rebuild stream (OutboundSnapshot.Rebuild): a MsgSnap from
// replica from to replica to whose snapshot carries meta's Index and LoggedTimeMicros. It is
// never stepped into Raft, so its term and conf state do not matter.
func RebuildMessage(from, to uint64, meta SnapshotMeta) *raftpb.Message {
	return &raftpb.Message{
		Type:     new(raftpb.MsgSnap),
		From:     new(from),
		To:       new(to),
		Snapshot: meta.raftSnapshot(),
	}
}

// rebuildable reports why group id's state may not be replaced by a rebuild's at index, nil
// when it may: the replica does not lead or campaign, and its log reaches back to index+1, so
// that the committed entries after index can be applied onto the new state.
func (g *Groups) rebuildable(id int, index uint64) error {
	gr, ok := g.groups[id]
	if !ok {
		return fmt.Errorf("raft group %d: %w", id, ErrUnknownGroup)
	}
	switch gr.node.BasicStatus().RaftState {
	case raft.StateLeader, raft.StateCandidate:
		return fmt.Errorf("raft group %d: %w", id, ErrRebuildLeader)
	}
	if index+1 < gr.firstIndex {
		return fmt.Errorf("raft group %d: state at %d, log from %d: %w", id, index, gr.firstIndex, ErrRebuildTooOld)
	}
	return nil
}

// rebuilt reopens group id from its persisted Raft state after its state machine installed a
// rebuild's state at applied: the committed entries after applied.Index are handed out again
// (those up to it are not), whether the new state is behind or ahead of the old one. It
// returns the proposals it settles as lost. There must be no outstanding round.
func (g *Groups) rebuilt(id int, applied Applied) ([]Outcome, error) {
	if g.round != nil {
		return nil, errors.New("rebuild: a round is outstanding")
	}
	old, ok := g.groups[id]
	if !ok {
		return nil, fmt.Errorf("raft group %d: %w", id, ErrUnknownGroup)
	}
	gr, err := g.open(id, applied)
	if err != nil {
		return nil, err
	}
	gr.stampedMicros = old.stampedMicros
	lost := make([]Outcome, 0, len(old.pending))
	for _, p := range old.pending {
		lost = append(lost, Outcome{Proposal: p})
	}
	g.groups[id] = gr
	return lost, nil
}
