package chaos

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"
)

// leaderCheck is what checkOneLeaderPerTerm found.
type leaderCheck struct {
	// claims counts the samples in which a replica claimed to lead its partition; terms the
	// (partition, term) pairs for which some sample named a leader.
	claims, terms int
	// twoLeaders counts the (partition, term) pairs with more than one leader named.
	twoLeaders int
	problems   []string
}

// leaderWitness is the first sample that named a silo leader of a partition in a term.
type leaderWitness struct {
	sample replicaSample
	// self is whether the sample is the leader's own claim (leads), not a follower naming it.
	self bool
}

// describe says who named the leader, and when.
func (w leaderWitness) describe(leader string) string {
	at := w.sample.Received.UTC().Format(time.RFC3339Nano)
	if w.self {
		return fmt.Sprintf("silo %s claimed to lead it (read at %s)", leader, at)
	}
	return fmt.Sprintf("silo %s's replica named silo %s its leader (read at %s)", w.sample.Silo, leader, at)
}

// checkOneLeaderPerTerm checks Raft's election safety over the sampled replica views: in each
// partition's group, at most one silo is leader in a given term. A sample names a leader of
// (partition, term) in two ways: the replica's own claim to lead (leads: it is the Raft leader
// and has applied an entry of its term), and a replica's knowledge of its term's leader
// (leader_silo: etcd raft sets it only from a message the leader of that very term sent, or on
// becoming that leader). Two different silos named leader of the same partition in the same
// term, by any samples from any silos at any times, is a violation: Raft elects at most one
// leader per term, and a term's leader never changes. Leaders of different terms at
// overlapping times are not (an old leader that has not learnt of the new term yet still
// reports its own, older term), nor is a replica that knows no leader. What the samples cannot
// show is a second leader that existed only between two samples: sampling every few hundred
// milliseconds catches a split that lasts, not every one.
func checkOneLeaderPerTerm(samples []replicaSample) leaderCheck {
	type groupTerm struct {
		partition int
		term      uint64
	}
	named := map[groupTerm]map[string]leaderWitness{}
	var out leaderCheck
	for _, s := range samples {
		leader, self := s.LeaderSilo, false
		if s.Leads {
			leader, self = s.Silo, true
			out.claims++
		}
		if leader == "" {
			continue
		}
		key := groupTerm{s.Partition, s.Term}
		if named[key] == nil {
			named[key] = map[string]leaderWitness{}
		}
		if w, seen := named[key][leader]; !seen || self && !w.self {
			named[key][leader] = leaderWitness{sample: s, self: self}
		}
	}
	out.terms = len(named)
	keys := slices.SortedFunc(maps.Keys(named), func(a, b groupTerm) int {
		return cmp.Or(cmp.Compare(a.partition, b.partition), cmp.Compare(a.term, b.term))
	})
	for _, key := range keys {
		leaders := named[key]
		if len(leaders) < 2 {
			continue
		}
		out.twoLeaders++
		ids := slices.Sorted(maps.Keys(leaders))
		evidence := ""
		for i, id := range ids {
			if i > 0 {
				evidence += "; "
			}
			evidence += leaders[id].describe(id)
		}
		out.problems = append(out.problems, fmt.Sprintf("partition %d had %d leaders in term %d: %s", key.partition, len(ids), key.term, evidence))
	}
	return out
}

// loggedTimeCheck is what checkLoggedTimeNeverDecreases found.
type loggedTimeCheck struct {
	// samples counts the statuses read; backward the (partition, applied index, logged time)
	// marks whose logged time is below that of a mark at a lower applied index.
	samples, backward int
	problems          []string
}

// checkLoggedTimeNeverDecreases checks that a partition's logged time never goes backward
// along its Raft log, over the sampled partition statuses. Each status is a mark of the
// partition's applied state: the Raft index it has applied through and the logged time of that
// state (the leader stamps every entry with a logged time greater than every earlier entry's,
// and the state carries the last applied entry's). Because a Raft index holds the same entry
// on every replica, marks of one partition from any silo, any activation and any time are
// comparable: for two marks (i, l) and (j, m) of the same partition with i < j, m < l is a
// violation. An equal logged time at a higher index is not (entries without a logged time,
// Raft's empty and configuration entries, advance the index alone), nor are two marks at the
// same index (not compared). Only what the statuses carry is checked: the applied state of the
// replica that answered the inspection, normally the leader's, at the instants it was read;
// the followers' applied states are not exposed with their logged time.
func checkLoggedTimeNeverDecreases(samples []statusSample) loggedTimeCheck {
	out := loggedTimeCheck{samples: len(samples)}
	byPartition := map[int][]statusSample{}
	for _, s := range samples {
		byPartition[s.Partition] = append(byPartition[s.Partition], s)
	}
	for _, partition := range slices.Sorted(maps.Keys(byPartition)) {
		marks := byPartition[partition]
		slices.SortStableFunc(marks, func(a, b statusSample) int {
			return cmp.Or(cmp.Compare(a.AppliedIndex, b.AppliedIndex), cmp.Compare(a.LoggedTimeMicros, b.LoggedTimeMicros))
		})
		// latestBelow is the mark with the latest logged time among those at indexes below the
		// group being checked.
		var latestBelow *statusSample
		for start := 0; start < len(marks); {
			end := start
			for end < len(marks) && marks[end].AppliedIndex == marks[start].AppliedIndex {
				end++
			}
			group := marks[start:end]
			if latestBelow != nil {
				for i, s := range group {
					if s.LoggedTimeMicros >= latestBelow.LoggedTimeMicros {
						break // sorted by logged time within the index: the rest are later
					}
					if i > 0 && group[i-1].LoggedTimeMicros == s.LoggedTimeMicros {
						continue // the same mark, read again
					}
					out.backward++
					out.problems = append(out.problems, fmt.Sprintf("partition %d: logged time went backward: applied index %d carries logged time %s "+
						"(read through silo %s at %s), applied index %d carried %s (read through silo %s at %s)",
						partition, s.AppliedIndex, formatMicros(s.LoggedTimeMicros), s.Via, s.Received.UTC().Format(time.RFC3339Nano),
						latestBelow.AppliedIndex, formatMicros(latestBelow.LoggedTimeMicros), latestBelow.Via, latestBelow.Received.UTC().Format(time.RFC3339Nano)))
				}
			}
			if last := group[len(group)-1]; latestBelow == nil || last.LoggedTimeMicros > latestBelow.LoggedTimeMicros {
				latestBelow = &last
			}
			start = end
		}
	}
	return out
}
