package silo

import (
	"slices"
	"sync"

	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/cluster/placement"
)

// removal tracks the removals of this silo's replicas from their partitions' groups, for the
// log (docs/architecture.md, "Replicas"). A removal never stops the silo: the silo's own view
// of the live silos cannot tell a removal that placement will undo from one it will not. In a
// split, or while a silo rejoins under a new member id, the group's leader and this silo see
// different live sets, so a removal the leader decided as a rebalance can look, from here,
// like one inside this silo's target set. A silo the cluster must not serve again is retired
// first (placer.look, cluster.Provider.Retire), and retirement fences it; any other removed
// replica stays open, receiving nothing, and the group's leader adds it back, as a learner
// caught up by its log or a snapshot, once its placement counts this silo in the target set.
//
// Evidence that a partition's group removed this silo's replica is any of: its leader said so
// (a RaftRemoved answering this replica's campaign: a voter removed while it was cut off, down
// or paused never applies its own removal, and campaigns with its outdated configuration);
// this replica applied a configuration that no longer counts it after one that did; or it
// applied one that counts it as a learner after one that counted it as a voter (removed and
// added again as a new replica: placement never turns a voter into a learner).
//
// Each piece of evidence is judged once, at the first check that finds it, against the
// partition's target by the silo's live view at that check (placement.Target over the live
// silos and itself, Config.Replicas): outside the target it is logged as a rebalance, inside
// it as a removal the leader is expected to undo. Either way the partition is then forgotten
// until the silo hears the group's leader while the group counts it again (a later re-add).
type removal struct {
	mu sync.Mutex
	// noticed maps a partition to the leader that said its group no longer counts this silo,
	// until the next check judges it.
	noticed map[int]uint64
	// counted and voted list the partitions whose configuration counted this silo (as a
	// voter or learner, as a voter) at some check since its last judged removal.
	counted, voted map[int]bool
	// left lists the partitions whose removal of this silo was judged and that have not
	// counted it again since.
	left map[int]bool
}

// groupLook is what one check sees of one partition's group on this silo.
type groupLook struct {
	partition int
	// voter and learner: the replica's applied configuration counts this silo so.
	voter, learner bool
	// leader: the replica knows the group's leader.
	leader bool
	// inTarget: the partition's target set by this silo's live view holds this silo.
	inTarget bool
}

// judged is a removal the check judged, for the log.
type judged struct {
	partition int
	// inTarget: by this silo's view at the check, the partition's target set holds it.
	inTarget bool
}

// look is one check over groups: it judges the new evidence of removals and reports the
// removals judged at this check (see removal). The caller holds r.mu.
func (r *removal) look(groups []groupLook) (judgedNow []judged) {
	if r.counted == nil {
		r.counted, r.voted, r.left = map[int]bool{}, map[int]bool{}, map[int]bool{}
	}
	for _, g := range groups {
		n := g.partition
		counts := g.voter || g.learner
		_, noticed := r.noticed[n]
		delete(r.noticed, n)
		switch {
		case r.left[n]:
			if counts && g.leader {
				delete(r.left, n) // added back: a member again
			}
		case noticed || (r.counted[n] && !counts) || (r.voted[n] && g.learner):
			judgedNow = append(judgedNow, judged{partition: n, inTarget: g.inTarget})
			r.left[n] = true
			delete(r.counted, n)
			delete(r.voted, n)
			continue
		}
		if counts && !r.left[n] {
			r.counted[n] = true
		}
		if g.voter && !r.left[n] {
			r.voted[n] = true
		}
	}
	return judgedNow
}

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
		if _, ok := s.removal.noticed[n]; !ok && !s.removal.left[n] {
			s.log.Warn("partition's group no longer counts this silo", "partition", n, "leader", cluster.FormatID(from))
		}
		s.removal.noticed[n] = from
	}
}

// checkRemoved looks at every partition's group on this silo and logs the removals of its
// replicas it finds (see removal).
func (s *Silo) checkRemoved() {
	self := s.SiloID()
	live := []uint64{self}
	for id := range s.liveSilos() {
		if !s.member().provider.Retired(id) {
			live = append(live, id)
		}
	}
	groups := make([]groupLook, 0, s.cfg.Partitions)
	for n := range s.cfg.Partitions {
		st, ok := s.host.Status(n)
		if !ok {
			continue
		}
		groups = append(groups, groupLook{
			partition: n,
			voter:     slices.Contains(st.Voters, self),
			learner:   slices.Contains(st.Learners, self),
			leader:    st.Leader != 0,
			inTarget:  slices.Contains(placement.Target(n, live, s.cfg.Replicas), self),
		})
	}
	r := &s.removal
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range r.look(groups) {
		if j.inTarget {
			s.log.Warn("partition's group removed this silo although it is in the partition's target set by this silo's view; "+
				"the replica stays open until the group's leader adds it back", "partition", j.partition)
		} else {
			s.log.Info("partition's group removed this silo, which is outside the partition's target set: a rebalance", "partition", j.partition)
		}
	}
}
