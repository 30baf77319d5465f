package placement

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestTargetIsTheRHighestScoresAndStable(t *testing.T) {
	live := []uint64{5, 3, 9, 1, 7}
	for p := range 64 {
		got := Target(p, live, 3)
		if len(got) != 3 {
			t.Fatalf("partition %d: target %v, want 3 silos", p, got)
		}
		for _, s := range live {
			if !slices.Contains(got, s) && Score(p, s) > Score(p, got[2]) {
				t.Fatalf("partition %d: silo %d scores above target member %d", p, s, got[2])
			}
		}
		// Losing a silo outside the target leaves the target as it was.
		var outside uint64
		for _, s := range live {
			if !slices.Contains(got, s) {
				outside = s
			}
		}
		rest := slices.DeleteFunc(slices.Clone(live), func(s uint64) bool { return s == outside })
		if again := Target(p, rest, 3); !slices.Equal(again, got) {
			t.Fatalf("partition %d: target %v moved to %v when silo %d outside it left", p, got, again, outside)
		}
	}
	if got := Target(0, []uint64{4, 4}, 3); !slices.Equal(got, []uint64{4}) {
		t.Fatalf("duplicates: target %v, want [4]", got)
	}
}

func TestTargetsSpreadOverSilos(t *testing.T) {
	live := []uint64{11, 22, 33, 44}
	count := map[uint64]int{}
	for p := range 400 {
		for _, s := range Target(p, live, 3) {
			count[s]++
		}
	}
	for _, s := range live {
		if count[s] < 250 || count[s] > 350 { // 300 expected each
			t.Fatalf("replica counts %v: uneven", count)
		}
	}
}

// group builds a Group of partition p led by leader.
func group(p int, leader uint64, voters, learners []uint64, caughtUp ...uint64) Group {
	g := Group{Partition: p, Leader: leader, Voters: voters, Learners: learners, CaughtUp: map[uint64]bool{}}
	for _, s := range caughtUp {
		g.CaughtUp[s] = true
	}
	return g
}

func TestNextSteps(t *testing.T) {
	live := []uint64{1, 2, 3}
	none := Membership{Live: live}
	cases := []struct {
		name string
		g    Group
		m    Membership
		want Step
	}{
		{"a lone founder adds a learner", group(0, 1, []uint64{1}, nil, 1), none, Step{AddLearner, Target(0, live, 3)[firstNot(Target(0, live, 3), 1)]}},
		{"a learner catching up holds further adds", group(0, 1, []uint64{1}, []uint64{2}, 1), none, Step{}},
		{"a caught-up learner is promoted", group(0, 1, []uint64{1}, []uint64{2}, 1, 2), none, Step{Promote, 2}},
		{"full target: nothing to do", group(0, 1, []uint64{1, 2, 3}, nil, 1, 2, 3), none, Step{}},
		{"a gone learner outside the target is removed", group(0, 1, []uint64{1, 2, 3}, []uint64{4}, 1, 2, 3),
			Membership{Live: live, Gone: func(s uint64) bool { return s == 4 }}, Step{Remove, 4}},
		// Cut off from the leader (a split, a pause) but not gone: its silo may be alive and
		// in the target set of a leader that sees it, so it waits like a dead voter.
		{"an unreachable learner is kept before the bound", group(0, 1, []uint64{1, 2, 3}, []uint64{4}, 1, 2, 3), none, Step{}},
		{"a dead voter is kept before the bound", group(0, 1, []uint64{1, 2, 3}, nil, 1, 2), Membership{Live: []uint64{1, 2}}, Step{}},
		{"a gone voter is removed", group(0, 1, []uint64{1, 2, 3}, nil, 1, 2),
			Membership{Live: []uint64{1, 2}, Gone: func(s uint64) bool { return s == 3 }}, Step{Remove, 3}},
		{"a lone voter is never removed", group(0, 1, []uint64{1}, nil, 1),
			Membership{Live: []uint64{2}, Gone: func(s uint64) bool { return s == 1 }}, Step{AddLearner, 2}},
	}
	for _, tc := range cases {
		if got := Next(tc.g, tc.m, 3); got != tc.want {
			t.Errorf("%s: Next = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestALiveLearnerOutsideTheTargetIsRemovedAtOnce: a learner whose silo is live and ranked
// outside the target set (a rebalance) is removed without waiting for the bound.
func TestALiveLearnerOutsideTheTargetIsRemovedAtOnce(t *testing.T) {
	live := []uint64{1, 2, 3, 4}
	target := Target(0, live, 3)
	var out uint64
	for _, s := range live {
		if !slices.Contains(target, s) {
			out = s
		}
	}
	g := group(0, target[0], target, []uint64{out}, target...)
	if got := Next(g, Membership{Live: live}, 3); got != (Step{Remove, out}) {
		t.Fatalf("Next = %+v, want the removal of learner %d", got, out)
	}
}

func firstNot(ids []uint64, not uint64) int {
	for i, s := range ids {
		if s != not {
			return i
		}
	}
	return -1
}

func TestALiveVoterOutsideTheTargetLeavesOnlyOnceTheTargetIsFull(t *testing.T) {
	live := []uint64{1, 2, 3, 4}
	p := 0
	target := Target(p, live, 3)
	var outside uint64
	for _, s := range live {
		if !slices.Contains(target, s) {
			outside = s
		}
	}
	voters := []uint64{outside, target[0], target[1]}
	g := group(p, target[0], voters, nil, voters...)
	if got := Next(g, Membership{Live: live}, 3); got != (Step{AddLearner, target[2]}) {
		t.Fatalf("Next = %+v, want the missing target silo %d added", got, target[2])
	}
	g.Voters = append(g.Voters, target[2])
	g.CaughtUp[target[2]] = true
	if got := Next(g, Membership{Live: live}, 3); got != (Step{Remove, outside}) {
		t.Fatalf("Next = %+v, want silo %d outside the target removed", got, outside)
	}
	// Led from outside the target, the leader hands its leadership over instead.
	g.Leader = outside
	if got := Next(g, Membership{Live: live}, 3); got != (Step{Transfer, target[0]}) {
		t.Fatalf("Next = %+v, want leadership handed to %d", got, target[0])
	}
}

// TestGroupsConvergeThroughChurn applies Next's steps to many groups while silos join, die and
// are declared gone: every configuration keeps a voter, changes one replica per step, and once
// membership settles every group's voters are its target.
func TestGroupsConvergeThroughChurn(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	const r, partitions = 3, 32
	live := map[uint64]bool{1: true}
	gone := map[uint64]bool{}
	next := uint64(2)
	type state struct {
		leader           uint64
		voters, learners []uint64
	}
	groups := make([]state, partitions)
	for p := range groups {
		groups[p] = state{leader: 1, voters: []uint64{1}}
	}
	membership := func() Membership {
		var ids []uint64
		for s, ok := range live {
			if ok {
				ids = append(ids, s)
			}
		}
		return Membership{Live: ids, Gone: func(s uint64) bool { return gone[s] }}
	}
	step := func(p int) bool {
		st := &groups[p]
		m := membership()
		leader := st.leader
		if !live[leader] || !slices.Contains(st.voters, leader) {
			leader = 0
			for _, v := range sorted(st.voters) {
				if live[v] {
					leader = v
					break
				}
			}
			st.leader = leader
		}
		if leader == 0 {
			t.Fatalf("partition %d: no live voter in %v", p, st.voters)
		}
		caught := append(slices.Clone(st.voters), st.learners...)
		g := group(p, leader, st.voters, st.learners, caught...)
		s := Next(g, m, r)
		switch s.Action {
		case AddLearner:
			st.learners = append(st.learners, s.Replica)
		case Promote:
			st.learners = slices.DeleteFunc(st.learners, func(x uint64) bool { return x == s.Replica })
			st.voters = append(st.voters, s.Replica)
		case Remove:
			st.learners = slices.DeleteFunc(st.learners, func(x uint64) bool { return x == s.Replica })
			st.voters = slices.DeleteFunc(st.voters, func(x uint64) bool { return x == s.Replica })
		case Transfer:
			st.leader = s.Replica
		case None:
			return false
		}
		if len(st.voters) == 0 {
			t.Fatalf("partition %d: step %+v left no voter", p, s)
		}
		return true
	}
	for round := range 400 {
		switch rng.IntN(10) {
		case 0, 1:
			live[next] = true
			next++
		case 2:
			var ids []uint64
			for s, ok := range live {
				if ok {
					ids = append(ids, s)
				}
			}
			slices.Sort(ids)
			// Kill one silo at a time, and only while every group keeps a live quorum.
			if len(ids) > 3 && round%3 == 0 {
				victim := ids[rng.IntN(len(ids))]
				live[victim] = false
			}
		case 3:
			for s, ok := range live {
				if !ok {
					gone[s] = true
				}
			}
		}
		for p := range groups {
			step(p)
		}
	}
	for s, ok := range live {
		if !ok {
			gone[s] = true
		}
	}
	for p := range groups {
		for range 20 {
			if !step(p) {
				break
			}
		}
		want := sorted(Target(p, membership().Live, r))
		if got := sorted(groups[p].voters); !slices.Equal(got, want) || len(groups[p].learners) > 0 {
			t.Fatalf("partition %d settled at voters %v learners %v, want voters %v", p, got, groups[p].learners, want)
		}
	}
}

func TestBalanceMovesLeadershipToTheLeastLoaded(t *testing.T) {
	g := group(0, 1, []uint64{1, 2, 3}, nil, 1, 2, 3)
	if got := Balance(g, map[uint64]int{1: 4, 2: 3, 3: 2}); got != 3 {
		t.Fatalf("Balance = %d, want 3 (leads 2 against the leader's 4)", got)
	}
	if got := Balance(g, map[uint64]int{1: 3, 2: 2, 3: 3}); got != 0 {
		t.Fatalf("Balance = %d, want 0 (a spread of one is even)", got)
	}
	g.CaughtUp[3] = false
	if got := Balance(g, map[uint64]int{1: 4, 2: 4, 3: 1}); got != 0 {
		t.Fatalf("Balance = %d, want 0 (the only lighter voter is behind)", got)
	}
}
