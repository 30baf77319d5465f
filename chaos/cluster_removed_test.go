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
)

// removedLine is what a silo logs when the cluster has removed it from every partition's group.
const removedLine = "silo removed by the cluster from every partition's group"

// noticedLine is what a silo logs when a group's leader told it the group no longer counts it.
const noticedLine = "partition's group no longer counts this silo"

// TestClusterRemovedSiloExits: three silos hold one partition's group, three voters. All three
// are restarted with --replicas 2, so the silo ranked last for the partition leaves its target
// set and the leader removes it while it runs. That silo learns it, closes its replicas and
// exits with status 1, saying why; the other two keep the group, two voters, and stay up. In
// "applies", the removed silo learns it by applying its removal; in "told", its Raft traffic
// is cut (the transport failpoint) from its restart until the others have removed it, so it
// never sees its removal committed, and it learns it when the leader answers its campaign
// after the heal.
func TestClusterRemovedSiloExits(t *testing.T) {
	t.Run("applies", func(t *testing.T) { testRemovedSiloExits(t, false) })
	t.Run("told", func(t *testing.T) { testRemovedSiloExits(t, true) })
}

func testRemovedSiloExits(t *testing.T, cut bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	faultsFile := filepath.Join(t.TempDir(), "raftnet-faults")
	cl := startReplicated(t, ctx, 3, SiloSpec{Partitions: 1, Replicas: 3, Env: []string{raftnet.FaultsFileEnv + "=" + faultsFile}})
	ids := make([]uint64, len(cl.Silos))
	for i, p := range cl.Silos {
		ids[i] = replicaID(t, p.SiloID())
	}
	target := placement.Target(0, ids, 2)
	removed := slices.IndexFunc(ids, func(id uint64) bool { return !slices.Contains(target, id) })
	t.Logf("with two replicas partition 0's target is %v: silo %d (%s) leaves it", target, removed, cl.Silos[removed].SiloID())

	for i, p := range cl.Silos {
		if err := p.Terminate(30 * time.Second); err != nil {
			t.Fatalf("silo %d on SIGTERM: %v", i, err)
		}
		cl.Specs[i].Replicas = 2
	}
	if cut {
		writeFaults(t, faultsFile, fmt.Sprintf("drop:%d", ids[removed]))
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
		// The removed silo may be removed before it prints its ready line.
		if err != nil && !(i == removed && strings.Contains(cl.Silos[i].Log(), removedLine)) {
			t.Fatalf("silo %d restarted with --replicas 2: %v", i, err)
		}
	}
	p := cl.Silos[removed]
	if cut {
		// The others remove it; cut off, it cannot know, and keeps running.
		waitReplicated(t, ctx, cl, 2, 60*time.Second, p.SiloID())
		if p.Exited() {
			t.Fatalf("the removed silo exited while cut off, before it could know\n%s", p.Log())
		}
		writeFaults(t, faultsFile, "")
	}

	exit := p.Wait(90 * time.Second)
	var exitErr *exec.ExitError
	if !errors.As(exit, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("the removed silo %d: %v, want exit status 1\n%s", removed, exit, cl.logs())
	}
	if !strings.Contains(p.Log(), removedLine) {
		t.Fatalf("the removed silo %d exited (%v) without saying it was removed\n%s", removed, exit, p.Log())
	}
	if cut && !strings.Contains(p.Log(), noticedLine) {
		t.Fatalf("the removed silo %d was not told by the leader\n%s", removed, p.Log())
	}
	t.Logf("silo %d removed and exited with status 1 %v after the restart (told by the leader: %v)",
		removed, time.Since(restarted).Round(time.Millisecond), strings.Contains(p.Log(), noticedLine))
	waitReplicated(t, ctx, cl, 2, 60*time.Second, p.SiloID())
	for i, q := range cl.Silos {
		if i != removed && q.Exited() {
			t.Fatalf("silo %d, still in the group, exited\n%s", i, q.Log())
		}
	}
}
