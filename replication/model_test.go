package replication

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestRandomFaultsAgainstSingleCopyModel drives 3 replicas and 2 groups through random
// proposals, ticks, pauses (a killed replica: neither ticked nor stepped), isolations and
// network faults (drops, duplicates, delays, reordering). The single-copy model is the one
// sequence of entries each group commits: at every step every replica's applied entries are a
// prefix of the longest, no command appears twice, logged time increases along it, every
// proposal settled as committed is in it at its index, and after healing every replica has
// applied all of it. Logs are compacted past a few entries, so a replica paused or cut off
// for a while is caught up by a snapshot, its chunks under the same faults; the test fails
// if no case installed one. Raft's own election jitter is not seeded, so a failing case
// reproduces by its rapid seed up to that jitter.
func TestRandomFaultsAgainstSingleCopyModel(t *testing.T) {
	installs := 0
	rapid.Check(t, func(rt *rapid.T) {
		c := newClusterCompacting(rt, 3, 2, rapid.Uint64().Draw(rt, "network-seed"), 8)
		defer func() {
			for _, r := range c.replicas {
				for _, g := range c.groups {
					installs += r.installsOf(g)
				}
			}
		}()
		type proposed struct {
			by *replica
			p  Proposal
		}
		commands := map[string]bool{}
		var props []proposed
		disrupted := uint64(0) // at most one replica is paused or cut off, so a quorum remains
		steps := rapid.IntRange(20, 120).Draw(rt, "steps")
		for step := range steps {
			switch rapid.IntRange(0, 9).Draw(rt, "action") {
			case 0, 1, 2, 3:
				g := rapid.IntRange(0, 1).Draw(rt, "group")
				if l := c.leader(g); l != nil {
					cmd := fmt.Sprintf("g%d-step%d", g, step)
					if p, err := l.driver.Propose(g, "tenant-a", []byte(cmd)); err == nil {
						commands[cmd] = true
						props = append(props, proposed{by: l, p: p})
					}
				}
			case 4, 5, 6:
				c.ticks(rapid.IntRange(1, 5).Draw(rt, "ticks"))
			case 7:
				if disrupted == 0 {
					disrupted = uint64(rapid.IntRange(1, 3).Draw(rt, "victim"))
					c.net.Isolate(disrupted)
					c.replica(disrupted).down = rapid.Bool().Draw(rt, "pause")
				}
			case 8:
				if disrupted != 0 {
					c.net.Rejoin(disrupted)
					c.replica(disrupted).down = false
					disrupted = 0
				}
			case 9:
				c.net.SetFaults(NetworkFaults{
					DropPercent:      rapid.IntRange(0, 20).Draw(rt, "drop"),
					DuplicatePercent: rapid.IntRange(0, 20).Draw(rt, "duplicate"),
					MaxDelaySteps:    rapid.IntRange(0, 3).Draw(rt, "delay"),
					Reorder:          rapid.Bool().Draw(rt, "reorder"),
				})
			}
			checkPrefixes(rt, c, commands)
		}
		// Heal and let everything settle: every replica applies the whole common sequence.
		if disrupted != 0 {
			c.net.Rejoin(disrupted)
			c.replica(disrupted).down = false
		}
		c.net.SetFaults(NetworkFaults{})
		c.ticks(3 * electionBound)
		common := checkPrefixes(rt, c, commands)
		for _, g := range c.groups {
			c.sameApplied(g, common[g], 1, 2, 3)
		}
		for _, pr := range props {
			o, ok := pr.by.outcomeOf(pr.p)
			if !ok || !o.Committed {
				continue
			}
			found := false
			for _, e := range common[pr.p.Group] {
				if e.Index == pr.p.Index {
					found = e.Term == pr.p.Term && e.GetLoggedTimeUnixMicros() == pr.p.LoggedTimeMicros
				}
			}
			if !found {
				rt.Fatalf("proposal %+v settled as committed is not in the common sequence", pr.p)
			}
		}
	})
	t.Logf("snapshots installed: %d", installs)
	if installs == 0 {
		t.Fatal("no case installed a snapshot")
	}
}

// checkPrefixes checks that, per group, every replica's applied entries are a prefix of the
// longest, whose commands were all proposed, appear once each, and carry increasing logged
// times; it returns the longest sequence of each group.
func checkPrefixes(rt *rapid.T, c *cluster, proposed map[string]bool) map[int][]Entry {
	rt.Helper()
	common := map[int][]Entry{}
	for _, g := range c.groups {
		for _, r := range c.replicas {
			if a := r.appliedOf(g); len(a) > len(common[g]) {
				common[g] = a
			}
		}
		seen := map[string]bool{}
		for i, e := range common[g] {
			cmd := string(e.GetCommand())
			if !proposed[cmd] || seen[cmd] {
				rt.Fatalf("group %d entry %d: command %q proposed %v, seen before %v", g, i, cmd, proposed[cmd], seen[cmd])
			}
			seen[cmd] = true
			if i > 0 && e.GetLoggedTimeUnixMicros() <= common[g][i-1].GetLoggedTimeUnixMicros() {
				rt.Fatalf("group %d: logged time goes from %d to %d at entry %d", g, common[g][i-1].GetLoggedTimeUnixMicros(), e.GetLoggedTimeUnixMicros(), i)
			}
		}
		for _, r := range c.replicas {
			if err := samePrefix(r.appliedOf(g), common[g]); err != nil {
				rt.Fatalf("group %d replica %d: %v", g, r.id, err)
			}
		}
	}
	return common
}

// TestRandomConfChangesAgainstSingleCopyModel grows a group from replica 1 alone among 4
// replicas through random membership changes at its leader (AddLearner, PromoteLearner,
// RemoveReplica, TransferLeadership), interleaved with proposals, ticks, restarts (a replica
// reopened on its log and state), one replica paused or cut off at a time, and network faults.
// The single-copy model holds at every step (checkPrefixes), every proposal settled as
// committed is in the common sequence, and after healing the group has one configuration:
// every replica in it reports it and has applied the whole sequence.
func TestRandomConfChangesAgainstSingleCopyModel(t *testing.T) {
	changes, grown := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		c := newGrowingCluster(rt, 4, 1, rapid.Uint64().Draw(rt, "network-seed"), 8)
		type proposed struct {
			by *replica
			p  Proposal
		}
		commands := map[string]bool{}
		var props []proposed
		disrupted := uint64(0)
		steps := rapid.IntRange(20, 150).Draw(rt, "steps")
		for step := range steps {
			switch rapid.IntRange(0, 12).Draw(rt, "action") {
			case 0, 1, 2:
				if l := c.leader(0); l != nil {
					cmd := fmt.Sprintf("step%d", step)
					if p, err := l.driver.Propose(0, "tenant-a", []byte(cmd)); err == nil {
						commands[cmd] = true
						props = append(props, proposed{by: l, p: p})
					}
				}
			case 3, 4, 5:
				c.ticks(rapid.IntRange(1, 5).Draw(rt, "ticks"))
			case 6, 7, 12:
				l := c.leader(0)
				if l == nil {
					break
				}
				// Each kind of change draws its target among the replicas it fits, mostly.
				st, _ := l.driver.Status(0)
				// Adding and promoting, mostly, so that the group grows.
				kind := [10]int{0, 0, 0, 0, 1, 1, 1, 1, 2, 3}[rapid.IntRange(0, 9).Draw(rt, "change")]
				var fit []uint64
				for id := uint64(1); id <= 4; id++ {
					voter, learner := slices.Contains(st.Voters, id), slices.Contains(st.Learners, id)
					if [4]bool{!voter && !learner, learner, id != l.id && (voter || learner), voter && id != l.id}[kind] {
						fit = append(fit, id)
					}
				}
				target := uint64(rapid.IntRange(1, 4).Draw(rt, "target"))
				if len(fit) > 0 && rapid.IntRange(0, 9).Draw(rt, "fit") > 0 {
					target = fit[rapid.IntRange(0, len(fit)-1).Draw(rt, "fitting")]
				}
				var err error
				switch kind {
				case 0:
					err = l.driver.AddLearner(0, target)
				case 1:
					err = l.driver.PromoteLearner(0, target)
				case 2:
					err = l.driver.RemoveReplica(0, target)
				case 3:
					err = l.driver.TransferLeadership(0, target)
				}
				if err == nil {
					changes++
				}
			case 8:
				if disrupted == 0 {
					disrupted = uint64(rapid.IntRange(1, 4).Draw(rt, "victim"))
					c.net.Isolate(disrupted)
					c.replica(disrupted).down = rapid.Bool().Draw(rt, "pause")
				}
			case 9:
				if disrupted != 0 {
					c.net.Rejoin(disrupted)
					c.replica(disrupted).down = false
					disrupted = 0
				}
			case 10:
				r := c.replica(uint64(rapid.IntRange(1, 4).Draw(rt, "restarted")))
				down := r.down
				c.restart(r)
				r.down = down
			case 11:
				c.net.SetFaults(NetworkFaults{
					DropPercent:      rapid.IntRange(0, 20).Draw(rt, "drop"),
					DuplicatePercent: rapid.IntRange(0, 20).Draw(rt, "duplicate"),
					MaxDelaySteps:    rapid.IntRange(0, 3).Draw(rt, "delay"),
					Reorder:          rapid.Bool().Draw(rt, "reorder"),
				})
			}
			checkPrefixes(rt, c, commands)
		}
		if disrupted != 0 {
			c.net.Rejoin(disrupted)
			c.replica(disrupted).down = false
		}
		c.net.SetFaults(NetworkFaults{})
		c.ticks(3 * electionBound)
		common := checkPrefixes(rt, c, commands)
		l := c.leader(0)
		if l == nil {
			rt.Fatal("no leader after healing")
		}
		// An entry proposed last may commit in the last ticks; one more round of heartbeats
		// brings it everywhere.
		c.ticks(electionBound)
		common = checkPrefixes(rt, c, commands)
		want, _ := l.driver.Status(0)
		if len(want.Voters) > 1 {
			grown++
		}
		for _, r := range c.replicas {
			if !slices.Contains(want.Voters, r.id) && !slices.Contains(want.Learners, r.id) {
				continue
			}
			st, _ := r.driver.Status(0)
			if !slices.Equal(st.Voters, want.Voters) || !slices.Equal(st.Learners, want.Learners) {
				rt.Fatalf("replica %d: voters %v learners %v, the leader's %v and %v", r.id, st.Voters, st.Learners, want.Voters, want.Learners)
			}
			c.sameApplied(0, common[0], r.id)
		}
		for _, pr := range props {
			o, ok := pr.by.outcomeOf(pr.p)
			if !ok || !o.Committed {
				continue
			}
			if !slices.ContainsFunc(common[0], func(e Entry) bool {
				return e.Index == pr.p.Index && e.Term == pr.p.Term && e.GetLoggedTimeUnixMicros() == pr.p.LoggedTimeMicros
			}) {
				rt.Fatalf("proposal %+v settled as committed is not in the common sequence", pr.p)
			}
		}
	})
	t.Logf("conf changes accepted: %d; cases ending with more than one voter: %d", changes, grown)
	if grown == 0 {
		t.Fatal("no case grew the group past one voter")
	}
}
