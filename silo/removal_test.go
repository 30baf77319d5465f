package silo

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/internal/testkit"
)

// lookAt runs one check of r over one partition's group and returns what it judged.
func lookAt(r *removal, g groupLook) []judged { return r.look([]groupLook{g}) }

// TestRemovalIsJudgedOnceAndForgottenOnReAdd: by each kind of evidence (applied, re-added as
// a learner, told by the leader), inside the target set by this silo's view or outside it, a
// removal is judged at the first check that finds it, once, and the partition is a member again
// once its leader adds the silo back.
func TestRemovalIsJudgedOnceAndForgottenOnReAdd(t *testing.T) {
	cases := map[string]groupLook{
		"applied": {},
		"readded": {learner: true, leader: true},
		"told":    {voter: true}, // its outdated configuration still counts it
	}
	for name, after := range cases {
		for _, inTarget := range []bool{false, true} {
			r := &removal{}
			if got := lookAt(r, groupLook{voter: true, leader: true, inTarget: inTarget}); len(got) != 0 {
				t.Fatalf("%s, in target %v: a counted voter judged removed: %v", name, inTarget, got)
			}
			if name == "told" {
				r.noticed = map[int]uint64{0: 7}
			}
			after.inTarget = inTarget
			if got := lookAt(r, after); !slices.Equal(got, []judged{{partition: 0, inTarget: inTarget}}) {
				t.Fatalf("%s, in target %v: judged %v, want partition 0 once", name, inTarget, got)
			}
			if name != "readded" {
				for range 3 {
					if got := lookAt(r, after); len(got) != 0 {
						t.Fatalf("%s, in target %v: judged again: %v", name, inTarget, got)
					}
				}
			}
			if !r.left[0] && name != "readded" {
				t.Fatalf("%s, in target %v: partition 0 not awaiting its re-add", name, inTarget)
			}
			// Added back as a learner it hears: a member again, and a later removal is new.
			lookAt(r, groupLook{learner: true, leader: true, inTarget: true})
			if r.left[0] {
				t.Fatalf("%s, in target %v: still awaiting the re-add after it", name, inTarget)
			}
			if got := lookAt(r, groupLook{inTarget: true}); !slices.Equal(got, []judged{{partition: 0, inTarget: true}}) {
				t.Fatalf("%s, in target %v: a removal after the re-add judged %v", name, inTarget, got)
			}
		}
	}
}

// TestAJoinerIsNotJudgedRemoved: a silo no group counts and none removed (a joiner not added
// yet) has no removal to judge.
func TestAJoinerIsNotJudgedRemoved(t *testing.T) {
	r := &removal{}
	for range 4 {
		if got := lookAt(r, groupLook{inTarget: true}); len(got) != 0 {
			t.Fatalf("a joiner judged removed: %v", got)
		}
	}
}

// TestARemovedSiloInItsTargetSetIsAddedBackNotStopped: three silos hold one partition, three
// voters. Its leader removes a follower's replica although the follower is in the partition's
// target set, as a leader whose live view lacks the follower does during a split or while the
// follower rejoins under a new member id. The follower applies its removal and keeps running;
// the leader's placement adds it back, caught up, a voter again, and it answers commands.
func TestARemovedSiloInItsTargetSetIsAddedBackNotStopped(t *testing.T) {
	silos := startFounders(t, 3, 1)
	waitAllVoters(t, silos, 1)
	var leader, follower *Silo
	testkit.Eventually(t, 30*time.Second, "partition 0 to have a leader that can propose", func() bool {
		for _, s := range silos {
			if st, ok := s.host.Status(0); ok && st.CanPropose && !st.ConfChangePending {
				leader = s
				return true
			}
		}
		return false
	})
	for _, s := range silos {
		if s != leader {
			follower = s
			break
		}
	}
	testkit.Eventually(t, 30*time.Second, "the leader to remove the follower's replica", func() bool {
		return leader.host.RemoveReplica(0, follower.SiloID()) == nil
	})
	testkit.Eventually(t, 30*time.Second, "the follower to apply its removal", func() bool {
		st, ok := follower.host.Status(0)
		return ok && !slices.Contains(st.Voters, follower.SiloID()) && !slices.Contains(st.Learners, follower.SiloID())
	})
	// The follower must keep running, not stopping nor saying why it would, until the leader
	// has added it back and it is a voter again (by every silo's view).
	ids := []uint64{silos[0].SiloID(), silos[1].SiloID(), silos[2].SiloID()}
	slices.Sort(ids)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := follower.Err(); err != nil {
			t.Fatalf("silo %s stops after its removal: %v", cluster.FormatID(follower.SiloID()), err)
		}
		readded := true
		for _, s := range silos {
			st, ok := s.host.Status(0)
			readded = readded && ok && slices.Equal(st.Voters, ids) && len(st.Learners) == 0
		}
		if readded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the removed silo was not a voter again within 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case <-follower.Done():
		t.Fatalf("silo %s stopped: %v", cluster.FormatID(follower.SiloID()), follower.Err())
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := follower.Client().PartitionStatus(ctx, 0); err != nil {
		t.Fatalf("partition 0 through the re-added silo: %v", err)
	}
}
