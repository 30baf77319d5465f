package silo

import (
	"fmt"
	"slices"
	"sync"

	"github.com/orreryhq/orrery/cluster"
)

// removal tracks whether the cluster has removed this silo from the Raft group of every
// partition it held (DESIGN §6: a removed silo closes its replicas and exits). A partition's
// group has removed this silo when its leader said so (a RaftRemoved answering this replica's
// campaign: a voter removed while it was cut off or down never applies its own removal, and
// campaigns with its outdated configuration), or when this replica applied a configuration
// that no longer counts it after one that did. A silo that no group counts and no group
// removed (a joiner not added yet) is not removed.
type removal struct {
	mu sync.Mutex
	// noticed maps a partition to the leader that said its group no longer counts this silo.
	noticed map[int]uint64
	// counted lists the partitions whose configuration counted this silo at some look.
	counted map[int]bool
	// looks counts the consecutive checks that found the silo removed.
	looks int
	err   error
}

// removedLooks is how many consecutive checks must find the silo removed before it stops.
const removedLooks = 2

// countsReplica is the Raft transport's Config.Counts: false only when this silo leads
// partition group and its configuration has replica neither as a voter nor as a learner. A
// replica that can propose has applied an entry of its own term, so every configuration
// committed before it led is applied: a replica it does not count was removed, not one added
// meanwhile that it has not caught up with.
func (s *Silo) countsReplica(group int, replica uint64) bool {
	st, ok := s.host.Status(group)
	if !ok || !st.CanPropose {
		return true
	}
	return slices.Contains(st.Voters, replica) || slices.Contains(st.Learners, replica)
}

// noticeRemoved is the Raft transport's Config.OnRemoved: leader from said the groups of
// partitions no longer count this silo.
func (s *Silo) noticeRemoved(from uint64, groups []int) {
	s.removal.mu.Lock()
	defer s.removal.mu.Unlock()
	if s.removal.noticed == nil {
		s.removal.noticed = map[int]uint64{}
	}
	for _, n := range groups {
		if _, ok := s.removal.noticed[n]; !ok {
			s.log.Warn("partition's group no longer counts this silo", "partition", n, "leader", cluster.FormatID(from))
		}
		s.removal.noticed[n] = from
	}
}

// checkRemoved stops the silo, its Err naming why, once removedLooks consecutive checks found
// that no partition's group still counts it and at least one has removed it (see removal).
func (s *Silo) checkRemoved() {
	self := s.SiloID()
	r := &s.removal
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counted == nil {
		r.counted = map[int]bool{}
	}
	var removed []int
	member := false
	for n := range s.cfg.Partitions {
		st, ok := s.host.Status(n)
		if !ok {
			continue
		}
		counts := slices.Contains(st.Voters, self) || slices.Contains(st.Learners, self)
		if _, ok := r.noticed[n]; ok && st.Leader != 0 {
			delete(r.noticed, n) // it hears from a leader again: added back
		}
		_, noticed := r.noticed[n]
		switch {
		case noticed || (r.counted[n] && !counts):
			removed = append(removed, n)
		case counts:
			member = true
		}
		if counts {
			r.counted[n] = true
		}
	}
	if member || len(removed) == 0 {
		r.looks = 0
		return
	}
	r.looks++
	if r.looks < removedLooks || r.err != nil {
		return
	}
	r.err = fmt.Errorf("removed from the Raft group of every partition it held (partitions %v): its replicas are closed; "+
		"a silo the cluster removed does not serve again with this data dir", removed)
	s.log.Error("silo removed by the cluster from every partition's group; closing its replicas and stopping", "partitions", removed)
	go s.shutdown(true)
}

// removedErr is why the cluster removed this silo, nil unless it has.
func (s *Silo) removedErr() error {
	s.removal.mu.Lock()
	defer s.removal.mu.Unlock()
	return s.removal.err
}
