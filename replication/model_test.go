package replication

import (
	"fmt"
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
				c.net.SetFaults(Faults{
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
		c.net.SetFaults(Faults{})
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
