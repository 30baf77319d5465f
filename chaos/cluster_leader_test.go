package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/orreryhq/orrery/internal/testkit"
)

// waitFlowing waits until the worker has handled an occurrence on every one of partitions
// enqueued after since.
func waitFlowing(t *testing.T, k *ticks, partitions int, since time.Time, within time.Duration) {
	t.Helper()
	testkit.Eventually(t, within, "occurrences delivered from every partition", func() bool {
		for n := range partitions {
			if _, ok := k.log.firstEnqueueAfter(n, since); !ok {
				return false
			}
		}
		return true
	})
}

// TestClusterKillTheLeader: three silos, Every-1s schedules on every partition and a worker
// consuming them; the silo leading a busy partition is SIGKILLed and restarted on its data
// directory, several times. Each kill is followed within a bound by the next enqueue of an
// occurrence on that partition (under a new leader), the new leader's /metrics shows it leading
// and the survivors' leader-transition counters move, and at the end no occurrence id was
// enqueued twice and no schedule has a gap.
func TestClusterKillTheLeader(t *testing.T) {
	kills := 2
	if clusterFull() {
		kills = 6
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(3+2*kills)*time.Minute)
	defer cancel()
	cl, _, k := startTicking(t, ctx, 3, clusterSpec(), 3)

	var latencies []time.Duration
	for round := range kills {
		partition := (round * 3) % clusterPartitions
		leader, err := cl.LeaderOf(ctx, partition)
		if err != nil {
			t.Fatal(err)
		}
		// The partition is busy: an occurrence of it was enqueued within the last two seconds.
		testkit.Eventually(t, 30*time.Second, "partition busy before the kill", func() bool {
			_, ok := k.log.firstEnqueueAfter(partition, time.Now().Add(-2*time.Second))
			return ok
		})
		transitions := func() float64 {
			sum := 0.0
			for i, p := range cl.Silos {
				if i == leader {
					continue
				}
				v, _, err := ReadMetric(ctx, p.AdminAddress(), "orrery_partition_leader_transitions_total", map[string]string{"partition": fmt.Sprint(partition)})
				if err != nil {
					t.Fatal(err)
				}
				sum += v
			}
			return sum
		}
		before := transitions()
		cl.Silos[leader].Kill()
		killed := time.Now()
		var next time.Time
		testkit.Eventually(t, 60*time.Second, "an occurrence on the killed leader's partition enqueued after the kill", func() bool {
			var ok bool
			next, ok = k.log.firstEnqueueAfter(partition, killed)
			return ok
		})
		latencies = append(latencies, next.Sub(killed))
		newLeader, _ := cl.LeaderOf(ctx, partition)
		// The new leader's /metrics says so, and the survivors count the change.
		testkit.Eventually(t, 30*time.Second, "the leader change on the survivors' /metrics", func() bool {
			now, err := cl.LeaderOf(ctx, partition)
			if err != nil || now == leader {
				return false
			}
			leads, _, err := ReadMetric(ctx, cl.Silos[now].AdminAddress(), "orrery_partition_leader", map[string]string{"partition": fmt.Sprint(partition)})
			return err == nil && leads == 1 && transitions() > before
		})
		t.Logf("kill %d: silo %d led partition %d; next enqueue there %v after the kill (now led by silo %d)",
			round+1, leader, partition, next.Sub(killed).Round(time.Millisecond), newLeader)
		cl.Restart(t, leader)
		waitRejoined(t, ctx, cl, leader)
		waitReplicated(t, ctx, cl, 3, 90*time.Second)
	}
	k.finish(t, ctx)
	requireConsistent(t, ctx, cl) // nothing the faults did left two replicas apart
	median, maximum := medianMax(latencies)
	t.Logf("%d kills of a partition's leader: kill → next enqueue on it median %v, max %v", kills, median.Round(time.Millisecond), maximum.Round(time.Millisecond))
}

// TestClusterPauseTheLeader: the silo leading a partition is SIGSTOPped for 20 s (30 s with
// ORRERY_CLUSTER_FULL=1): beyond failure detection, short of --dead-after. Well within the
// pause the other silos elect a new leader and a command to the partition succeeds through the
// client; after SIGCONT the paused silo stays up, no other silo exits, and within 10 s it
// serves again without a restart (Cluster.WaitServes: /readyz, listed alive by the others,
// rejoined as a follower and caught up); no occurrence was enqueued twice (nor any schedule
// left with a gap).
func TestClusterPauseTheLeader(t *testing.T) {
	pause := 20 * time.Second
	if clusterFull() {
		pause = 30 * time.Second
	}
	const servedWithin = 10 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, _, k := startTicking(t, ctx, 3, clusterSpec(), 2)

	const partition = 0
	leader, err := cl.LeaderOf(ctx, partition)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Silos[leader].Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	t.Cleanup(func() { _ = cl.Silos[leader].Resume() })
	if err := k.enqueue(ctx, partition); err != nil {
		t.Fatalf("a command to partition %d while its leader (silo %d) is paused: %v\n%s", partition, leader, err, cl.logs())
	}
	answered := time.Since(paused)
	newLeader, err := cl.LeaderOf(ctx, partition)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("silo %d paused; partition %d served again %v later, led by silo %d", leader, partition, answered.Round(time.Millisecond), newLeader)
	if answered > servedWithin {
		t.Errorf("partition %d answered %v after its leader was paused, more than %v", partition, answered, servedWithin)
	}
	sincePause := func() string {
		return fmt.Sprintf("%v after silo %d was paused", time.Since(paused).Round(time.Millisecond), leader)
	}
	for time.Since(paused) < pause { // the deliberate pause
		requireUp(t, cl, sincePause)
		time.Sleep(min(250*time.Millisecond, time.Until(paused.Add(pause))))
	}
	if err := cl.Silos[leader].Resume(); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	// Resumed after a pause shorter than --dead-after, the silo stays up and serves again.
	served := awaitServes(t, ctx, cl, leader, servedWithin, resumed, fmt.Sprintf("SIGCONT (paused %v)", resumed.Sub(paused).Round(time.Millisecond)))
	t.Logf("silo %d resumed after %v; served again %v later without a restart (ready %v, listed alive by the others %v, rejoined and caught up %v)",
		leader, resumed.Sub(paused).Round(time.Millisecond), served.All().Round(time.Millisecond), served.Ready.Round(time.Millisecond),
		served.Listed.Round(time.Millisecond), served.Rejoined.Round(time.Millisecond))
	k.finish(t, ctx)
	requireConsistent(t, ctx, cl) // nothing the faults did left two replicas apart
	requireUp(t, cl, func() string {
		return fmt.Sprintf("by the end of the test, %v after SIGCONT", time.Since(resumed).Round(time.Millisecond))
	})
}
