package chaos

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orreryhq/orrery/cluster/placement"
	"github.com/orreryhq/orrery/cluster/raftnet"
	"github.com/orreryhq/orrery/internal/testkit"
)

// noticedLine is what a silo logs when a group's leader told it the group no longer counts it.
const noticedLine = "partition's group no longer counts this silo"

// spareUp is how long a silo left out of every target set must stay up to pass: 20 s with
// ORRERY_CLUSTER_FULL=1; 8 s in the short form, still sixteen of the silo's removal checks (one
// per placement look, every 500 ms) and four of gossip's 2 s state exchanges.
func spareUp() time.Duration {
	if clusterFull() {
		return 20 * time.Second
	}
	return 8 * time.Second
}

// TestClusterLeftOutSiloStaysUp: three silos hold one partition's group, three voters. All
// three are restarted with --replicas 2, so the silo ranked last for the partition leaves its
// target set and the leader removes its replica while it runs. That silo is a spare, not a
// silo the cluster removed: it stays up, holding no replica, while the other two keep the
// group, two voters, and serve; restarted, it stays up again. In "applies", the spare learns
// its removal by applying it; in "told", its Raft traffic is cut (the transport failpoint) from
// its restart until the others have removed it, so it never sees its removal committed, and
// the leader answers its campaigns after the heal, and again after its own restart.
//
// The short form runs "told" only, the case that takes more of the cluster's machinery (the
// leader's answer to a removed replica's campaign, across processes, twice), and holds the
// spare up for 8 s each time; the removal tests of package silo judge both kinds of evidence,
// applied and told, in process. ORRERY_CLUSTER_FULL=1 runs "applies" too and holds the spare up for 20 s
// (spareUp).
func TestClusterLeftOutSiloStaysUp(t *testing.T) {
	t.Run("applies", func(t *testing.T) {
		if !clusterFull() {
			t.Skip("the short form runs the told case only; ORRERY_CLUSTER_FULL=1 runs this one too")
		}
		testLeftOutSiloStaysUp(t, false)
	})
	t.Run("told", func(t *testing.T) { testLeftOutSiloStaysUp(t, true) })
}

func testLeftOutSiloStaysUp(t *testing.T, cut bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	faultsFile := filepath.Join(t.TempDir(), "raftnet-faults")
	cl := startReplicated(t, ctx, 3, SiloSpec{Partitions: 1, Replicas: 3, Env: []string{raftnet.FaultsFileEnv + "=" + faultsFile}})
	ids := make([]uint64, len(cl.Silos))
	for i, p := range cl.Silos {
		ids[i] = replicaID(t, p.SiloID())
	}
	target := placement.Target(0, ids, 2)
	spare := slices.IndexFunc(ids, func(id uint64) bool { return !slices.Contains(target, id) })
	t.Logf("with two replicas partition 0's target is %v: silo %d (%s) leaves it", target, spare, cl.Silos[spare].SiloID())

	for i, p := range cl.Silos {
		if err := p.Terminate(30 * time.Second); err != nil {
			t.Fatalf("silo %d on SIGTERM: %v", i, err)
		}
		cl.Specs[i].Replicas = 2
	}
	if cut {
		writeFaults(t, faultsFile, fmt.Sprintf("drop:%d", ids[spare]))
	}
	restarted := time.Now()
	for i := range cl.Silos {
		cl.Silos[i] = launchSilo(t, cl.Specs[i])
	}
	errs := make([]error, len(cl.Silos))
	var wg sync.WaitGroup
	for i, p := range cl.Silos {
		wg.Go(func() { errs[i] = p.awaitReady(readyTimeout) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("silo %d restarted with --replicas 2: %v\n%s", i, err, cl.Silos[i].Log())
		}
	}
	p := cl.Silos[spare]
	waitReplicated(t, ctx, cl, 2, 60*time.Second, p.SiloID())
	shrunk := time.Now()
	t.Logf("the group shrank to two voters without silo %d %v after the restart", spare, shrunk.Sub(restarted).Round(time.Millisecond))
	if cut {
		writeFaults(t, faultsFile, "")
		testkit.Eventually(t, 60*time.Second, "the leader to tell the spare that its group no longer counts it", func() bool {
			return strings.Contains(p.Log(), noticedLine) || p.Exited()
		})
	}
	stayUp(t, cl, spare, "left out of the target set")
	t.Logf("silo %d, left out, up %v after the group shrank (told by the leader: %v)",
		spare, time.Since(shrunk).Round(time.Millisecond), strings.Contains(p.Log(), noticedLine))

	if err := p.Terminate(30 * time.Second); err != nil {
		t.Fatalf("the spare on SIGTERM: %v\n%s", err, p.Log())
	}
	p = cl.Restart(t, spare)
	again := time.Now()
	if cut {
		// Its replica still holds the configuration counting it, campaigns, and is told again.
		testkit.Eventually(t, 60*time.Second, "the leader to tell the restarted spare again", func() bool {
			return strings.Contains(p.Log(), noticedLine) || p.Exited()
		})
	}
	stayUp(t, cl, spare, "restarted")
	t.Logf("silo %d, restarted, up %v after its restart (told again: %v)",
		spare, time.Since(again).Round(time.Millisecond), strings.Contains(p.Log(), noticedLine))
}

// stayUp fails the test unless silo i of cl, which no group counts, runs for spareUp(), while
// the others keep partition 0's group, two voters without it, and answer for it.
func stayUp(t *testing.T, cl *Cluster, i int, what string) {
	t.Helper()
	p := cl.Silos[i]
	up := spareUp()
	for deadline := time.Now().Add(up); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if p.Exited() {
			t.Fatalf("silo %d, %s, exited (%v) within %v\n%s", i, what, p.Wait(time.Second), up, p.Log())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitReplicated(t, ctx, cl, 2, 60*time.Second, p.SiloID())
	c := dialSeeds(t, cl.Seeds()...)
	if _, err := c.PartitionStatus(ctx, 0); err != nil {
		t.Fatalf("partition 0 with silo %d %s: %v", i, what, err)
	}
	for j, q := range cl.Silos {
		if j != i && q.Exited() {
			t.Fatalf("silo %d, in the group, exited\n%s", j, q.Log())
		}
	}
}

// TestClusterDeadSiloRemovedExits: three silos hold one partition's group, three voters, with
// a short --dead-after. A follower is paused (SIGSTOP) until the other two, having declared it
// dead for longer than the bound, removed its replica (two voters) and retired it; resumed, it
// exits with status 1 saying it was retired (a peer tells it, or it learns it when it tries to
// rejoin under a new member id, since the others blocked its old one); a removal alone never
// stops a silo. The other two keep the group.
func TestClusterDeadSiloRemovedExits(t *testing.T) {
	const deadAfter = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl := startReplicated(t, ctx, 3, SiloSpec{Partitions: 1, Replicas: 3, DeadAfter: deadAfter})
	leader, err := cl.LeaderOf(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	dead := (leader + 1) % len(cl.Silos)
	p := cl.Silos[dead]
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	waitReplicated(t, ctx, cl, 2, deadAfter+90*time.Second, p.SiloID())
	t.Logf("silo %d paused; its replica removed %v later", dead, time.Since(paused).Round(time.Millisecond))
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	wantExit1(t, cl, dead, "resumed", 60*time.Second)
	if !strings.Contains(p.Log(), retiredLine) {
		t.Fatalf("silo %d exited without saying it was retired\n%s", dead, p.Log())
	}
	t.Logf("silo %d resumed; exited with status 1 %v later", dead, time.Since(resumed).Round(time.Millisecond))
	waitReplicated(t, ctx, cl, 2, 60*time.Second, p.SiloID())
	for i, q := range cl.Silos {
		if i != dead && q.Exited() {
			t.Fatalf("silo %d, still in the group, exited\n%s", i, q.Log())
		}
	}
}

// wantExit1 fails the test unless silo i of cl exits with status 1 within bound.
func wantExit1(t *testing.T, cl *Cluster, i int, what string, bound time.Duration) {
	t.Helper()
	exit := cl.Silos[i].Wait(bound)
	var exitErr *exec.ExitError
	if !errors.As(exit, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("silo %d, %s: %v, want exit status 1\n%s", i, what, exit, cl.logs())
	}
}

// retiredLine is what a silo says when the cluster has retired it.
const retiredLine = "was retired by cluster"

// TestClusterRetiredSiloRestartedExits: three silos hold two partitions' groups, three voters
// each, with a short --dead-after. A silo is SIGKILLed and stays down until the other two have
// removed its replicas (two voters each), which retires it. Started again on its data dir with
// the same flags, it exits non-zero saying it was retired, and no group counts it meanwhile;
// started once more, it refuses the same way. The other two keep the groups.
func TestClusterRetiredSiloRestartedExits(t *testing.T) {
	const deadAfter, partitions = 3 * time.Second, 2
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl := startReplicated(t, ctx, 3, SiloSpec{Partitions: partitions, Replicas: 3, DeadAfter: deadAfter})
	leader, err := cl.LeaderOf(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	lost := (leader + 1) % len(cl.Silos)
	id := cl.Silos[lost].SiloID()
	cl.Silos[lost].Kill()
	killed := time.Now()
	waitReplicated(t, ctx, cl, 2, deadAfter+90*time.Second, id)
	t.Logf("silo %d killed; its replicas removed %v later", lost, time.Since(killed).Round(time.Millisecond))

	counted := func() bool {
		for _, r := range cl.Replications(ctx) {
			if slices.Contains(r.Voters, id) || slices.Contains(r.Learners, id) {
				return true
			}
		}
		return false
	}
	for attempt, what := range []string{"restarted on its data dir", "started once more"} {
		p := launchSilo(t, cl.Specs[lost])
		cl.Silos[lost] = p
		started := time.Now()
		for !p.Exited() {
			if counted() {
				t.Fatalf("silo %d, %s: a group counts it again\n%s", lost, what, cl.logs())
			}
			if time.Since(started) > 60*time.Second {
				t.Fatalf("silo %d, %s: still running after 60 s\n%s", lost, what, cl.logs())
			}
			time.Sleep(100 * time.Millisecond)
		}
		var exitErr *exec.ExitError
		if exit := p.Wait(time.Second); !errors.As(exit, &exitErr) || exitErr.ExitCode() == 0 || !strings.Contains(p.Log(), retiredLine) {
			t.Fatalf("silo %d, %s: exit %v, want a non-zero status and %q in its log\n%s", lost, what, exit, retiredLine, p.Log())
		}
		t.Logf("silo %d, %s (attempt %d): %v, %v after its start", lost, what, attempt+1, p.Wait(time.Second), time.Since(started).Round(time.Millisecond))
	}
	if counted() {
		t.Fatal("a group counts the retired silo again")
	}
	waitReplicated(t, ctx, cl, 2, 60*time.Second, id)
}
