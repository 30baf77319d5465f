package silo

import (
	"fmt"
	"slices"
	"sync"

	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/cluster/placement"
)

// removal tracks whether the cluster has removed this silo (a removed silo closes its
// replicas and exits; docs/architecture.md, "Replicas"): removed its replicas although, by this silo's own view of the live
// silos, it belongs in those partitions' target sets (the cluster declared it dead for longer
// than --dead-after, or its identity is gone). A live silo that placement leaves out of a
// partition's target set (--replicas lowered, or more silos than a partition needs) is a
// spare, not removed: it loses that replica and stays up, ready to receive replicas again.
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
// silos and itself, Config.Replicas):
//   - outside the target, the removal is a rebalance: the partition no longer counts toward
//     membership, and it is forgotten once the silo hears the group's leader while the group
//     counts it again (a later re-add);
//   - inside the target, the removal is held against the silo for the rest of the process's
//     life, even when the group's leader adds it back afterwards: the silo exits,
//     whichever of its removal and its re-add it sees first.
//
// A silo missing beyond --dead-after is retired before any group removes its replica for that
// reason (placer.look, cluster.Provider.Retire): paused or cut off, it is fenced as soon as it
// is heard again; restarted on the same data dir, it refuses or fences itself once a peer tells
// it, and no group adds it back meanwhile. The evidence above is Raft's own and needs no
// gossip.
//
// The silo stops once removedLooks consecutive checks found a held removal and no other
// partition's group counting it (a silo still holding other replicas keeps serving them). A
// silo no group counts and none removed (a joiner not added yet) is not removed. The judgement
// assumes this silo's live view agrees with the leader's by the time a removal commits: a
// removal follows adding and catching up a replacement, seconds after any membership change,
// while gossip spreads one in well under a second.
type removal struct {
	mu sync.Mutex
	// noticed maps a partition to the leader that said its group no longer counts this silo,
	// until the next check judges it.
	noticed map[int]uint64
	// counted and voted list the partitions whose configuration counted this silo (as a
	// voter or learner, as a voter) at some check since its last judged removal.
	counted, voted map[int]bool
	// left lists the partitions whose removal of this silo was a rebalance and that have not
	// counted it again since.
	left map[int]bool
	// held lists the partitions whose removal of this silo was judged inside its target.
	held map[int]bool
	// looks counts the consecutive checks that found the silo removed.
	looks int
	err   error
}

// removedLooks is how many consecutive checks must find the silo removed before it stops.
const removedLooks = 2

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
	held      bool
}

// look is one check over groups: it judges the new evidence of removals and reports the
// removals judged at this check, and, once the silo is removed, the partitions held against it
// and true (see removal). The caller holds r.mu.
func (r *removal) look(groups []groupLook) (judgedNow []judged, heldParts []int, stop bool) {
	if r.counted == nil {
		r.counted, r.voted, r.left, r.held = map[int]bool{}, map[int]bool{}, map[int]bool{}, map[int]bool{}
	}
	member := false
	for _, g := range groups {
		n := g.partition
		counts := g.voter || g.learner
		_, noticed := r.noticed[n]
		delete(r.noticed, n)
		switch {
		case r.held[n]:
		case r.left[n]:
			if counts && g.leader {
				delete(r.left, n) // added back: a member again
				member = true
			}
		case noticed || (r.counted[n] && !counts) || (r.voted[n] && g.learner):
			judgedNow = append(judgedNow, judged{partition: n, held: g.inTarget})
			if g.inTarget {
				r.held[n] = true
			} else {
				r.left[n] = true
			}
			delete(r.counted, n)
			delete(r.voted, n)
			continue
		case counts:
			member = true
		}
		if counts && !r.held[n] && !r.left[n] {
			r.counted[n] = true
		}
		if g.voter && !r.held[n] && !r.left[n] {
			r.voted[n] = true
		}
	}
	if member || len(r.held) == 0 {
		r.looks = 0
		return judgedNow, nil, false
	}
	r.looks++
	for n := range r.held {
		heldParts = append(heldParts, n)
	}
	slices.Sort(heldParts)
	return judgedNow, heldParts, r.looks >= removedLooks
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
		if _, ok := s.removal.noticed[n]; !ok && !s.removal.left[n] && !s.removal.held[n] {
			s.log.Warn("partition's group no longer counts this silo", "partition", n, "leader", cluster.FormatID(from))
		}
		s.removal.noticed[n] = from
	}
}

// checkRemoved looks at every partition's group on this silo (see removal) and stops the
// silo, its Err naming why, once the cluster has removed it.
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
	judgedNow, held, stop := r.look(groups)
	for _, j := range judgedNow {
		if j.held {
			s.log.Warn("partition's group removed this silo although it is in the partition's target set", "partition", j.partition)
		} else {
			s.log.Info("partition's group removed this silo, which is outside the partition's target set: a rebalance", "partition", j.partition)
		}
	}
	if !stop || r.err != nil {
		return
	}
	r.err = fmt.Errorf("removed by the cluster from the Raft group of every partition it held (partitions %v) although in their target sets: "+
		"its replicas are closed; a silo the cluster removed does not serve again with this data dir", held)
	s.log.Error("silo removed by the cluster from every partition's group; closing its replicas and stopping", "partitions", held)
	go s.shutdown(true)
}

// removedErr is why the cluster removed this silo, nil unless it has.
func (s *Silo) removedErr() error {
	s.removal.mu.Lock()
	defer s.removal.mu.Unlock()
	return s.removal.err
}
