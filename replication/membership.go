package replication

import (
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/orreryhq/orrery"
)

// Errors AddLearner, PromoteLearner, RemoveReplica (and the Driver's forms) wrap in an
// *orrery.Error of code Unavailable; match them with errors.Is.
var (
	// ErrConfChangePending: this replica, leading the group, proposed a conf change that has
	// not applied yet; one change at a time.
	ErrConfChangePending = errors.New("a conf change of the group is proposed and not yet applied")
	// ErrNoLiveQuorum: the change would leave fewer live voters than a quorum of the new
	// configuration.
	ErrNoLiveQuorum = errors.New("the change would leave fewer live voters than a quorum")
	// ErrLearnerBehind: PromoteLearner of a learner that has not caught up (see CaughtUpLag).
	ErrLearnerBehind = errors.New("the learner has not caught up with the leader")
	// ErrRemoveLeader: RemoveReplica of the leader itself; transfer the leadership first.
	ErrRemoveLeader = errors.New("the leader cannot remove itself: transfer the leadership first")
)

// CaughtUpLag is how many entries a replica's Match may trail the leader's commit index by and
// still count as caught up (ReplicaProgress.CaughtUp, PromoteLearner), as long as the leader
// replicates to it from the log (Raft's StateReplicate: not probing, no snapshot pending).
const CaughtUpLag = 64

// ReplicaProgress is the leader's view of one replica of its group.
type ReplicaProgress struct {
	// Match is the highest log index the leader knows the replica holds.
	Match uint64
	// Active: the leader heard from the replica since its last quorum check (Raft's
	// RecentActive; true for the leader itself). Right after each check, which comes once
	// every ElectionTicks, it is false until the replica's next response.
	Active bool
	// Learner: the replica receives the log but does not vote.
	Learner bool
	// CaughtUp: the leader replicates to the replica from the log and its Match is within
	// CaughtUpLag of the leader's commit index.
	CaughtUp bool
}

// AddLearner adds replica to group as a learner: it receives the log (first, being new, a
// snapshot of the state) but neither votes nor counts toward a quorum. It is nil without a
// change when replica already is a learner, and Invalid when it is a voter.
//
// AddLearner, PromoteLearner and RemoveReplica each propose one single-replica conf change
// (a ConfChangeV2 holding one change, never a joint configuration), which takes effect when
// it applies. Only the leader proposes them, and it refuses like Propose (ErrUnknownGroup,
// ErrNotLeader, ErrNotCaughtUp); while a change it proposed has not applied, it refuses the
// next with ErrConfChangePending.
func (g *Groups) AddLearner(id int, replica uint64) error {
	gr, err := g.changing(id)
	if err != nil {
		return err
	}
	switch {
	case replica == 0:
		return orrery.Invalid("replica", "must not be zero")
	case slices.Contains(gr.confState.GetLearners(), replica):
		return nil
	case slices.Contains(gr.confState.GetVoters(), replica):
		return orrery.Invalid("replica", "replica %d already votes in partition %d", replica, id)
	}
	return gr.proposeConfChange(raftpb.ConfChangeAddLearnerNode, replica)
}

// PromoteLearner makes learner replica a voter of group. It refuses with ErrLearnerBehind
// unless the learner is caught up (ReplicaProgress.CaughtUp), and with ErrNoLiveQuorum when
// fewer voters of the new configuration than its quorum are live (ReplicaProgress.Active).
// It is nil without a change when replica already votes, and Invalid when it is not in the
// group. The refusals of AddLearner apply.
func (g *Groups) PromoteLearner(id int, replica uint64) error {
	gr, err := g.changing(id)
	if err != nil {
		return err
	}
	if slices.Contains(gr.confState.GetVoters(), replica) {
		return nil
	}
	if !slices.Contains(gr.confState.GetLearners(), replica) {
		return orrery.Invalid("replica", "replica %d is not a learner of partition %d", replica, id)
	}
	progress := gr.progress(g.cfg.ReplicaID)
	if !progress[replica].CaughtUp {
		return orrery.Wrap(orrery.CodeUnavailable, ErrLearnerBehind, "partition %d: replica %d at %d", id, replica, progress[replica].Match)
	}
	voters := append(slices.Clone(gr.confState.GetVoters()), replica)
	if err := liveQuorum(id, voters, progress); err != nil {
		return err
	}
	return gr.proposeConfChange(raftpb.ConfChangeAddNode, replica)
}

// RemoveReplica removes replica, a voter or a learner, from group. Removing a voter is refused
// with ErrNoLiveQuorum when fewer of the remaining voters than their quorum are live
// (ReplicaProgress.Active, the leader counting as live), and removing the leader itself with
// ErrRemoveLeader. It is nil without a change when replica is not in the group. The refusals
// of AddLearner apply. A removed replica keeps its group open but gets no more traffic.
func (g *Groups) RemoveReplica(id int, replica uint64) error {
	gr, err := g.changing(id)
	if err != nil {
		return err
	}
	if replica == g.cfg.ReplicaID {
		return orrery.Wrap(orrery.CodeUnavailable, ErrRemoveLeader, "partition %d: replica %d", id, replica)
	}
	voters := gr.confState.GetVoters()
	switch {
	case slices.Contains(voters, replica):
		remaining := slices.DeleteFunc(slices.Clone(voters), func(v uint64) bool { return v == replica })
		if err := liveQuorum(id, remaining, gr.progress(g.cfg.ReplicaID)); err != nil {
			return err
		}
	case !slices.Contains(gr.confState.GetLearners(), replica):
		return nil
	}
	return gr.proposeConfChange(raftpb.ConfChangeRemoveNode, replica)
}

// TransferLeadership asks Raft to hand group's leadership to voter to: the leader brings it up
// to date, then tells it to campaign at once; meanwhile proposals are dropped (Unavailable).
// Raft gives up after an election timeout, and this replica leads on. It is nil without a
// change when to is this replica, and Invalid when to is not a voter. It refuses like
// Propose.
func (g *Groups) TransferLeadership(id int, to uint64) error {
	gr, _, err := g.leading(id)
	if err != nil {
		return err
	}
	if to == g.cfg.ReplicaID {
		return nil
	}
	if !slices.Contains(gr.confState.GetVoters(), to) {
		return orrery.Invalid("to", "replica %d is not a voter of partition %d", to, id)
	}
	gr.node.TransferLeader(to)
	return nil
}

// changing returns group id when this replica may propose a conf change to it: it leads the
// group (see leading) and no change it proposed is still unapplied.
func (g *Groups) changing(id int) (*group, error) {
	gr, _, err := g.leading(id)
	if err != nil {
		return nil, err
	}
	if gr.confChangePending() {
		return nil, orrery.Wrap(orrery.CodeUnavailable, ErrConfChangePending, "partition %d: at index %d, applied %d", id, gr.pendingConfIndex, gr.appliedIndex)
	}
	return gr, nil
}

// confChangePending reports whether a conf change this replica proposed has not applied.
func (gr *group) confChangePending() bool { return gr.pendingConfIndex > gr.appliedIndex }

// proposeConfChange proposes the one change {typ, replica} and records its index as pending.
// Raft, which allows one unapplied change too, would turn a second into an empty entry; the
// group's own pending index refuses it before.
func (gr *group) proposeConfChange(typ raftpb.ConfChangeType, replica uint64) error {
	cc := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: typ.Enum(), NodeId: new(replica)}}}
	if err := gr.node.ProposeConfChange(cc); err != nil {
		return orrery.Wrap(orrery.CodeUnavailable, err, "partition %d: %v of replica %d", gr.id, typ, replica)
	}
	gr.lastIndex++
	gr.pendingConfIndex = gr.lastIndex
	return nil
}

// liveQuorum fails with ErrNoLiveQuorum when fewer of voters than their quorum are active.
func liveQuorum(id int, voters []uint64, progress map[uint64]ReplicaProgress) error {
	live := 0
	for _, v := range voters {
		if progress[v].Active {
			live++
		}
	}
	if quorum := len(voters)/2 + 1; live < quorum {
		return orrery.Wrap(orrery.CodeUnavailable, ErrNoLiveQuorum, "partition %d: %d of voters %v live, quorum %d", id, live, voters, quorum)
	}
	return nil
}

// progress returns the leader's view of every replica of the group (nil when this replica,
// self, does not lead it).
func (gr *group) progress(self uint64) map[uint64]ReplicaProgress {
	bs := gr.node.BasicStatus()
	if bs.RaftState != raft.StateLeader {
		return nil
	}
	commit := bs.HardState.GetCommit()
	out := map[uint64]ReplicaProgress{}
	gr.node.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
		p := ReplicaProgress{
			Match:    pr.Match,
			Active:   pr.RecentActive || id == self,
			Learner:  typ == raft.ProgressTypeLearner,
			CaughtUp: id == self || (pr.State == tracker.StateReplicate && pr.Match+CaughtUpLag >= commit),
		}
		out[id] = p
	})
	return out
}

// confAt is the group's conf state from an applied index on.
type confAt struct {
	index uint64
	conf  *raftpb.ConfState
}

// recordConf records that the group's conf state is conf from applied index on.
func (gr *group) recordConf(index uint64, conf *raftpb.ConfState) {
	gr.confState = conf
	gr.confs = append(gr.confs, confAt{index: index, conf: conf})
}

// resetConfs makes conf, at index, the only conf state the group remembers: the log's
// snapshot record's when it opens or installs a snapshot.
func (gr *group) resetConfs(index uint64, conf *raftpb.ConfState) {
	gr.confState = conf
	gr.confs = []confAt{{index: index, conf: conf}}
}

// forgetConfsBefore returns the conf state as of applied index (at or after the oldest
// remembered) and forgets the ones before it: the log is compacted there, so no compaction
// record needs them any more.
func (gr *group) forgetConfsBefore(index uint64) (*raftpb.ConfState, error) {
	i := len(gr.confs) - 1
	for i >= 0 && gr.confs[i].index > index {
		i--
	}
	if i < 0 {
		return nil, fmt.Errorf("raft group %d: conf state at %d: the oldest known is at %d", gr.id, index, gr.confs[0].index)
	}
	conf := gr.confs[i].conf
	gr.confs = gr.confs[i:]
	return conf, nil
}
