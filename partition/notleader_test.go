package partition

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/internal/testkit"
)

// watchStop returns a channel closed when pid, on system, terminates.
func watchStop(t *testing.T, system *actor.ActorSystem, pid *actor.PID) <-chan struct{} {
	t.Helper()
	stopped := make(chan struct{})
	_, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started:
			ctx.Watch(pid)
		case *actor.Terminated:
			close(stopped)
			ctx.Stop(ctx.Self())
		}
	}), "watch-"+pid.GetId())
	if err != nil {
		t.Fatal(err)
	}
	return stopped
}

func waitStopped(t *testing.T, stopped <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: the activation still runs 20 s later", what)
	}
}

// TestAGrainWhoseReplicaDoesNotLeadNamesTheLeaderAndStops: with three voters, the grain of a
// follower's replica answers a command, a due scan or an inspection Unavailable, naming the
// leader's silo (LeaderSilo), and then stops itself, so that its caller resolves the partition
// again, on the leader.
func TestAGrainWhoseReplicaDoesNotLeadNamesTheLeaderAndStops(t *testing.T) {
	rs := newReplicaSet(t)
	leader := rs.leader(1)
	var follower *Host
	for id, h := range rs.hosts {
		if id != leader.SiloID() {
			follower = h
			break
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for follower.Leader(1) != leader.SiloID() { // the follower hears of the leader's term
		if time.Now().After(deadline) {
			t.Fatalf("the follower believes silo %d leads, not %d", follower.Leader(1), leader.SiloID())
		}
		time.Sleep(10 * time.Millisecond)
	}
	requests := []proto.Message{
		command("c1", 0, enqueue("m1")),
		&orreryv1.ScanDueRequest{MaxRefs: 10},
		&orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Partition{Partition: &orreryv1.InspectPartition{}}},
	}
	for _, req := range requests {
		system, pid := grainOn(t, Config{Host: follower}, 1)
		stopped := watchStop(t, system, pid)
		var wire *orreryv1.Error
		switch r := request[proto.Message](t, system, pid, req).(type) {
		case *orreryv1.CommandReply:
			wire = r.GetError()
		case *orreryv1.ScanDueReply:
			wire = r.GetError()
		case *orreryv1.InspectReply:
			wire = r.GetError()
		default:
			t.Fatalf("%T answered %T", req, r)
		}
		err := orrery.FromProto(wire)
		if !errors.Is(err, orrery.ErrUnavailable) || wire.GetLeaderSilo() != leader.SiloID() {
			t.Fatalf("%T on a follower: %v (leader silo %d), want Unavailable naming silo %d", req, err, wire.GetLeaderSilo(), leader.SiloID())
		}
		waitStopped(t, stopped, fmt.Sprintf("after answering %T not-leader", req))
	}
	if got := laneMessages(t, leader); len(got) != 0 {
		t.Fatalf("the follower's grain proposed: the lane holds %v", got)
	}
}

// TestAGrainStopsWhenItsProposalFindsItNoLongerLeads: a grain on a leader cut off from the
// other voters, once its replica has stepped down, proposes its housekeeping command (its clock
// has passed the receipts' retention); the proposal is refused, not leader, and the grain
// stops itself instead of staying active on a follower.
func TestAGrainStopsWhenItsProposalFindsItNoLongerLeads(t *testing.T) {
	rs := newReplicaSet(t)
	first := rs.leader(1)
	fake := clock.NewFake(time.Now())
	system, pid := grainOn(t, Config{Host: first, Clock: fake}, 1)
	grantAll(t, system, pid, "alice")
	receipt(t, request[*orreryv1.CommandReply](t, system, pid, command("c1", 0, enqueue("m1"))))
	stopped := watchStop(t, system, pid)

	rs.net.Isolate(first.SiloID())
	rs.mu.Lock()
	delete(rs.hosts, first.SiloID()) // still running, but cut off
	rs.mu.Unlock()
	t.Cleanup(func() { _ = first.Close() })
	// CheckQuorum: a leader that hears from no quorum steps down (and no longer names itself).
	testkit.Eventually(t, 30*time.Second, "the cut-off leader to step down", func() bool {
		return !first.Leads(1) && first.Leader(1) != first.SiloID()
	})
	select {
	case <-stopped:
		t.Fatal("the grain stopped before it was told anything")
	default:
	}
	fake.Advance(25 * time.Hour) // past the receipt's retention and the housekeeping interval
	waitStopped(t, stopped, "after its housekeeping proposal was refused")
}
