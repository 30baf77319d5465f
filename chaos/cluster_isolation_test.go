package chaos

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery/internal/testkit"
)

// requireUp fails the test, naming every silo of cl whose process has exited with its exit
// status and errors, and with every silo's log, if any has; when says when, for the message.
func requireUp(t *testing.T, cl *Cluster, when func() string) {
	t.Helper()
	var exited []string
	for i, p := range cl.Silos {
		if p.Exited() {
			exited = append(exited, fmt.Sprintf("silo %d (%s, pid %d): %v; its errors:\n%s",
				i, p.SiloID(), p.PID(), p.Wait(time.Second), errorLines(p.Log(), 8)))
		}
	}
	if len(exited) > 0 {
		t.Fatalf("%d of %d silos exited %s; a silo must stay up through a cut or pause shorter than --dead-after:\n%s\n%s",
			len(exited), len(cl.Silos), when(), strings.Join(exited, "\n"), cl.logs())
	}
}

// errorLines is the last max lines of log at level ERROR, indented.
func errorLines(log string, max int) string {
	var lines []string
	for line := range strings.Lines(log) {
		if strings.Contains(line, "level=ERROR") {
			lines = append(lines, "    "+strings.TrimRight(line, "\n"))
		}
	}
	return strings.Join(lines[len(lines)-min(max, len(lines)):], "\n")
}

// awaitServes waits up to 90 s for silo i of cl to serve again (Cluster.WaitServes), failing
// the test at once if a silo's process exits meanwhile; it calls t.Errorf when the silo took
// longer than within. since is the event the figures count from (a heal, a SIGCONT), what
// names it.
func awaitServes(t *testing.T, ctx context.Context, cl *Cluster, i int, within time.Duration, since time.Time, what string) Served {
	t.Helper()
	waitCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	type result struct {
		served Served
		err    error
	}
	done := make(chan result, 1)
	started := time.Now()
	marks := cl.logMarks()
	go func() {
		served, err := cl.WaitServes(waitCtx, i, cl.Specs[0].Partitions)
		done <- result{served, err}
	}()
	for {
		select {
		case r := <-done:
			lag := started.Sub(since)
			r.served.Ready += lag
			r.served.Listed += lag
			r.served.Rejoined += lag
			if r.err != nil {
				t.Fatalf("silo %d, %v after %s: %v\n%s", i, time.Since(since).Round(time.Millisecond), what, r.err, cl.logs())
			}
			if r.served.All() > within {
				t.Errorf("silo %d served again %v after %s (ready %v, listed alive %v, rejoined %v), more than %v; the silos logged meanwhile:\n%s",
					i, r.served.All().Round(time.Millisecond), what, r.served.Ready.Round(time.Millisecond),
					r.served.Listed.Round(time.Millisecond), r.served.Rejoined.Round(time.Millisecond), within, cl.logsSince(marks))
			}
			return r.served
		case <-time.After(100 * time.Millisecond):
			requireUp(t, cl, func() string { return fmt.Sprintf("%v after %s", time.Since(since).Round(time.Millisecond), what) })
		}
	}
}

// TestClusterIsolatedSiloRejoins: three Isolatable silos; Every-1s schedules run on every
// partition with a worker. One silo at a time, rotating, is isolated at the network level
// (SiloProcess.Isolate: its actor, gossip and admin traffic dropped both ways, loopback
// included) for 12 s, well beyond failure detection and well short of --dead-after, then
// healed; 2 rounds, 10 with ORRERY_CLUSTER_FULL=1. In each round:
//   - no silo process exits, from the cut until the cluster is whole again;
//   - during the cut, every partition whose leader was one of the other two silos at the cut
//     answers an enqueue, sent through a client that dialed only those two, before the heal;
//   - within 10 s of the heal the isolated silo serves again, without a restart
//     (Cluster.WaitServes): its /readyz answers 200, both others list it alive, and it has
//     rejoined every group that counts it and caught up.
//
// At the end no occurrence was enqueued twice, no schedule has a gap, and every message the
// test enqueued was delivered.
func TestClusterIsolatedSiloRejoins(t *testing.T) {
	const isolateFor = 12 * time.Second
	const servedWithin = 10 * time.Second
	rounds := 2
	if clusterFull() {
		rounds = 10
	}
	RequireNetcut(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(3+2*rounds)*time.Minute)
	defer cancel()
	spec := clusterSpec()
	spec.Isolatable = true
	spec.LogLevel = "info" // membership's changes of state, for a heal that takes too long
	cl, _, k := startTicking(t, ctx, 3, spec, 2)

	var toServe []time.Duration
	for round := range rounds {
		isolated := round % len(cl.Silos)
		var majority []int
		var seeds []string
		for i, p := range cl.Silos {
			if i != isolated {
				majority = append(majority, i)
				seeds = append(seeds, p.GossipAddress())
			}
		}
		var leaders map[int]int
		testkit.Eventually(t, 60*time.Second, "every partition led", func() bool {
			leaders = cl.Leaders(ctx)
			return len(leaders) == clusterPartitions
		})
		var majorityLed, isolatedLed []int
		for n := range clusterPartitions {
			if leaders[n] == isolated {
				isolatedLed = append(isolatedLed, n)
			} else {
				majorityLed = append(majorityLed, n)
			}
		}
		// A client that knows only the majority (its seeds), dialed before the cut.
		pinned := dialSeeds(t, seeds...)
		viaMajority := &ticks{c: pinned, namespace: k.namespace, queue: k.queue, enqueued: map[string]string{}}

		if err := cl.Silos[isolated].Isolate(); err != nil {
			t.Fatal(err)
		}
		cutAt := time.Now()
		healBy := cutAt.Add(isolateFor)
		sinceCut := func() string {
			return fmt.Sprintf("in round %d, %v after silo %d was isolated", round+1, time.Since(cutAt).Round(time.Millisecond), isolated)
		}

		// Every partition the majority led at the cut answers through the majority's client,
		// before the heal.
		type answer struct {
			partition int
			took      time.Duration
			err       error
		}
		answers := make(chan answer, len(majorityLed))
		callCtx, cancelCalls := context.WithDeadline(ctx, healBy)
		for _, n := range majorityLed {
			go func() {
				sent := time.Now()
				err := viaMajority.enqueue(callCtx, n)
				answers <- answer{n, time.Since(sent), err}
			}()
		}
		var answered []answer
		var reLed time.Duration // until the majority led every partition the isolated silo led
		for time.Now().Before(healBy) {
			requireUp(t, cl, sinceCut)
		collect:
			for {
				select {
				case a := <-answers:
					answered = append(answered, a)
				default:
					break collect
				}
			}
			if reLed == 0 && len(isolatedLed) > 0 {
				now := cl.Leaders(ctx) // the isolated silo is left out
				if !slices.ContainsFunc(isolatedLed, func(n int) bool { _, ok := now[n]; return !ok }) {
					reLed = time.Since(cutAt)
				}
			}
			time.Sleep(min(250*time.Millisecond, time.Until(healBy)))
		}
		cancelCalls()
		for len(answered) < len(majorityLed) {
			answered = append(answered, <-answers)
		}
		requireUp(t, cl, sinceCut)
		sort.Slice(answered, func(a, b int) bool { return answered[a].partition < answered[b].partition })
		var failed []string
		var slowest time.Duration
		for _, a := range answered {
			if a.err != nil {
				failed = append(failed, fmt.Sprintf("partition %d (led by silo %d at the cut): %v after %v", a.partition, leaders[a.partition], a.err, a.took.Round(time.Millisecond)))
			} else {
				slowest = max(slowest, a.took)
			}
		}
		reLedText := "not within the cut"
		if len(isolatedLed) == 0 {
			reLedText = "(none to lead)"
		} else if reLed > 0 {
			reLedText = fmt.Sprintf("after %v", reLed.Round(time.Millisecond))
		}
		t.Logf("round %d: silo %d (led partitions %v) isolated for %v; the majority's %d partitions answered through its client, slowest %v, %d did not; "+
			"the majority led the isolated silo's partitions %s; every silo up",
			round+1, isolated, isolatedLed, time.Since(cutAt).Round(time.Millisecond), len(majorityLed)-len(failed), slowest.Round(time.Millisecond), len(failed), reLedText)

		if err := cl.Silos[isolated].Heal(); err != nil {
			t.Fatal(err)
		}
		healAt := time.Now()
		served := awaitServes(t, ctx, cl, isolated, servedWithin, healAt, fmt.Sprintf("the heal of round %d (silo %d isolated %v)", round+1, isolated, healAt.Sub(cutAt).Round(time.Millisecond)))
		toServe = append(toServe, served.All())
		t.Logf("round %d: healed, silo %d served again %v later (ready %v, listed alive by both others %v, rejoined and caught up %v)",
			round+1, isolated, served.All().Round(time.Millisecond), served.Ready.Round(time.Millisecond),
			served.Listed.Round(time.Millisecond), served.Rejoined.Round(time.Millisecond))
		if len(failed) > 0 {
			t.Errorf("round %d: while silo %d was isolated, %d partitions led by the majority did not answer through a client of the majority:\n  %s",
				round+1, isolated, len(failed), strings.Join(failed, "\n  "))
		}
		for id, key := range viaMajority.enqueued {
			k.enqueued[id] = key
		}
		_ = pinned.Close()
		waitReplicated(t, ctx, cl, 3, 90*time.Second)
		requireUp(t, cl, func() string { return fmt.Sprintf("in round %d, once every group was whole again", round+1) })
	}
	k.finish(t, ctx)
	requireConsistent(t, ctx, cl) // nothing the faults did left two replicas apart
	requireUp(t, cl, func() string { return "by the end of the test" })
	median, maximum := medianMax(toServe)
	t.Logf("%d rounds of a silo isolated for %v: heal → serving again median %v, max %v", rounds, isolateFor, median.Round(time.Millisecond), maximum.Round(time.Millisecond))
}
