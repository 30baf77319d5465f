package silo

import (
	"slices"
	"testing"
)

// lookAt runs one check of r over one partition's group and reports whether it stops.
func lookAt(r *removal, g groupLook) bool {
	_, _, stop := r.look([]groupLook{g})
	return stop
}

// TestRemovalOutsideTheTargetIsARebalance: a voter dropped by a group whose target set, by
// the silo's own view, leaves it out is a spare: told by the leader or applying its removal,
// it never stops, and a later re-add makes it a member again.
func TestRemovalOutsideTheTargetIsARebalance(t *testing.T) {
	for _, told := range []bool{false, true} {
		r := &removal{}
		if lookAt(r, groupLook{voter: true, leader: true}) {
			t.Fatal("a counted voter stopped")
		}
		for range 2 * removedLooks {
			g := groupLook{}
			if told {
				r.noticed = map[int]uint64{0: 7}
				g = groupLook{voter: true} // its outdated configuration still counts it
			}
			if lookAt(r, g) {
				t.Fatalf("told %v: a silo left out of the target stopped", told)
			}
		}
		if !r.left[0] || len(r.held) != 0 {
			t.Fatalf("told %v: left %v held %v, want partition 0 left", told, r.left, r.held)
		}
		// Added back as a learner while in the target: a member, and no removal.
		for range 2 * removedLooks {
			if lookAt(r, groupLook{learner: true, leader: true, inTarget: true}) {
				t.Fatalf("told %v: a spare added back stopped", told)
			}
		}
		if r.left[0] || len(r.held) != 0 {
			t.Fatalf("told %v: after the re-add left %v held %v, want neither", told, r.left, r.held)
		}
	}
}

// TestRemovalInsideTheTargetStops: a removal the silo's own view says it belongs through
// stops it after removedLooks checks, by each kind of evidence, even when the leader adds it
// back meanwhile.
func TestRemovalInsideTheTargetStops(t *testing.T) {
	cases := map[string]groupLook{
		"applied": {inTarget: true},
		"readded": {learner: true, leader: true, inTarget: true},
		"told":    {voter: true, inTarget: true},
	}
	for name, after := range cases {
		r := &removal{}
		lookAt(r, groupLook{voter: true, leader: true, inTarget: true})
		if name == "told" {
			r.noticed = map[int]uint64{0: 7}
		}
		if lookAt(r, after) {
			t.Fatalf("%s: stopped at the first check finding the removal", name)
		}
		// The leader re-adds it, a learner it hears: it stops regardless.
		_, held, stop := r.look([]groupLook{{learner: true, leader: true, inTarget: true}})
		if !stop || !slices.Equal(held, []int{0}) {
			t.Fatalf("%s: stop %v held %v, want a stop for partition 0", name, stop, held)
		}
	}
}

// TestRemovalFromOneGroupOfSeveral: a silo another group still counts keeps serving it; a
// joiner no group counts and none removed does not stop.
func TestRemovalFromOneGroupOfSeveral(t *testing.T) {
	r := &removal{}
	both := func(a, b groupLook) bool {
		a.partition, b.partition = 0, 1
		_, _, stop := r.look([]groupLook{a, b})
		return stop
	}
	member := groupLook{voter: true, leader: true, inTarget: true}
	both(member, member)
	for range 2 * removedLooks {
		if both(groupLook{inTarget: true}, member) {
			t.Fatal("stopped while partition 1 still counts it")
		}
	}
	// Partition 1 drops it as a rebalance: nothing counts it, partition 0 held it.
	both(groupLook{inTarget: true}, groupLook{})
	if !both(groupLook{inTarget: true}, groupLook{}) {
		t.Fatal("did not stop with partition 0 held and nothing counting it")
	}

	joiner := &removal{}
	for range 2 * removedLooks {
		if lookAt(joiner, groupLook{inTarget: true}) {
			t.Fatal("a joiner not added yet stopped")
		}
	}
}
