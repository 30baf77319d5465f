package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/cluster/raftnet"
	"github.com/orreryhq/orrery/internal/testkit"
)

// faultsSetLine is what a silo logs each time its faults file changed its transport faults.
const faultsSetLine = "raft transport faults set"

// writeFaults replaces the faults file at path with spec in one rename (a silo polling it
// reads the old content or the new, never half of it).
func writeFaults(t *testing.T, path, spec string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// waitFaultsApplied waits until every silo of cl has logged its changes'th faults change.
func waitFaultsApplied(t *testing.T, cl *Cluster, changes int) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("every silo to apply faults change %d", changes), func() bool {
		for _, p := range cl.Silos {
			if strings.Count(p.Log(), faultsSetLine) < changes {
				return false
			}
		}
		return true
	})
}

// replicaID is the Raft replica id of a silo id (16 hex digits): what a faults spec names.
func replicaID(t *testing.T, siloID string) uint64 {
	t.Helper()
	id, err := strconv.ParseUint(siloID, 16, 64)
	if err != nil {
		t.Fatalf("silo id %q: %v", siloID, err)
	}
	return id
}

// TestClusterNetworkPartition: three silos follow one faults file
// (ORRERY_RAFTNET_FAULTS_FILE); Every-1s schedules run on every partition with a worker. The
// silo leading the most partitions is cut off from the other two (its own replica id dropped
// on every silo, both ways) for 10 s, then healed; 3 rounds with ORRERY_CLUSTER_FULL=1. While
// cut:
//   - the minority stops leading every partition (CheckQuorum) within the election bound, and
//     its admin table shows it leading none for the rest of the cut;
//   - its replicas' commit indices do not move: it commits nothing, so it acknowledges no
//     write and confirms no linearizable read (a ReadIndex needs a quorum's heartbeat answers,
//     which it cannot get);
//   - enqueues sent through a client that dialed only the minority silo, on the partitions it
//     led, succeed: the majority's new leaders serve them;
//   - occurrences keep being enqueued on every partition.
//
// After the heal the minority rejoins and catches up, and at the end every occurrence id was
// enqueued once, no schedule has a gap, and every message the test enqueued was delivered.
func TestClusterNetworkPartition(t *testing.T) {
	const cutFor = 10 * time.Second
	rounds := 1
	if clusterFull() {
		rounds = 3
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(3+2*rounds)*time.Minute)
	defer cancel()
	faultsFile := filepath.Join(t.TempDir(), "raftnet-faults")
	spec := clusterSpec()
	spec.Env = append(spec.Env, raftnet.FaultsFileEnv+"="+faultsFile)
	cl, _, k := startTicking(t, ctx, 3, spec, 2)

	changes := 0
	for round := range rounds {
		// The minority: the silo leading the most partitions.
		var led []int
		minority := -1
		testkit.Eventually(t, 60*time.Second, "every partition led", func() bool {
			leaders := cl.Leaders(ctx)
			if len(leaders) < clusterPartitions {
				return false
			}
			counts := map[int][]int{}
			for n, i := range leaders {
				counts[i] = append(counts[i], n)
			}
			minority, led = -1, nil
			for i, ns := range counts {
				if len(ns) > len(led) {
					minority, led = i, ns
				}
			}
			return true
		})
		m := cl.Silos[minority]
		// A client that knows only the minority silo (its one seed), dialed before the cut.
		pinned := dialSeeds(t, m.GossipAddress())
		viaMinority := &ticks{c: pinned, namespace: k.namespace, queue: k.queue, enqueued: map[string]string{}}

		writeFaults(t, faultsFile, fmt.Sprintf("drop:%d", replicaID(t, m.SiloID())))
		changes++
		cutAt := time.Now()
		waitFaultsApplied(t, cl, changes)
		armed := time.Since(cutAt)

		// From here the minority can learn of no commit: its commit indices are frozen.
		frozen := map[int]uint64{}
		table, err := ReadPartitions(ctx, m.AdminAddress())
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range table.Partitions {
			if row.Replica != nil {
				frozen[row.Partition] = uint64(row.Replica.CommitIndex)
			}
		}
		checkMinority := func(requireFollower bool) {
			t.Helper()
			table, err := ReadPartitions(ctx, m.AdminAddress())
			if err != nil {
				t.Fatalf("the minority silo's partition table: %v", err)
			}
			for _, row := range table.Partitions {
				r := row.Replica
				if r == nil {
					continue
				}
				if uint64(r.CommitIndex) != frozen[row.Partition] || uint64(r.AppliedIndex) > frozen[row.Partition] {
					t.Fatalf("round %d: cut-off silo %d's replica of partition %d moved to commit %d, applied %d (commit %d at the cut)",
						round+1, minority, row.Partition, r.CommitIndex, r.AppliedIndex, frozen[row.Partition])
				}
				if requireFollower && r.Leads {
					t.Fatalf("round %d: cut-off silo %d still leads partition %d (term %d) after it stepped down",
						round+1, minority, row.Partition, r.Term)
				}
			}
		}

		// The minority steps down everywhere within its election bound.
		testkit.Eventually(t, 10*time.Second, "the cut-off silo to lead nothing", func() bool {
			table, err := ReadPartitions(ctx, m.AdminAddress())
			if err != nil {
				return false
			}
			for _, row := range table.Partitions {
				if row.Replica != nil && row.Replica.Leads {
					return false
				}
			}
			return true
		})
		steppedDown := time.Since(cutAt)
		checkMinority(true)

		// The majority leads every partition the minority led.
		testkit.Eventually(t, 30*time.Second, "the majority to lead the cut-off silo's partitions", func() bool {
			leaders := cl.Leaders(ctx)
			for _, n := range led {
				if i, ok := leaders[n]; !ok || i == minority {
					return false
				}
			}
			return true
		})
		reElected := time.Since(cutAt)

		// Writes through the client that dialed the minority are served by the majority.
		var slowest time.Duration
		for _, n := range led {
			sent := time.Now()
			if err := viaMinority.enqueue(ctx, n); err != nil {
				t.Fatalf("round %d: enqueue on partition %d through the client of cut-off silo %d: %v\n%s", round+1, n, minority, err, cl.logs())
			}
			slowest = max(slowest, time.Since(sent))
		}
		checkMinority(true)

		// Occurrences keep coming on every partition, and the minority stays fenced, until the
		// cut has lasted cutFor.
		waitFlowing(t, k, clusterPartitions, cutAt.Add(steppedDown), 30*time.Second)
		for time.Since(cutAt) < cutFor {
			checkMinority(true)
			time.Sleep(250 * time.Millisecond) // the polling interval of the check
		}
		checkMinority(true)
		during := 0
		healAt := time.Now()
		for _, d := range k.log.snapshot() {
			if d.origin == client.OriginOccurrence && d.enqueuedAt.After(cutAt) && d.enqueuedAt.Before(healAt) && d.count == 1 {
				during++
			}
		}

		writeFaults(t, faultsFile, "")
		changes++
		waitFaultsApplied(t, cl, changes)
		waitRejoined(t, ctx, cl, minority)
		rejoined := time.Since(healAt)
		for id, key := range viaMinority.enqueued {
			k.enqueued[id] = key
		}
		t.Logf("round %d: silo %d (led partitions %v) cut off for %v: faults armed on all silos after %v, it led nothing after %v, "+
			"the majority led its partitions after %v; %d enqueues through its client, slowest %v; %d occurrences enqueued during the cut; "+
			"healed, it rejoined and caught up %v later",
			round+1, minority, led, healAt.Sub(cutAt).Round(time.Millisecond), armed.Round(time.Millisecond),
			steppedDown.Round(time.Millisecond), reElected.Round(time.Millisecond), len(led), slowest.Round(time.Millisecond),
			during, rejoined.Round(time.Millisecond))
		waitReplicated(t, ctx, cl, 3, 90*time.Second)
	}
	k.finish(t, ctx)
}
