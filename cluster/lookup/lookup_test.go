package lookup

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/internal/testkit"
)

// TestACallLandsOnTheLeadersSilo: with partition n led by the silo ranked last for it, a call
// from the silo ranked first lands on the leader: the first-ranked activator answers with the
// leader, Get follows that hint at once (it never asks the silo ranked between them), and
// only the leader activates the grain.
func TestACallLandsOnTheLeadersSilo(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, "lookup-lands")
	for n := range 3 {
		ranked := rank(n, tc.silos[0].lookup.silos())
		first, middle, last := tc.silo(ranked[0]), tc.silo(ranked[1]), tc.silo(ranked[2])
		tc.leaders.set(n, last.id)
		mustServe(t, first.transport, n, last.id)
		if asked := middle.view.asked[n].Load(); asked != 0 {
			t.Errorf("partition %d: the silo ranked second was asked %d times; Get did not follow the first one's hint", n, asked)
		}
		if asked := first.view.asked[n].Load(); asked != 1 {
			t.Errorf("partition %d: the silo ranked first was asked %d times, want 1", n, asked)
		}
		mustServe(t, middle.transport, n, last.id) // a second caller finds the same activation
	}
	for _, s := range tc.silos {
		var want int64
		for n := range 3 {
			if tc.leaders.of(n) == s.id {
				want++
			}
		}
		if got := s.started.Load(); got != want {
			t.Errorf("silo %d activated %d grains, want %d (the partitions it leads)", s.id, got, want)
		}
	}
}

// TestWhenLeadershipMovesTheOldActivationNamesTheNewLeaderAndStops: a caller whose PID cache
// points at the old leader's activation gets, from that activation, Unavailable naming the
// new leader; the transport records the hint and retries at once, within the same call, where
// Get asks the hinted silo first; the old activation stops and its activator forgets it.
func TestWhenLeadershipMovesTheOldActivationNamesTheNewLeaderAndStops(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, "lookup-moves")
	const n = 1
	ranked := rank(n, tc.silos[0].lookup.silos())
	oldLeader, caller, newLeader := tc.silo(ranked[0]), tc.silo(ranked[1]), tc.silo(ranked[2])
	tc.leaders.set(n, oldLeader.id)
	mustServe(t, caller.transport, n, oldLeader.id)

	tc.leaders.set(n, newLeader.id)
	askedOld := oldLeader.view.asked[n].Load()
	mustServe(t, caller.transport, n, newLeader.id)
	if got := oldLeader.notLeader.Load(); got != 1 {
		t.Fatalf("the old activation answered not-leader %d times, want 1 (the call reached it through the cached PID)", got)
	}
	if got := oldLeader.view.asked[n].Load(); got != askedOld {
		t.Errorf("the old leader's activator was asked %d more times; Get did not ask the hinted silo first", got-askedOld)
	}
	testkit.Eventually(t, 10*time.Second, "the old activation to stop", func() bool { return oldLeader.stopped.Load() == 1 })
	kind := func(s *silo) int32 { return s.c.GetClusterKind("partition").Count() }
	testkit.Eventually(t, 10*time.Second, "the old leader's activator to forget its grain", func() bool { return kind(oldLeader) == 0 })
	if kind(newLeader) != 1 {
		t.Fatalf("the new leader counts %d activations, want 1", kind(newLeader))
	}

	// Back to the old leader: its activator activates the partition again.
	tc.leaders.set(n, oldLeader.id)
	mustServe(t, caller.transport, n, oldLeader.id)
	if got := oldLeader.started.Load(); got != 2 {
		t.Fatalf("the old leader activated the partition %d times, want 2", got)
	}
}

// TestAnActivatorStopsTheGrainOfAPartitionItNoLongerLeads: an activator asked for a partition
// its silo's replica no longer leads stops the grain it holds for it, though no request reached
// that grain. The caller asks it because of a stale hint: it ranks last for the partition, and
// the new leader first.
func TestAnActivatorStopsTheGrainOfAPartitionItNoLongerLeads(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, "lookup-stale")
	const n = 2
	ranked := rank(n, tc.silos[0].lookup.silos())
	newLeader, caller, oldLeader := tc.silo(ranked[0]), tc.silo(ranked[1]), tc.silo(ranked[2])
	tc.leaders.set(n, oldLeader.id)
	mustServe(t, oldLeader.transport, n, oldLeader.id)

	tc.leaders.set(n, newLeader.id)
	caller.lookup.Hint(n, oldLeader.id)
	mustServe(t, caller.transport, n, newLeader.id)
	if got := oldLeader.notLeader.Load(); got != 0 {
		t.Fatalf("the old activation answered %d requests", got)
	}
	testkit.Eventually(t, 10*time.Second, "the old leader's activator to stop its grain", func() bool { return oldLeader.stopped.Load() == 1 })
}

// TestAClientFollowsAHintFromANonLeader: a client runs no activator (no Leadership) and reaches
// the leader through the silos' answers: from the silo ranked first, from a stale hint, and,
// after the leadership moved, from the old activation's not-leader answer.
func TestAClientFollowsAHintFromANonLeader(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, "lookup-client")
	cl := tc.startClient()
	if cl.lookup.activator != nil {
		t.Fatal("the client runs an activator")
	}
	const n = 3
	ranked := rank(n, cl.lookup.silos())
	tc.leaders.set(n, ranked[2])
	mustServe(t, cl.transport, n, ranked[2])
	if asked := tc.silo(ranked[1]).view.asked[n].Load(); asked != 0 {
		t.Errorf("the silo ranked second was asked %d times; the client did not follow the first one's hint", asked)
	}

	tc.leaders.set(n, ranked[1])
	mustServe(t, cl.transport, n, ranked[1])
	if got := tc.silo(ranked[2]).notLeader.Load(); got != 1 {
		t.Fatalf("the old activation answered not-leader %d times, want 1", got)
	}

	tc.leaders.set(n, ranked[0])
	cl.lookup.Hint(n, ranked[2])
	cl.c.PidCache.Remove("3", "partition")
	mustServe(t, cl.transport, n, ranked[0])
}

// TestWithNoLeaderACallFailsWithinItsDeadlineAndSucceedsOnceOneLeads: while no silo leads a
// partition every call to it fails Unavailable or DeadlineExceeded before its deadline, from a
// silo and from a client; once a silo leads it, calls land there.
func TestWithNoLeaderACallFailsWithinItsDeadlineAndSucceedsOnceOneLeads(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, "lookup-none")
	cl := tc.startClient()
	const n = 0
	for _, transport := range []struct {
		name string
		call func(ctx context.Context) (string, error)
	}{
		{"silo", func(ctx context.Context) (string, error) { return servedBy(ctx, tc.silo(1).transport, n) }},
		{"client", func(ctx context.Context) (string, error) { return servedBy(ctx, cl.transport, n) }},
	} {
		const deadline = 3 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		got, err := transport.call(ctx)
		took := time.Since(start)
		cancel()
		if !errors.Is(err, orrery.ErrUnavailable) && !errors.Is(err, orrery.ErrDeadlineExceeded) {
			t.Fatalf("%s: with no leader the call got %q, %v; want Unavailable or DeadlineExceeded", transport.name, got, err)
		}
		if took > deadline+500*time.Millisecond {
			t.Fatalf("%s: the call failed after %v, past its %v deadline", transport.name, took, deadline)
		}
		t.Logf("%s: no leader: %v after %v", transport.name, err, took.Round(time.Millisecond))
	}
	for _, s := range tc.silos {
		if s.started.Load() != 0 {
			t.Fatalf("silo %d activated the partition with no leader", s.id)
		}
	}

	tc.leaders.set(n, 2)
	mustServe(t, tc.silo(1).transport, n, 2)
	mustServe(t, cl.transport, n, 2)
}

// TestAGracefulShutdownStopsTheActivatorsGrains: protoactor's graceful shutdown stops the
// lookup (twice), and the activator stops its grains first.
func TestAGracefulShutdownStopsTheActivatorsGrains(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, "lookup-shutdown")
	leader := tc.silo(2)
	tc.leaders.set(0, leader.id)
	tc.leaders.set(1, leader.id)
	mustServe(t, leader.transport, 0, leader.id)
	mustServe(t, tc.silo(1).transport, 1, leader.id)
	leader.once.Do(func() {
		_ = leader.transport.Close()
		done := make(chan error, 1)
		go func() { done <- cluster.Shutdown(leader.c, leader.p, true) }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("graceful shutdown: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the graceful shutdown did not return within 30 s")
		}
	})
	if got := leader.stopped.Load(); got != 2 {
		t.Fatalf("%d of the 2 grains stopped in the graceful shutdown", got)
	}
}

// TestALeaderTheCallerHasNotSeenIsReachedByItsAddress: a lookup whose silos (Config.Silos,
// as a caller's topology that has not yet seen a silo that just rejoined) list only silo 1,
// while silo 3 leads: silo 1's activator names the leader and its address, and the call lands
// on silo 3 without asking silo 2, which neither the caller nor the answer named. Once a
// listed silo leads, calls land there.
func TestALeaderTheCallerHasNotSeenIsReachedByItsAddress(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, "lookup-silos")
	only := tc.silo(1)
	cl := tc.startClientWith(Config{Kind: cluster.PartitionKind, Logger: quiet,
		Silos: func() map[uint64]string { return map[uint64]string{only.id: only.c.ActorSystem.Address()} }})
	const n = 0
	tc.leaders.set(n, 3)
	mustServe(t, cl.transport, n, 3)
	if asked := tc.silo(2).view.asked[n].Load(); asked != 0 {
		t.Fatalf("silo 2, neither configured nor named, was asked %d times", asked)
	}
	tc.leaders.set(n, only.id)
	mustServe(t, cl.transport, n, only.id)
}
