package chaos

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/orreryhq/orrery/client"
)

// The TestCluster tests run clusters of real silo processes, each silo with its own data
// directory, every partition a Raft group replicated over several of them. By default they
// run short versions; ORRERY_CLUSTER_FULL=1 (make cluster-test) runs them at full length.

// clusterPartitions is the cluster tests' partition count: a few partitions per silo, so that
// leaders can be balanced and a kill hits several groups, without the startup of 32 groups
// times 3 replicas on a small machine.
const clusterPartitions = 8

// clusterSpec is the silo spec the cluster tests start from: three replicas per partition.
func clusterSpec() SiloSpec { return SiloSpec{Partitions: clusterPartitions, Replicas: 3} }

// startReplicated starts n silos from base with StartCluster and waits until every partition
// has base.Replicas voters, a leader and no learners.
func startReplicated(t *testing.T, ctx context.Context, n int, base SiloSpec) *Cluster {
	t.Helper()
	cl := StartCluster(t, n, base)
	for i, p := range cl.Silos {
		t.Logf("silo %d: id %s, pid %d, data %s", i, p.SiloID(), p.PID(), p.Spec.DataDir)
	}
	waitReplicated(t, ctx, cl, base.Replicas, 90*time.Second)
	return cl
}

// startTicking starts n silos from base as startReplicated does, dials a client through
// their seeds, starts perPartition Every-1s schedules on every partition with a worker
// (startTicks), and waits until occurrences flow from every partition.
func startTicking(t *testing.T, ctx context.Context, n int, base SiloSpec, perPartition int) (*Cluster, *client.Client, *ticks) {
	t.Helper()
	cl := startReplicated(t, ctx, n, base)
	c := dialSeeds(t, cl.Seeds()...)
	k := startTicks(t, ctx, c, allPartitions(clusterPartitions), perPartition)
	waitFlowing(t, k, clusterPartitions, time.Now(), 60*time.Second)
	return cl, c, k
}

// waitReplicated fails the test unless every partition reaches voters voters (none of
// exclude) within bound.
func waitReplicated(t *testing.T, ctx context.Context, cl *Cluster, voters int, bound time.Duration, exclude ...string) {
	t.Helper()
	waitCtx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if err := cl.WaitReplicated(waitCtx, cl.Specs[0].Partitions, voters, exclude...); err != nil {
		t.Fatalf("replication: %v\n%s", err, cl.logs())
	}
}

// waitRejoined fails the test unless silo i has rejoined its groups within 90 s.
func waitRejoined(t *testing.T, ctx context.Context, cl *Cluster, i int) {
	t.Helper()
	waitCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := cl.WaitRejoined(waitCtx, i, cl.Specs[0].Partitions); err != nil {
		t.Fatalf("silo %d rejoining: %v\n%s", i, err, cl.logs())
	}
}

// medianMax is the median and the maximum of ds.
func medianMax(ds []time.Duration) (median, maximum time.Duration) {
	sorted := slices.Clone(ds)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	return sorted[len(sorted)/2], sorted[len(sorted)-1]
}

// TestClusterFormation: three silos started at the same instant with identical flags and empty
// data directories form one cluster: one cluster id in their ready lines, and every partition
// replicated on all three.
func TestClusterFormation(t *testing.T) {
	rounds := 2
	if clusterFull() {
		rounds = 10
	}
	var formed []time.Duration
	for round := range rounds {
		t.Run(fmt.Sprintf("round-%d", round), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			started := time.Now()
			cl := StartCluster(t, 3, clusterSpec())
			ready := time.Since(started)
			ids := map[string][]int{}
			for i, p := range cl.Silos {
				ids[p.ClusterID()] = append(ids[p.ClusterID()], i)
			}
			if len(ids) != 1 {
				t.Fatalf("the silos formed %d clusters (cluster id → silos): %v", len(ids), ids)
			}
			for id := range ids {
				if id == "" || id == "0000000000000000" {
					t.Fatalf("the ready lines name no cluster id: %q", cl.Silos[0].readyLine)
				}
			}
			waitReplicated(t, ctx, cl, 3, 90*time.Second)
			formed = append(formed, time.Since(started))
			t.Logf("ready after %v, every partition on three voters after %v", ready.Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
		})
	}
	if len(formed) == rounds {
		median, maximum := medianMax(formed)
		t.Logf("%d rounds formed one cluster; start → replicated median %v, max %v", rounds, median.Round(time.Millisecond), maximum.Round(time.Millisecond))
	}
}

// TestClusterLeadersAreBalanced: once every partition is replicated on three silos, the
// counts of partitions each silo leads differ by at most one (polled: balancing takes a few
// leader transfers).
func TestClusterLeadersAreBalanced(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := startReplicated(t, ctx, 3, clusterSpec())
	counts := make([]int, len(cl.Silos))
	started := time.Now()
	balanced := func() bool {
		leaders := cl.Leaders(ctx)
		clear(counts)
		for _, i := range leaders {
			counts[i]++
		}
		return len(leaders) == clusterPartitions && slices.Max(counts)-slices.Min(counts) <= 1
	}
	deadline := time.Now().Add(60 * time.Second)
	for !balanced() {
		if time.Now().After(deadline) {
			t.Fatalf("leaders per silo %v (of %d partitions) after 60 s: not balanced", counts, clusterPartitions)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("leaders per silo %v, balanced %v after replication", counts, time.Since(started).Round(time.Millisecond))
}

// TestClusterClientSurvivesTheSiloItDialed: a client dialed with one silo's gossip address as
// its only seed (a silo leading partition 0) keeps working, on every partition, after that
// silo is killed.
func TestClusterClientSurvivesTheSiloItDialed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := startReplicated(t, ctx, 3, clusterSpec())
	dialed, err := cl.LeaderOf(ctx, 0) // a silo that leads at least one partition
	if err != nil {
		t.Fatal(err)
	}
	c := dialSeeds(t, cl.Silos[dialed].GossipAddress())
	k := &ticks{c: c, namespace: "survive", queue: "q", enqueued: map[string]string{}, kept: map[string]string{}}
	for n := range clusterPartitions {
		if err := k.enqueueKept(ctx, n); err != nil {
			t.Fatalf("enqueue on partition %d before the kill: %v", n, err)
		}
	}
	led := 0
	for _, i := range cl.Leaders(ctx) {
		if i == dialed {
			led++
		}
	}
	cl.Silos[dialed].Kill()
	killed := time.Now()
	for n := range clusterPartitions {
		if err := k.enqueueKept(ctx, n); err != nil {
			t.Fatalf("enqueue on partition %d %v after the dialed silo was killed: %v\n%s", n, time.Since(killed).Round(time.Millisecond), err, cl.logs())
		}
	}
	t.Logf("the dialed silo led %d partitions; a command on each partition answered within %v of its kill", led, time.Since(killed).Round(time.Millisecond))
	k.checkKept(t, ctx)
}
