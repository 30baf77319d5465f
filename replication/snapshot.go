package replication

import (
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery/persistence"
)

// ErrSnapshotWithoutState is returned by Step for a snapshot message: one comes only with its
// state, through StepSnapshot.
var ErrSnapshotWithoutState = errors.New("a snapshot message arrives with its state, through StepSnapshot")

// SnapshotSend is a follower that Raft, leading Group here, can no longer catch up from the
// log: the driver takes a state snapshot and sends it with SnapshotMessage's message.
type SnapshotSend struct {
	Group int
	To    uint64
	raft  *raftpb.Message // Raft's MsgSnap, its snapshot the log's compaction record
}

// Restore is a snapshot a follower's Raft accepted in a round: its state must be installed
// before the round is persisted.
type Restore struct {
	Group int
	Meta  SnapshotMeta
}

// Compaction discards a group's log entries before Index, recording ConfState, the group's
// conf state as of Index-1, in the snapshot record at Index-1.
type Compaction struct {
	Group     int
	Index     uint64
	ConfState *raftpb.ConfState
}

// StepSnapshot hands group a snapshot message whose state the caller holds. If Raft accepts
// it, the next Ready's round carries a Restore of it, and the caller installs the state then.
func (g *Groups) StepSnapshot(id int, m *raftpb.Message) error {
	gr, ok := g.groups[id]
	if !ok {
		return fmt.Errorf("raft group %d: %w", id, ErrUnknownGroup)
	}
	if m.GetType() != raftpb.MsgSnap {
		return fmt.Errorf("raft group %d: StepSnapshot of a %v message", id, m.GetType())
	}
	if _, err := snapshotMeta(m.GetSnapshot()); err != nil {
		return fmt.Errorf("raft group %d: %w", id, err)
	}
	return gr.node.Step(m)
}

// SnapshotMessage returns the message that completes a snapshot send, once the caller holds a
// state read at appliedIndex: Raft's MsgSnap, its snapshot replaced by the state's metadata
// (appliedIndex, its term, the conf state and logged time there). It fails unless appliedIndex
// is the group's applied index, so the metadata is that of the state sent.
func (g *Groups) SnapshotMessage(s SnapshotSend, appliedIndex uint64) (*raftpb.Message, error) {
	gr, ok := g.groups[s.Group]
	if !ok {
		return nil, fmt.Errorf("raft group %d: %w", s.Group, ErrUnknownGroup)
	}
	if gr.skipThrough > gr.appliedIndex || appliedIndex != gr.appliedIndex {
		return nil, fmt.Errorf("raft group %d: a state read at %d, applied index %d", s.Group, appliedIndex, gr.appliedIndex)
	}
	m := proto.Clone(s.raft).(*raftpb.Message)
	m.Snapshot = SnapshotMeta{
		Index:            gr.appliedIndex,
		Term:             gr.appliedTerm,
		LoggedTimeMicros: gr.appliedMicros,
		ConfState:        gr.confState,
	}.raftSnapshot()
	return m, nil
}

// ReportSnapshot tells group's Raft how the snapshot it sent to replica to ended: installed, or
// failed (Raft then probes the follower again, and sends another snapshot if it still must).
func (g *Groups) ReportSnapshot(id int, to uint64, installed bool) {
	gr, ok := g.groups[id]
	if !ok {
		return
	}
	status := raft.SnapshotFailure
	if installed {
		status = raft.SnapshotFinish
	}
	gr.node.ReportSnapshot(to, status)
}

// Discard takes group out of the outstanding round before it is persisted, when its Restore
// could not be installed: its writes, messages, snapshots and compaction are dropped (its
// Reads stay: a quorum confirmed them), and the group reopens from its persisted Raft state,
// as after a restart of this group alone. What Raft held in memory and had not persisted is
// lost, as a crash would lose it; nothing of it was sent.
func (g *Groups) Discard(round *Round, id int) error {
	if round == nil || round != g.round {
		return errors.New("discard: not the outstanding round")
	}
	old, ok := g.groups[id]
	if !ok {
		return fmt.Errorf("raft group %d: %w", id, ErrUnknownGroup)
	}
	round.Restores = slices.DeleteFunc(round.Restores, func(r Restore) bool { return r.Group == id })
	round.Writes = slices.DeleteFunc(round.Writes, func(w persistence.RaftWrite) bool { return w.Group == id })
	round.Snapshots = slices.DeleteFunc(round.Snapshots, func(s SnapshotSend) bool { return s.Group == id })
	round.Compactions = slices.DeleteFunc(round.Compactions, func(c Compaction) bool { return c.Group == id })
	round.Committed = slices.DeleteFunc(round.Committed, func(c Committed) bool { return c.Group == id })
	round.readies = slices.DeleteFunc(round.readies, func(r groupReady) bool { return r.group == old })
	for i := range round.Messages {
		out := &round.Messages[i]
		out.Messages = slices.DeleteFunc(out.Messages, func(m Message) bool { return m.Group == id })
	}
	round.Messages = slices.DeleteFunc(round.Messages, func(o Outbound) bool { return len(o.Messages) == 0 })
	gr, err := g.open(id, Applied{Index: max(old.appliedIndex, old.skipThrough), LoggedTimeMicros: old.appliedMicros})
	if err != nil {
		return err
	}
	gr.stampedMicros = old.stampedMicros
	gr.pendingConfIndex = old.pendingConfIndex
	gr.pending = old.pending
	g.groups[id] = gr
	return nil
}

// restored records that a group's state is now the snapshot's.
func (gr *group) restored(meta SnapshotMeta) {
	gr.appliedIndex = meta.Index
	gr.appliedTerm = meta.Term
	gr.appliedMicros = meta.LoggedTimeMicros
	gr.resetConfs(meta.Index, meta.ConfState)
	gr.skipThrough = 0
	gr.firstIndex = meta.Index + 1
}

// compaction decides whether gr's log is compacted this round: once it holds more than
// MaxLogEntries entries, up to the applied index, and on a leader no further than the lowest
// Match of the followers within MaxLogEntries of the log's end. A follower further behind is
// left to catch up by snapshot, so a replica down for long does not keep the log growing.
func (g *Groups) compaction(gr *group) (Compaction, bool) {
	limit := uint64(g.cfg.MaxLogEntries)
	if gr.lastIndex < gr.firstIndex || gr.lastIndex-gr.firstIndex+1 <= limit {
		return Compaction{}, false
	}
	target := gr.appliedIndex
	if gr.node.BasicStatus().RaftState == raft.StateLeader {
		gr.node.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			if id != g.cfg.ReplicaID && pr.Match+limit >= gr.lastIndex {
				target = min(target, pr.Match)
			}
		})
	}
	if target < gr.firstIndex {
		return Compaction{}, false
	}
	conf, err := gr.forgetConfsBefore(target)
	if err != nil {
		g.cfg.Logger.Warningf("%v", err)
		return Compaction{}, false
	}
	gr.firstIndex = target + 1
	return Compaction{Group: gr.id, Index: target + 1, ConfState: proto.Clone(conf).(*raftpb.ConfState)}, true
}
