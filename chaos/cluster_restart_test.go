package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orreryhq/orrery/client"
)

// chaosSeedEnv fixes the seed of a test's random choices (a decimal uint64); unset, each run
// draws one and logs it with the command that replays it.
const chaosSeedEnv = "ORRERY_CHAOS_SEED"

// chaosSeed is the seed of the test's random choices: chaosSeedEnv when set, a fresh one
// otherwise. It is logged with the command that replays the run.
func chaosSeed(t *testing.T) uint64 {
	t.Helper()
	seed := rand.Uint64()
	if s := os.Getenv(chaosSeedEnv); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", chaosSeedEnv, s, err)
		}
	}
	t.Logf("seed %d; to replay: %s=%d go test ./chaos -run '^%s$' -v -count=1", seed, chaosSeedEnv, seed, t.Name())
	return seed
}

// httpAnswer is the status code and body of GET url.
func httpAnswer(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body)), err
}

// aloneSeen is what watchAlone saw of a silo started while every other silo was down.
type aloneSeen struct {
	polls     int
	notReady  int    // /readyz answered 503 saying the silo joins its cluster
	reason    string // the last such answer
	firstSeen time.Duration
}

// adminGrace is how long after its launch a silo's admin endpoint may not answer yet (the
// process starts and opens its store first).
const adminGrace = 3 * time.Second

// watchAlone polls silo i of cl, started at started while every other silo is down, until
// until: its process must stay up (a silo whose data dir records its cluster waits for its
// peers without bound, whatever --open-timeout says), it must not print its ready line, its
// /healthz must answer 200 and its /readyz 503 saying it joins its cluster (each after
// adminGrace). An exit fails the test at once; a wrong answer is an error.
func watchAlone(t *testing.T, ctx context.Context, cl *Cluster, i int, started, until time.Time) aloneSeen {
	t.Helper()
	p := cl.Silos[i]
	var seen aloneSeen
	var wrong []string
	for time.Now().Before(until) {
		since := time.Since(started).Round(time.Millisecond)
		if p.Exited() {
			t.Fatalf("silo %d, started alone while both others were down, exited %v after its start (%v); it must wait for its peers "+
				"however long, --open-timeout %s notwithstanding:\n%s\n%s", i, since, p.Wait(time.Second), openTimeoutOf(cl.Specs[i]),
				errorLines(p.Log(), 8), p.Log())
		}
		if p.PrintedReady() {
			t.Errorf("silo %d printed its ready line %v after its start, alone: %s", i, since, p.readyLine)
		}
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		readyStatus, readyBody, readyErr := httpAnswer(callCtx, "http://"+p.AdminAddress()+"/readyz")
		healthStatus, healthBody, healthErr := httpAnswer(callCtx, "http://"+p.AdminAddress()+"/healthz")
		cancel()
		seen.polls++
		if readyErr == nil && readyStatus == http.StatusServiceUnavailable && strings.Contains(readyBody, "joining cluster") {
			if seen.notReady == 0 {
				seen.firstSeen = time.Since(started)
			}
			seen.notReady++
			seen.reason = readyBody
		} else if since > adminGrace {
			wrong = append(wrong, fmt.Sprintf("%v: /readyz %d %q (%v)", since, readyStatus, readyBody, readyErr))
		}
		if (healthErr != nil || healthStatus != http.StatusOK) && since > adminGrace {
			wrong = append(wrong, fmt.Sprintf("%v: /healthz %d %q (%v)", since, healthStatus, healthBody, healthErr))
		}
		time.Sleep(min(250*time.Millisecond, time.Until(until)))
	}
	if len(wrong) > 0 {
		t.Errorf("silo %d, alone, answered %d of %d polls wrong (want /readyz 503 \"joining cluster ...\" and /healthz 200), the first: %s",
			i, len(wrong), seen.polls, strings.Join(wrong[:min(5, len(wrong))], "; "))
	}
	if seen.notReady == 0 {
		t.Errorf("silo %d, alone for %v, never answered /readyz 503 \"joining cluster ...\"", i, time.Since(started).Round(time.Millisecond))
	}
	return seen
}

// openTimeoutOf is the --open-timeout in spec's flags, "the default" when none.
func openTimeoutOf(spec *SiloSpec) string {
	for k, arg := range spec.Args {
		if arg == "--open-timeout" && k+1 < len(spec.Args) {
			return spec.Args[k+1]
		}
	}
	return "the default"
}

// dialPinned dials a client whose seeds are the gossip addresses of cl's silos indices, told the
// partition count and the default limits so that dialing needs no partition to answer; each
// attempt may take up to 3 s, and Dial is tried again until ctx ends. The client is closed when
// the test ends.
func dialPinned(t *testing.T, ctx context.Context, cl *Cluster, indices ...int) *client.Client {
	t.Helper()
	var seeds []string
	for _, i := range indices {
		seeds = append(seeds, cl.Silos[i].GossipAddress())
	}
	limits := client.DefaultLimits()
	for {
		c, err := client.Dial(ctx, client.DialConfig{Seeds: seeds, Partitions: cl.Specs[0].Partitions, JoinTimeout: 3 * time.Second,
			Options: client.Options{Logger: quiet, Limits: &limits}})
		if err == nil {
			t.Cleanup(func() { _ = c.Close() })
			return c
		}
		if ctx.Err() != nil {
			t.Fatalf("dial %v: %v", seeds, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// partitionAnswers is when each partition first answered an enqueue through a client, counted
// from a start; a partition that did not answer has its error.
type partitionAnswers struct {
	mu       sync.Mutex
	answered map[int]time.Duration
	failed   map[int]error
}

// enqueueOnEvery sends one enqueue to every partition of k's cluster through k's client at
// once, each retried by the client until ctx ends, and records when each answered, counted from
// since. It returns at once; done is closed when every call has returned.
func enqueueOnEvery(ctx context.Context, k *ticks, partitions int, since time.Time) (*partitionAnswers, <-chan struct{}) {
	answers := &partitionAnswers{answered: map[int]time.Duration{}, failed: map[int]error{}}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for n := range partitions {
		wg.Go(func() {
			err := k.enqueue(ctx, n)
			answers.mu.Lock()
			defer answers.mu.Unlock()
			if err != nil {
				answers.failed[n] = err
			} else {
				answers.answered[n] = time.Since(since)
			}
		})
	}
	go func() { wg.Wait(); close(done) }()
	return answers, done
}

// all reports whether every one of partitions answered, and then the latest answer.
func (a *partitionAnswers) all(partitions int) (time.Duration, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var latest time.Duration
	for n := range partitions {
		took, ok := a.answered[n]
		if !ok {
			return 0, false
		}
		latest = max(latest, took)
	}
	return latest, true
}

// missing lists the partitions that have not answered, with the error of those whose call
// ended.
func (a *partitionAnswers) missing(partitions int) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for n := range partitions {
		if _, ok := a.answered[n]; ok {
			continue
		}
		if err, ok := a.failed[n]; ok {
			out = append(out, fmt.Sprintf("partition %d: %v", n, err))
		} else {
			out = append(out, fmt.Sprintf("partition %d: no answer yet", n))
		}
	}
	return strings.Join(out, "; ")
}

// requireStarted fails the test, with every silo's log, if the process of any of cl's silos
// indices has exited; when says when, for the message.
func requireStarted(t *testing.T, cl *Cluster, indices []int, when func() string) {
	t.Helper()
	for _, i := range indices {
		if p := cl.Silos[i]; p.Exited() {
			t.Fatalf("silo %d (pid %d) exited %s: %v; its errors:\n%s\n%s", i, p.PID(), when(), p.Wait(time.Second), errorLines(p.Log(), 8), cl.logs())
		}
	}
}

// TestClusterFullStopThenOneAtATime: three silos with Every-1s schedules on every partition
// and a worker. Every silo is stopped at once, with SIGTERM in the first round and SIGKILL in
// the second (ORRERY_CLUSTER_FULL=1; the short form runs one round, SIGTERM or SIGKILL drawn
// from the seed), and the three are started again one at a time in a random order (seeded,
// ORRERY_CHAOS_SEED replays it), 8 s apart (20 s with ORRERY_CLUSTER_FULL=1), each with
// --open-timeout 5s, shorter than the spacing. In each round:
//   - the first silo started, alone, stays up (it must not give up after --open-timeout: its
//     data dir records its cluster), prints no ready line, and answers /healthz 200 and
//     /readyz 503 "joining cluster ...";
//   - within 10 s of the second start, every partition answers an enqueue through a client
//     that dialed only the two started silos (the third is started no sooner than that, or
//     than the spacing);
//   - after the third start every silo prints its ready line, every partition is led with three
//     voters and no learners again, and the third serves (Cluster.WaitServes).
//
// At the end every schedule caught up and no occurrence was enqueued twice, no schedule has a
// gap, and every message the test enqueued was delivered.
func TestClusterFullStopThenOneAtATime(t *testing.T) {
	spacing := 8 * time.Second
	if clusterFull() {
		spacing = 20 * time.Second
	}
	const openTimeout = 5 * time.Second
	const servedWithin = 10 * time.Second
	rng := rand.New(rand.NewPCG(chaosSeed(t), 0))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cl := startReplicated(t, ctx, 3, clusterSpec())
	// Restarted, each silo is given a --open-timeout shorter than the spacing: a lone silo that
	// gave up after it would exit before the next start.
	for _, spec := range cl.Specs {
		spec.Args = append(spec.Args, "--open-timeout", openTimeout.String())
	}
	c := dialSeeds(t, cl.Seeds()...)
	k := startTicks(t, ctx, c, allPartitions(clusterPartitions), 2)
	waitFlowing(t, k, clusterPartitions, time.Now(), 60*time.Second)

	signals := []string{"SIGTERM", "SIGKILL"}
	if !clusterFull() {
		signals = signals[rng.IntN(len(signals)):][:1]
		t.Logf("the short form's one round stops every silo with %s (drawn from the seed)", signals[0])
	}
	for round, signal := range signals {
		// Every silo stopped at once.
		exits := make([]time.Duration, len(cl.Silos))
		exitErrs := make([]error, len(cl.Silos))
		stopping := time.Now()
		var wg sync.WaitGroup
		for i, p := range cl.Silos {
			wg.Go(func() {
				if signal == "SIGKILL" {
					p.Kill()
				} else {
					exitErrs[i] = p.Terminate(30 * time.Second)
				}
				exits[i] = time.Since(stopping)
			})
		}
		wg.Wait()
		for i, err := range exitErrs {
			if err != nil && !cl.Silos[i].Exited() {
				t.Errorf("round %d: silo %d did not exit within 30 s of SIGTERM: %v", round+1, i, err)
				cl.Silos[i].Kill()
			}
		}
		statuses := ""
		if signal == "SIGTERM" {
			statuses = fmt.Sprintf(", exit errors %v", exitErrs)
			for i, took := range exits {
				if took > 5*time.Second { // what a slow graceful shutdown logged
					t.Logf("round %d: silo %d took %v to exit on SIGTERM; the tail of its log:\n%s", round+1, i, took.Round(time.Millisecond), logTail(cl.Silos[i].Log(), 20))
				}
			}
		}
		order := rng.Perm(len(cl.Silos))
		t.Logf("round %d: every silo stopped at once with %s (exited after %v%s); starting them again in the order %v, %v apart",
			round+1, signal, roundAll(exits), statuses, order, spacing)

		// The first, alone.
		first, second, third := order[0], order[1], order[2]
		cl.RestartWithoutWaiting(t, first)
		firstStart := time.Now()
		alone := watchAlone(t, ctx, cl, first, firstStart, firstStart.Add(spacing))
		t.Logf("round %d: silo %d alone for %v: up, no ready line, /readyz 503 from %v on (%d of %d polls): %s",
			round+1, first, time.Since(firstStart).Round(time.Millisecond), alone.firstSeen.Round(time.Millisecond), alone.notReady, alone.polls, alone.reason)

		// The second: the partitions serve with two of three replicas.
		cl.RestartWithoutWaiting(t, second)
		secondStart := time.Now()
		started := []int{first, second}
		sinceSecond := func() string {
			return fmt.Sprintf("in round %d, %v after the second start", round+1, time.Since(secondStart).Round(time.Millisecond))
		}
		pinned := dialPinned(t, ctx, cl, started...)
		dialed := time.Since(secondStart)
		viaStarted := &ticks{c: pinned, namespace: k.namespace, queue: k.queue, enqueued: map[string]string{}}
		callCtx, cancelCalls := context.WithTimeout(ctx, 90*time.Second)
		answers, answered := enqueueOnEvery(callCtx, viaStarted, clusterPartitions, secondStart)
		var served time.Duration
		for {
			requireStarted(t, cl, started, sinceSecond)
			if took, ok := answers.all(clusterPartitions); ok {
				served = took
				break
			}
			if time.Since(secondStart) > servedWithin {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if served == 0 {
			t.Errorf("round %d: %v after the second start (silos %d and %d up), not every partition answered an enqueue: %s",
				round+1, servedWithin, first, second, answers.missing(clusterPartitions))
		} else {
			leaders := cl.Leaders(ctx)
			t.Logf("round %d: silos %d and %d up: the client dialed %v after the second start; every partition answered an enqueue %v after it (%d partitions led)",
				round+1, first, second, dialed.Round(time.Millisecond), served.Round(time.Millisecond), len(leaders))
		}
		for _, i := range started {
			if err := cl.AwaitReady(t, i, 60*time.Second); err != nil {
				t.Fatalf("round %d: silo %d: %v\n%s", round+1, i, err, cl.logs())
			}
		}
		readyTwo := time.Since(secondStart)

		// The third, no sooner than the spacing, nor than the bound of the check above.
		time.Sleep(time.Until(secondStart.Add(spacing)))
		cl.RestartWithoutWaiting(t, third)
		thirdStart := time.Now()
		if err := cl.AwaitReady(t, third, 60*time.Second); err != nil {
			t.Fatalf("round %d: silo %d: %v\n%s", round+1, third, err, cl.logs())
		}
		readyThird := time.Since(thirdStart)
		<-answered
		cancelCalls()
		if served == 0 {
			if took, ok := answers.all(clusterPartitions); ok {
				t.Logf("round %d: every partition answered an enqueue %v after the second start (with the third started %v after it)",
					round+1, took.Round(time.Millisecond), thirdStart.Sub(secondStart).Round(time.Millisecond))
			} else {
				t.Errorf("round %d: not every partition answered an enqueue within 90 s of the second start: %s", round+1, answers.missing(clusterPartitions))
			}
		}
		waitReplicated(t, ctx, cl, 3, 90*time.Second)
		replicated := time.Since(thirdStart)
		served3 := awaitServes(t, ctx, cl, third, 90*time.Second, thirdStart, fmt.Sprintf("its start, the third of round %d", round+1))
		waitFlowing(t, k, clusterPartitions, thirdStart, 60*time.Second)
		flowing := time.Since(thirdStart)
		t.Logf("round %d: ready lines of the first two %v after the second start; the third's %v after its start; every partition on three voters %v "+
			"after the third start, the third serving %v after it, occurrences delivered from every partition again %v after it",
			round+1, readyTwo.Round(time.Millisecond), readyThird.Round(time.Millisecond), replicated.Round(time.Millisecond),
			served3.All().Round(time.Millisecond), flowing.Round(time.Millisecond))
		for id, key := range viaStarted.enqueued {
			k.enqueued[id] = key
		}
		_ = pinned.Close()
	}
	k.finish(t, ctx)
	requireUp(t, cl, func() string { return "by the end of the test" })
}

// logTail is the last n lines of log.
func logTail(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// roundAll rounds each duration to the millisecond.
func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
