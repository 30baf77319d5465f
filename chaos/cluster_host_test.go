package chaos

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestClusterLoseAHost: four silos, three replicas per partition, a short --dead-after. One
// silo is SIGKILLed for good; every partition's group replaces it (three voters, none of them
// the dead silo); then a second silo is SIGKILLed. Nothing is lost: the schedules keep
// emitting with no gap once caught up, and the messages enqueued before either kill are still
// there.
func TestClusterLoseAHost(t *testing.T) {
	const deadAfter = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec := clusterSpec()
	spec.DeadAfter = deadAfter
	cl := startReplicated(t, ctx, 4, spec)
	c := dialSeeds(t, cl.Seeds()...)
	k := startTicks(t, ctx, c, allPartitions(clusterPartitions), 2)
	for n := range clusterPartitions {
		for range 3 {
			if err := k.enqueueKept(ctx, n); err != nil {
				t.Fatalf("enqueue on partition %d: %v", n, err)
			}
		}
	}
	waitFlowing(t, k, clusterPartitions, time.Now(), 60*time.Second)

	first, err := cl.LeaderOf(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	cl.Silos[first].Kill()
	killed := time.Now()
	waitReplicated(t, ctx, cl, 3, deadAfter+90*time.Second, cl.Silos[first].SiloID())
	t.Logf("silo %d killed for good; every partition on three other voters %v later", first, time.Since(killed).Round(time.Millisecond))

	second, err := cl.LeaderOf(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	cl.Silos[second].Kill()
	secondKilled := time.Now()
	waitFlowing(t, k, clusterPartitions, secondKilled, 60*time.Second)
	t.Logf("silo %d killed too; occurrences enqueued after it on every partition within %v", second, time.Since(secondKilled).Round(time.Millisecond))
	k.finish(t, ctx)
	k.checkKept(t, ctx)
}

// TestClusterRollingRestart: each of three silos in turn is stopped with SIGTERM and started
// again with the same flags and data directory, and waits until it has rejoined its groups,
// while a client sends commands continuously. No command fails (the client retries within
// its bound), and nothing is lost or duplicated.
func TestClusterRollingRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cl, _, k := startTicking(t, ctx, 3, clusterSpec(), 1)

	// One command every 50 ms, round robin over the partitions, each waited for.
	stopSending := make(chan struct{})
	var sent, failed int
	var firstErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		pace := time.NewTicker(50 * time.Millisecond)
		defer pace.Stop()
		for n := 0; ; n++ {
			select {
			case <-stopSending:
				return
			case <-pace.C:
			}
			if err := k.enqueue(ctx, n%clusterPartitions); err != nil {
				failed++
				if firstErr == nil {
					firstErr = err
				}
			} else {
				sent++
			}
		}
	})
	for i := range cl.Silos {
		stopping := time.Now()
		if err := cl.Silos[i].Terminate(30 * time.Second); err != nil {
			t.Errorf("silo %d on SIGTERM: %v\n%s", i, err, cl.Silos[i].Log())
			cl.Silos[i].Kill()
		}
		cl.Restart(t, i)
		waitRejoined(t, ctx, cl, i)
		waitReplicated(t, ctx, cl, 3, 90*time.Second)
		t.Logf("silo %d restarted and rejoined in %v", i, time.Since(stopping).Round(time.Millisecond))
	}
	close(stopSending)
	wg.Wait()
	if failed > 0 {
		t.Errorf("%d of %d commands failed during the rolling restart, the first: %v", failed, failed+sent, firstErr)
	}
	t.Logf("%d commands sent during the rolling restart", sent)
	k.finish(t, ctx)
}
