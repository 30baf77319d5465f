package replication

import (
	"fmt"
	"slices"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/persistence"
)

// Bootstrap writes the initial state of every listed group whose log is still empty, in one
// Persist call: a snapshot at index 1, term 1, whose conf state has peers as voters, and the
// hard state {term 1, commit 1}. Every replica of a group must bootstrap it with the same
// peers. Groups already holding state are left as they are, so Bootstrap is safe to repeat on
// every start. The conf state lives in the snapshot record; the conf changes applied after it
// are applied again when the group opens (see the package doc, "Membership"). A group that
// joining replicas will grow is bootstrapped on one replica only, with itself as the only
// peer; the others open it with nothing persisted.
func Bootstrap(raftLog persistence.RaftLog, peers []uint64, groups []int) error {
	if len(peers) == 0 {
		return orrery.Invalid("peers", "must not be empty")
	}
	voters := slices.Clone(peers)
	slices.Sort(voters)
	for i, id := range voters {
		if id == 0 {
			return orrery.Invalid("peers", "replica id 0 is not allowed")
		}
		if i > 0 && voters[i-1] == id {
			return orrery.Invalid("peers", "replica id %d is listed twice", id)
		}
	}
	var writes []persistence.RaftWrite
	for _, id := range groups {
		storage, err := raftLog.Storage(id)
		if err != nil {
			return fmt.Errorf("raft group %d: %w", id, err)
		}
		last, err := storage.LastIndex()
		if err != nil {
			return fmt.Errorf("raft group %d: last index: %w", id, err)
		}
		if last > 0 {
			continue
		}
		writes = append(writes, persistence.RaftWrite{
			Group: id,
			Snapshot: &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
				Index:     new(uint64(1)),
				Term:      new(uint64(1)),
				ConfState: &raftpb.ConfState{Voters: slices.Clone(voters)},
			}},
			HardState: &raftpb.HardState{Term: new(uint64(1)), Commit: new(uint64(1))},
		})
	}
	if len(writes) == 0 {
		return nil
	}
	if err := raftLog.Persist(writes); err != nil {
		return fmt.Errorf("bootstrap raft groups: %w", err)
	}
	return nil
}
