package placement

import (
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"slices"
)

// Score is the rendezvous weight of silo for partition: the target set is the silos with the
// highest scores.
func Score(partition int, silo uint64) uint64 {
	var buf [16]byte
	binary.BigEndian.PutUint64(buf[:8], uint64(partition))
	binary.BigEndian.PutUint64(buf[8:], silo)
	h := fnv.New64a()
	_, _ = h.Write(buf[:])
	// FNV's low bits mix poorly for inputs this close together; fold the halves.
	s := h.Sum64()
	s ^= s >> 29
	s *= 0xbf58476d1ce4e5b9
	s ^= s >> 32
	return s
}

// Target returns partition's target replica set: the (at most) r silos of live with the
// highest Score, highest first.
func Target(partition int, live []uint64, r int) []uint64 {
	ranked := slices.Clone(live)
	slices.Sort(ranked)
	ranked = slices.Compact(ranked)
	slices.SortFunc(ranked, func(a, b uint64) int {
		if c := cmp.Compare(Score(partition, b), Score(partition, a)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return ranked[:min(r, len(ranked))]
}

// Group is one partition's Raft configuration as its leader sees it.
type Group struct {
	Partition int
	// Leader is the silo leading the group: the one asking.
	Leader uint64
	// Voters and Learners are the group's configuration.
	Voters, Learners []uint64
	// CaughtUp holds the replicas whose logs have caught up with the leader's commit.
	CaughtUp map[uint64]bool
}

// Membership is what the cluster's membership says about silos.
type Membership struct {
	// Live are the silos in the topology.
	Live []uint64
	// Gone reports a silo dead longer than the bound, or one the membership no longer knows
	// at all; its replicas may be removed.
	Gone func(silo uint64) bool
}

// Action is what a Step does.
type Action int

// Actions of a Step.
const (
	None Action = iota
	AddLearner
	Promote
	Remove
	Transfer
)

func (a Action) String() string {
	switch a {
	case AddLearner:
		return "add-learner"
	case Promote:
		return "promote"
	case Remove:
		return "remove"
	case Transfer:
		return "transfer-leadership"
	default:
		return "none"
	}
}

// Step is one configuration change (or leadership transfer) of a group.
type Step struct {
	Action  Action
	Replica uint64
}

// Next returns the next step that moves g toward its target set of r replicas over m's live
// silos (see the package doc), or a Step with Action None when g is where it belongs or must
// wait (a learner still catching up, a dead voter not gone yet).
func Next(g Group, m Membership, r int) Step {
	target := Target(g.Partition, m.Live, r)
	inTarget := func(s uint64) bool { return slices.Contains(target, s) }
	live := func(s uint64) bool { return slices.Contains(m.Live, s) }
	gone := func(s uint64) bool { return m.Gone != nil && m.Gone(s) }
	for _, l := range sorted(g.Learners) {
		if inTarget(l) && g.CaughtUp[l] {
			return Step{Promote, l}
		}
	}
	for _, l := range sorted(g.Learners) {
		// A learner whose silo is merely out of this leader's sight (a split, a pause) may
		// be in the target set of the cluster as a whole: like a dead voter, it waits for
		// the bound.
		if !inTarget(l) && (live(l) || gone(l)) {
			return Step{Remove, l}
		}
	}
	catchingUp := slices.ContainsFunc(g.Learners, inTarget)
	if !catchingUp {
		for _, s := range target {
			if !slices.Contains(g.Voters, s) && !slices.Contains(g.Learners, s) {
				return Step{AddLearner, s}
			}
		}
	}
	targetVoters := 0
	for _, v := range g.Voters {
		if inTarget(v) {
			targetVoters++
		}
	}
	leaderLeaves := false
	for _, v := range sorted(g.Voters) {
		if inTarget(v) || len(g.Voters) == 1 {
			continue
		}
		if !gone(v) && (!live(v) || targetVoters < len(target)) {
			continue // dead but not gone yet, or its replacement is not a voter yet
		}
		if v == g.Leader {
			leaderLeaves = true
			continue
		}
		return Step{Remove, v}
	}
	if leaderLeaves {
		if to := transferTarget(g, target); to != 0 {
			return Step{Transfer, to}
		}
	}
	return Step{}
}

// transferTarget is the caught-up voter of the target set ranked highest, 0 if none.
func transferTarget(g Group, target []uint64) uint64 {
	for _, s := range target {
		if s != g.Leader && slices.Contains(g.Voters, s) && g.CaughtUp[s] {
			return s
		}
	}
	return 0
}

// Balance returns the voter g's leadership should move to so that leaderships even out, 0 to
// keep it: a caught-up voter whose silo leads at least two partitions fewer than the leader's
// (leads counts the partitions each silo leads, as the asking silo sees them), the one leading
// fewest (lowest id among equals). A transfer lowers the spread, so repeated balancing ends.
func Balance(g Group, leads map[uint64]int) uint64 {
	var best uint64
	for _, v := range sorted(g.Voters) {
		if v == g.Leader || !g.CaughtUp[v] || leads[v]+1 >= leads[g.Leader] {
			continue
		}
		if best == 0 || leads[v] < leads[best] {
			best = v
		}
	}
	return best
}

func sorted(ids []uint64) []uint64 {
	s := slices.Clone(ids)
	slices.Sort(s)
	return s
}
