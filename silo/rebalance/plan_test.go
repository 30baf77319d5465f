package rebalance

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func total(parts []Partition) uint64 {
	var t uint64
	for _, p := range parts {
		t += p.Units
	}
	return t
}

// TestARoundLowersBeforeItRaisesAndNeverPassesTheLimit: over random shares and demands, a
// round's decreases come first and only lower, its increases only raise and by at most what
// the decreases freed, the sum never passes the limit after any one step (whatever order the
// steps of a phase commit in, and if the round stops half-way), unreachable partitions keep
// their units, and the reachable ones end at their targets in proportion to their demand.
func TestARoundLowersBeforeItRaisesAndNeverPassesTheLimit(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 2))
	for round := range 2000 {
		p := 1 + r.IntN(8)
		limit := uint64(r.IntN(40))
		parts := make([]Partition, p)
		left := limit
		for i := range parts {
			units := uint64(0)
			if left > 0 {
				units = uint64(r.IntN(int(left) + 1))
			}
			left -= units
			parts[i] = Partition{Reachable: r.IntN(5) != 0, Units: units, Demand: uint64(r.IntN(4) * r.IntN(10))}
		}
		targets := Targets(total(parts), parts)
		decreases := Decreases(parts, targets)
		lowered := parts
		freed := uint64(0)
		for _, s := range decreases {
			if !parts[s.Partition].Reachable || s.To >= s.From || s.From != parts[s.Partition].Units {
				t.Fatalf("round %d: decrease %v of %v", round, s, parts[s.Partition])
			}
			freed += s.From - s.To
			lowered = Apply(lowered, []Step{s})
			if total(lowered) > limit {
				t.Fatalf("round %d: the sum %d passed the limit %d after decrease %v", round, total(lowered), limit, s)
			}
		}
		increases := Increases(lowered, targets, freed)
		raised := uint64(0)
		// The increases commit in any order: check every prefix of a shuffled order.
		order := slices.Clone(increases)
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		after := lowered
		for _, s := range order {
			if !lowered[s.Partition].Reachable || s.To <= s.From || s.From != lowered[s.Partition].Units {
				t.Fatalf("round %d: increase %v of %v", round, s, lowered[s.Partition])
			}
			raised += s.To - s.From
			after = Apply(after, []Step{s})
			if total(after) > limit {
				t.Fatalf("round %d: the sum %d passed the limit %d after increase %v", round, total(after), limit, s)
			}
		}
		if raised > freed {
			t.Fatalf("round %d: raised %d with %d freed", round, raised, freed)
		}
		for i := range parts {
			if !parts[i].Reachable && after[i].Units != parts[i].Units {
				t.Fatalf("round %d: unreachable partition %d went from %d to %d", round, i, parts[i].Units, after[i].Units)
			}
			if parts[i].Reachable && after[i].Units != targets[i] {
				t.Fatalf("round %d: partition %d ended at %d, target %d (parts %v)", round, i, after[i].Units, targets[i], parts)
			}
		}
		if total(after) != total(parts) {
			t.Fatalf("round %d: units went from %d to %d", round, total(parts), total(after))
		}
	}
}

// TestTargetsFollowDemand: the units go to the partitions with demand, in proportion, the
// remainder to the largest fraction; without demand nothing moves; an unreachable partition's
// units stay where they are.
func TestTargetsFollowDemand(t *testing.T) {
	for _, c := range []struct {
		name  string
		total uint64
		parts []Partition
		want  []uint64
	}{
		{"all to the one with demand", 4, []Partition{{true, 1, 0}, {true, 1, 0}, {true, 1, 5}, {true, 1, 0}}, []uint64{0, 0, 4, 0}},
		{"in proportion", 10, []Partition{{true, 5, 1}, {true, 5, 3}}, []uint64{3, 7}},
		{"the remainder to the largest fraction, then the lowest partition", 3, []Partition{{true, 1, 1}, {true, 1, 1}, {true, 1, 4}}, []uint64{1, 0, 2}},
		{"no demand: nothing moves", 3, []Partition{{true, 2, 0}, {true, 1, 0}}, []uint64{2, 1}},
		{"unreachable keeps its units", 4, []Partition{{false, 3, 9}, {true, 1, 0}, {true, 0, 1}}, []uint64{3, 0, 1}},
	} {
		if got := Targets(c.total, c.parts); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
