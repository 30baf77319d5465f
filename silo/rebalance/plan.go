// Package rebalance moves the share units of capped queues (client.SetQueueLimits) between
// partitions toward the ones with demand, without ever letting their sum pass the cluster-wide
// limit: the pure plan of a round (Targets, Decreases, Increases) and the loop that carries
// rounds out from the silo that leads partition 0 (Rebalancer), every second, looking for newly
// capped queues every tenth round.
//
// A round first lowers the shares of the partitions that give units up and waits for those
// sets to commit, then raises the others by at most the units the lowering actually freed.
// Every set is a compare-and-set (SetQueueShare.compare) against the share the round read, so a
// set that meets another mover's change fails rather than creates units. A partition that
// cannot be reached keeps its share. Units freed but not placed (a raise refused, the silo lost
// its leadership) are owed by the rebalancer that freed them and placed by its next round while
// nobody else changed a share; a rebalancer that stops loses them, and the queue's shares then
// sum below its limit until client.SetQueueLimits sets them again.
package rebalance

import (
	"cmp"
	"slices"
)

// Partition is one partition's side of one limit of a capped queue in a round.
type Partition struct {
	// Reachable is false for a partition the round could not read: it keeps its units.
	Reachable bool
	// Units is its share now (leases, or thousandths of a lease a second).
	Units uint64
	// Demand is its queue's messages that want a lease: visible plus leased.
	Demand uint64
}

// maxDemand bounds the demand the plan weighs, so that units × demand fits in 64 bits (units
// are at most 10^9).
const maxDemand = 1 << 30

// Targets is each partition's share of total after the round: an unreachable partition keeps
// its units; the units left, total less those, are split among the reachable ones in
// proportion to their demand (the remainders to the largest fractions, then to the lowest
// partition). When no reachable partition has demand every one keeps its units.
func Targets(total uint64, parts []Partition) []uint64 {
	targets := make([]uint64, len(parts))
	available, demand := total, uint64(0)
	for i, p := range parts {
		if !p.Reachable {
			targets[i] = p.Units
			available -= min(available, p.Units)
			continue
		}
		demand += min(p.Demand, maxDemand)
	}
	if demand == 0 {
		for i, p := range parts {
			targets[i] = p.Units
		}
		return targets
	}
	type rest struct {
		partition int
		fraction  uint64
	}
	var rests []rest
	placed := uint64(0)
	for i, p := range parts {
		if !p.Reachable {
			continue
		}
		weighted := available * min(p.Demand, maxDemand)
		targets[i] = weighted / demand
		placed += targets[i]
		rests = append(rests, rest{partition: i, fraction: weighted % demand})
	}
	slices.SortStableFunc(rests, func(a, b rest) int { return cmp.Compare(b.fraction, a.fraction) })
	for _, r := range rests[:available-placed] {
		targets[r.partition]++
	}
	return targets
}

// Step sets one partition's share of one limit from From to To.
type Step struct {
	// Partition is the index of the partition in the round's parts.
	Partition int
	// From is its share before the step, To after.
	From, To uint64
}

// Decreases are the steps that lower the reachable partitions above their targets to them,
// in partition order: what a round sets first.
func Decreases(parts []Partition, targets []uint64) []Step {
	var steps []Step
	for i, p := range parts {
		if p.Reachable && targets[i] < p.Units {
			steps = append(steps, Step{Partition: i, From: p.Units, To: targets[i]})
		}
	}
	return steps
}

// Increases are the steps that raise the reachable partitions below their targets toward
// them, the largest shortfall first (then the lowest partition), with at most funds units in
// all: the units the round's decreases freed and the ones owed from before. parts are the
// shares once the decreases applied.
func Increases(parts []Partition, targets []uint64, funds uint64) []Step {
	var steps []Step
	for i, p := range parts {
		if p.Reachable && targets[i] > p.Units {
			steps = append(steps, Step{Partition: i, From: p.Units, To: targets[i]})
		}
	}
	slices.SortStableFunc(steps, func(a, b Step) int { return cmp.Compare(b.To-b.From, a.To-a.From) })
	kept := steps[:0]
	for _, s := range steps {
		if funds == 0 {
			break
		}
		raise := min(s.To-s.From, funds)
		funds -= raise
		kept = append(kept, Step{Partition: s.Partition, From: s.From, To: s.From + raise})
	}
	return kept
}

// Apply returns parts with steps applied (a step of an unreachable partition is ignored).
func Apply(parts []Partition, steps []Step) []Partition {
	out := slices.Clone(parts)
	for _, s := range steps {
		if out[s.Partition].Reachable {
			out[s.Partition].Units = s.To
		}
	}
	return out
}
