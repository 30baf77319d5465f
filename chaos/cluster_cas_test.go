package chaos

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/route"
	"github.com/orreryhq/orrery/internal/testkit"
)

// phaseLog records what a test was doing to the cluster from when, so that a failed call can
// be told what was happening when it was sent and when it failed.
type phaseLog struct {
	mu      sync.Mutex
	entries []phaseEntry
}

type phaseEntry struct {
	from time.Time
	what string
}

// set records that the cluster is in phase what from now on.
func (l *phaseLog) set(what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, phaseEntry{time.Now(), what})
}

// timeline renders every phase with when it began, counted from began.
func (l *phaseLog) timeline(began time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var lines []string
	for _, e := range l.entries {
		lines = append(lines, fmt.Sprintf("%s (%+v) %s", e.from.Format("15:04:05.000"), e.from.Sub(began).Round(time.Millisecond), e.what))
	}
	return strings.Join(lines, "\n  ")
}

// at is the phase the cluster was in at instant.
func (l *phaseLog) at(instant time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	what := "before the first phase"
	for _, e := range l.entries {
		if e.from.After(instant) {
			break
		}
		what = e.what
	}
	return what
}

// leaderChange is a change of a partition's leader seen by leaderWatch: from and to are silo
// indices, -1 for no leader seen.
type leaderChange struct {
	at        time.Time
	partition int
	from, to  int
}

// leaderWatch polls the admin endpoints at addresses (silo index → host:port, fixed across
// restarts) every 200 ms and records each change of a partition's leader, until halted; a poll
// that no silo answered within 1 s is skipped. It reads only the addresses it was given, so it
// runs beside the test's use of the Cluster.
type leaderWatch struct {
	mu      sync.Mutex
	changes []leaderChange
	stop    context.CancelFunc
	done    chan struct{}
}

func watchLeaders(ctx context.Context, addresses []string, partitions int) *leaderWatch {
	ctx, stop := context.WithCancel(ctx)
	w := &leaderWatch{stop: stop, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		current := map[int]int{}
		for n := range partitions {
			current[n] = -1
		}
		for ctx.Err() == nil {
			readCtx, cancel := context.WithTimeout(ctx, time.Second)
			tables := map[int]*PartitionTable{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for i, address := range addresses {
				wg.Go(func() {
					if table, err := ReadPartitions(readCtx, address); err == nil {
						mu.Lock()
						tables[i] = table
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			cancel()
			now := time.Now()
			leaders := leadersOf(tables)
			if len(tables) == 0 {
				// No silo answered within the read's bound: nothing is known of the leaders.
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
				continue
			}
			w.mu.Lock()
			for n := range partitions {
				to, ok := leaders[n]
				if !ok {
					to = -1
				}
				if to != current[n] {
					w.changes = append(w.changes, leaderChange{at: now, partition: n, from: current[n], to: to})
					current[n] = to
				}
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return w
}

// halt stops the polling and waits for it.
func (w *leaderWatch) halt() {
	w.stop()
	<-w.done
}

// between renders the leader changes of partition (every partition when partition < 0) seen
// from after to before, with their times counted from began.
func (w *leaderWatch) between(partition int, after, before, began time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	silo := func(i int) string {
		if i < 0 {
			return "none"
		}
		return fmt.Sprintf("silo %d", i)
	}
	var out []string
	for _, c := range w.changes {
		if (partition >= 0 && c.partition != partition) || c.at.Before(after) || !c.at.Before(before) {
			continue
		}
		out = append(out, fmt.Sprintf("+%v partition %d: %s → %s", c.at.Sub(began).Round(time.Millisecond), c.partition, silo(c.from), silo(c.to)))
	}
	if len(out) == 0 {
		return "no change seen"
	}
	return strings.Join(out, "; ")
}

// casSaga is one saga of the CAS load, updated only by the caller that owns it.
type casSaga struct {
	lane      *orreryv1.Lane
	id        string
	partition int
	// revision and state are the saga's as the last successful call left it, or as read back
	// after a failed one.
	revision uint64
	state    string
	// unsure is set after a failed call, whose outcome is unknown: pending is the state it
	// wrote, if it applied.
	unsure  bool
	pending string
	// succeeded counts the calls that returned the saga's new revision.
	succeeded int
}

// casFailure is one CAS call that failed.
type casFailure struct {
	sent      time.Time
	took      time.Duration
	caller    int
	partition int
	saga      string
	expected  uint64
	sentIn    string // the phase when it was sent
	failedIn  string // the phase when it returned
	err       error
}

// casLoad is callers goroutines each updating its own sagas, one per partition, by
// CompareExchangeSaga on the revision it last saw, one call at a time, each within a deadline.
type casLoad struct {
	c        *client.Client
	deadline time.Duration
	phases   *phaseLog
	began    time.Time
	sagas    [][]*casSaga // by caller

	mu        sync.Mutex
	calls     int
	latencies map[string][]time.Duration // by phase when sent
	failures  []casFailure
	// failedApplied counts the failed calls found applied when read back.
	failedApplied int
	// halted counts the calls in flight when the load halted (neither successes nor failures
	// of the cluster; check accepts either outcome).
	halted int
	slow   []casFailure // calls that succeeded after more than casSlow (err nil)

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// casPace is how long each caller waits between two of its calls.
const casPace = 20 * time.Millisecond

// casSlow is the latency beyond which a successful CAS call is logged: a third of the 3 s
// deadline, so that near misses show.
const casSlow = time.Second

// startCASLoad creates, for each of callers callers, one Waiting saga on each of partitions
// partitions (keys chosen to land there), and starts the callers: each updates its sagas in
// turn by CAS on the revision it last saw, each call under its own deadline, casPace apart.
func startCASLoad(t *testing.T, ctx context.Context, c *client.Client, callers, partitions int, deadline time.Duration, phases *phaseLog) *casLoad {
	t.Helper()
	l := &casLoad{c: c, deadline: deadline, phases: phases, latencies: map[string][]time.Duration{}}
	namespace := "cas-" + uuid.NewString()[:8]
	for caller := range callers {
		var mine []*casSaga
		for n := range partitions {
			key := fmt.Sprintf("c%d-p%d", caller, n)
			for i := 0; route.PartitionOf(namespace, key, c.Partitions()) != n; i++ {
				key = fmt.Sprintf("c%d-p%d-%d", caller, n, i)
			}
			s := &casSaga{lane: &orreryv1.Lane{Namespace: namespace, Queue: "cas", Key: key}, id: uuid.NewString(), partition: n, state: `{"n":0}`}
			callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			r, err := c.CompareExchangeSaga(callCtx, client.WaitingSaga(s.lane, s.id, 0, s.state, time.Time{}, nil))
			cancel()
			if err != nil {
				t.Fatalf("create saga %s on partition %d: %v", s.id, n, err)
			}
			s.revision = r.GetRevision()
			mine = append(mine, s)
		}
		l.sagas = append(l.sagas, mine)
	}
	loadCtx, stop := context.WithCancel(ctx)
	l.stop = stop
	l.began = time.Now()
	for caller, mine := range l.sagas {
		l.wg.Go(func() { l.run(loadCtx, caller, mine) })
	}
	t.Cleanup(l.halt)
	return l
}

// run is one caller's loop, until ctx ends.
func (l *casLoad) run(ctx context.Context, caller int, mine []*casSaga) {
	for n := 1; ctx.Err() == nil; n++ {
		s := mine[n%len(mine)]
		if s.unsure && !l.readBack(ctx, s) {
			time.Sleep(casPace)
			continue
		}
		state := fmt.Sprintf(`{"caller":%d,"n":%d}`, caller, n)
		callCtx, cancel := context.WithTimeout(ctx, l.deadline)
		sent := time.Now()
		r, err := l.c.CompareExchangeSaga(callCtx, client.WaitingSaga(s.lane, s.id, s.revision, state, time.Time{}, nil))
		took := time.Since(sent)
		cancel()
		if ctx.Err() != nil {
			// Stopped: not the cluster's failure, but the call may have applied.
			l.mu.Lock()
			l.halted++
			l.mu.Unlock()
			if err == nil {
				s.revision, s.state = r.GetRevision(), state
			} else {
				s.unsure, s.pending = true, state
			}
			return
		}
		if err == nil && r.GetRevision() != s.revision+1 {
			err = fmt.Errorf("CAS on revision %d answered revision %d, want %d", s.revision, r.GetRevision(), s.revision+1)
		}
		l.mu.Lock()
		l.calls++
		sentIn := l.phases.at(sent)
		l.latencies[sentIn] = append(l.latencies[sentIn], took)
		if err != nil {
			l.failures = append(l.failures, casFailure{sent: sent, took: took, caller: caller, partition: s.partition, saga: s.id,
				expected: s.revision, sentIn: sentIn, failedIn: l.phases.at(time.Now()), err: err})
		} else if took > casSlow {
			l.slow = append(l.slow, casFailure{sent: sent, took: took, caller: caller, partition: s.partition, saga: s.id,
				expected: s.revision, sentIn: sentIn, failedIn: l.phases.at(time.Now())})
		}
		l.mu.Unlock()
		if err != nil {
			s.unsure, s.pending = true, state
		} else {
			s.revision, s.state = r.GetRevision(), state
			s.succeeded++
		}
		time.Sleep(casPace)
	}
}

// readBack reads saga s after a failed call whose outcome is unknown and takes its revision
// and state; it reports whether it could (within the load's deadline). The failed call applied
// or it did not: anything else is recorded as a failure.
func (l *casLoad) readBack(ctx context.Context, s *casSaga) bool {
	callCtx, cancel := context.WithTimeout(ctx, l.deadline)
	defer cancel()
	rec, err := l.c.InspectSaga(callCtx, s.lane, s.id)
	if err != nil {
		return false
	}
	if got := rec.GetRevision(); got != s.revision && !(got == s.revision+1 && rec.GetStateJson() == s.pending) {
		l.mu.Lock()
		l.failures = append(l.failures, casFailure{sent: time.Now(), saga: s.id, partition: s.partition, expected: s.revision,
			sentIn: l.phases.at(time.Now()), failedIn: l.phases.at(time.Now()),
			err: fmt.Errorf("read back after a failed CAS on revision %d: revision %d, state %s (the failed call wrote %s)", s.revision, got, rec.GetStateJson(), s.pending)})
		l.mu.Unlock()
	}
	if rec.GetRevision() == s.revision+1 {
		l.mu.Lock()
		l.failedApplied++
		l.mu.Unlock()
	}
	s.revision, s.state, s.unsure = rec.GetRevision(), rec.GetStateJson(), false
	return true
}

// halt stops the callers and waits for them.
func (l *casLoad) halt() {
	l.stop()
	l.wg.Wait()
}

// check reads every saga back once the load has halted: each must be at the revision and hold
// the state its caller last wrote (or, after a last failed call, either that or what the failed
// call wrote). It returns the problems and how many CAS transitions were applied in all.
func (l *casLoad) check(t *testing.T, ctx context.Context) (problems []string, applied int) {
	t.Helper()
	for _, mine := range l.sagas {
		for _, s := range mine {
			var rec *orreryv1.SagaRecord
			testkit.Eventually(t, 60*time.Second, "saga "+s.id+" read back", func() bool {
				callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				var err error
				rec, err = l.c.InspectSaga(callCtx, s.lane, s.id)
				return err == nil
			})
			got := rec.GetRevision()
			switch {
			case got == s.revision && rec.GetStateJson() == s.state:
			case s.unsure && got == s.revision+1 && rec.GetStateJson() == s.pending:
			default:
				problems = append(problems, fmt.Sprintf("saga %s (partition %d): revision %d state %s, its caller last saw revision %d state %s",
					s.id, s.partition, got, rec.GetStateJson(), s.revision, s.state))
			}
			applied += int(got) - 1
		}
	}
	return problems, applied
}

// report logs the calls, the latencies by phase, each call slower than casSlow, and each
// failure; it returns the failures.
func (l *casLoad) report(t *testing.T) []casFailure {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	phases := make([]string, 0, len(l.latencies))
	for phase := range l.latencies {
		phases = append(phases, phase)
	}
	sort.Strings(phases)
	for _, phase := range phases {
		ds := slices.Clone(l.latencies[phase])
		slices.Sort(ds)
		p99 := ds[min(len(ds)-1, len(ds)*99/100)]
		t.Logf("CAS calls sent while %s: %d, median %v, p99 %v, max %v", phase, len(ds),
			ds[len(ds)/2].Round(time.Millisecond), p99.Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	}
	for _, f := range l.slow {
		t.Logf("slow CAS call (succeeded): sent %s (+%v), partition %d, caller %d, took %v; sent while %s, answered while %s",
			f.sent.Format("15:04:05.000"), f.sent.Sub(l.began).Round(time.Millisecond), f.partition, f.caller,
			f.took.Round(time.Millisecond), f.sentIn, f.failedIn)
	}
	for _, f := range l.failures {
		t.Logf("failed CAS call: sent %s (+%v), partition %d, saga %s, caller %d, expected revision %d, after %v; sent while %s, failed while %s: %v",
			f.sent.Format("15:04:05.000"), f.sent.Sub(l.began).Round(time.Millisecond), f.partition, f.saga, f.caller, f.expected,
			f.took.Round(time.Millisecond), f.sentIn, f.failedIn, f.err)
	}
	return slices.Clone(l.failures)
}

// TestClusterRollingRestartUnderCASLoad: three silos, an Every-1s schedule on every partition
// with a worker, and four callers updating sagas by compare-and-set (CompareExchangeSaga on the
// revision each last saw), one saga per caller and partition, each call with a 3 s deadline.
// Each silo in turn is stopped with SIGTERM, started again on its data dir, and waited for until
// it serves again (Cluster.WaitServes), then the load runs on before the next SIGTERM: with
// ORRERY_CLUSTER_FULL=1, three rounds of the three silos, 8 s of steady load before the first
// SIGTERM and 8 s after each silo serves again; in the short form one round, steady load for
// at least 2 s and until the leaderships are even, and, after each silo serves again, until
// the leaderships have moved back to it under the load (awaitEvenLeaders: the moves the 8 s
// covered). No CAS call may fail: every one
// answers within its deadline with the next revision. Each failure is logged with when it was
// sent, its partition, its error and what the restart was doing then. At the end every saga
// holds what its caller last wrote, and no occurrence was enqueued twice, no schedule has a
// gap.
func TestClusterRollingRestartUnderCASLoad(t *testing.T) {
	const callDeadline = 3 * time.Second
	const callers = 4
	const apart = 8 * time.Second
	rounds := 1
	if clusterFull() {
		rounds = 3
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(4+4*rounds)*time.Minute)
	defer cancel()
	cl, c, k := startTicking(t, ctx, 3, clusterSpec(), 1)

	var addresses []string
	for _, p := range cl.Silos {
		addresses = append(addresses, p.AdminAddress())
	}
	leaders := watchLeaders(ctx, addresses, clusterPartitions)
	t.Cleanup(leaders.halt)
	phases := &phaseLog{}
	phases.set("steady, before the rolling restart")
	load := startCASLoad(t, ctx, c, callers, clusterPartitions, callDeadline, phases)
	if clusterFull() {
		time.Sleep(apart)
	} else {
		took := awaitEvenLeaders(t, ctx, cl, 2*time.Second, func() string { return "under steady load, before the rolling restart" })
		t.Logf("steady load for %v before the first SIGTERM, leaderships even", took.Round(time.Millisecond))
	}

	type restart struct {
		round, silo int
		led         []int         // the partitions the silo led at its SIGTERM
		stopped     *SiloProcess  // the process stopped
		window      [2]time.Time  // SIGTERM, serving again
		exited      time.Duration // SIGTERM → exit
		ready       time.Duration // exit → ready line
		served      Served        // ready line → serving, each condition
		serving     time.Duration // SIGTERM → serving
	}
	var restarts []restart
	for round := range rounds {
		for i := range cl.Silos {
			r := restart{round: round + 1, silo: i, stopped: cl.Silos[i]}
			for n, leader := range cl.Leaders(ctx) {
				if leader == i {
					r.led = append(r.led, n)
				}
			}
			slices.Sort(r.led)
			phases.set(fmt.Sprintf("silo %d stopping (round %d: SIGTERM sent, not exited yet)", i, round+1))
			stopped := time.Now()
			r.window[0] = stopped
			if err := cl.Silos[i].Terminate(30 * time.Second); err != nil && !cl.Silos[i].Exited() {
				t.Errorf("round %d: silo %d did not exit within 30 s of SIGTERM: %v", round+1, i, err)
				cl.Silos[i].Kill()
			} else if err != nil {
				t.Logf("round %d: silo %d exited on SIGTERM with %v", round+1, i, err)
			}
			r.exited = time.Since(stopped)
			phases.set(fmt.Sprintf("silo %d down (round %d: exited, restarted, no ready line yet)", i, round+1))
			exited := time.Now()
			cl.Restart(t, i)
			r.ready = time.Since(exited)
			phases.set(fmt.Sprintf("silo %d rejoining (round %d: ready line printed, not serving yet)", i, round+1))
			r.served = awaitServes(t, ctx, cl, i, 90*time.Second, time.Now(), fmt.Sprintf("its restart in round %d", round+1))
			waitReplicated(t, ctx, cl, 3, 90*time.Second)
			r.serving = time.Since(stopped)
			r.window[1] = time.Now()
			t.Logf("round %d: silo %d (leading partitions %v at its SIGTERM) exited %v after SIGTERM, printed its ready line %v after its exit, served again %v after that "+
				"(ready %v, listed alive %v, rejoined %v): %v from SIGTERM to serving with three voters everywhere",
				round+1, i, r.led, r.exited.Round(time.Millisecond), r.ready.Round(time.Millisecond), r.served.All().Round(time.Millisecond),
				r.served.Ready.Round(time.Millisecond), r.served.Listed.Round(time.Millisecond), r.served.Rejoined.Round(time.Millisecond),
				r.serving.Round(time.Millisecond))
			restarts = append(restarts, r)
			t.Logf("round %d: leader changes from silo %d's SIGTERM until it served again: %s", round+1, i,
				leaders.between(-1, r.window[0], r.window[1].Add(time.Second), load.began))
			if clusterFull() {
				phases.set(fmt.Sprintf("silo %d serving again (round %d), %v before the next SIGTERM", i, round+1, apart))
				for pause := time.Now().Add(apart); time.Now().Before(pause); {
					requireUp(t, cl, func() string { return fmt.Sprintf("after silo %d served again in round %d", i, round+1) })
					time.Sleep(min(250*time.Millisecond, time.Until(pause)))
				}
			} else {
				phases.set(fmt.Sprintf("silo %d serving again (round %d), leaderships moving back to it before the next SIGTERM", i, round+1))
				took := awaitEvenLeaders(t, ctx, cl, 0, func() string { return fmt.Sprintf("after silo %d served again in round %d", i, round+1) })
				t.Logf("round %d: leaderships even again %v after silo %d served again", round+1, took.Round(time.Millisecond), i)
			}
		}
	}
	phases.set("after the rolling restart")
	time.Sleep(2 * time.Second)
	load.halt()
	leaders.halt()

	failures := load.report(t)
	problems, applied := load.check(t, ctx)
	succeeded := 0
	for _, mine := range load.sagas {
		for _, s := range mine {
			succeeded += s.succeeded
		}
	}
	var exits, servings []time.Duration
	for _, r := range restarts {
		exits = append(exits, r.exited)
		servings = append(servings, r.serving)
	}
	exitMedian, exitMax := medianMax(exits)
	servingMedian, servingMax := medianMax(servings)
	spaced := fmt.Sprintf("%v apart", apart)
	if !clusterFull() {
		spaced = "each once the leaderships were even again"
	}
	t.Logf("%d SIGTERM restarts, %s: SIGTERM → exit median %v, max %v; SIGTERM → serving again median %v, max %v",
		len(restarts), spaced, exitMedian.Round(time.Millisecond), exitMax.Round(time.Millisecond),
		servingMedian.Round(time.Millisecond), servingMax.Round(time.Millisecond))
	t.Logf("%d CAS calls by %d callers over %d sagas in %v: %d succeeded, %d failed (%d of them found applied when read back); "+
		"%d more in flight when the load stopped; %d transitions applied in all",
		load.calls, callers, callers*clusterPartitions, time.Since(load.began).Round(time.Second), succeeded, len(failures), load.failedApplied,
		load.halted, applied)
	for _, p := range problems {
		t.Error(p)
	}
	if len(failures) > 0 {
		var lines []string
		for _, f := range failures {
			lines = append(lines, fmt.Sprintf("+%v partition %d (%s): %v; its leader changes from 2 s before it was sent until it failed: %s",
				f.sent.Sub(load.began).Round(time.Millisecond), f.partition, f.sentIn, f.err,
				leaders.between(f.partition, f.sent.Add(-2*time.Second), f.sent.Add(f.took), load.began)))
		}
		t.Errorf("%d of %d CAS calls failed during the rolling restart:\n  %s", len(failures), load.calls, strings.Join(lines, "\n  "))
		t.Logf("phases:\n  %s", phases.timeline(load.began))
		t.Logf("every leader change seen: %s", leaders.between(-1, load.began, time.Now(), load.began))
		// The logs of each silo stopped while a failed call was sent, before and after its
		// restart.
		for _, r := range restarts {
			if !slices.ContainsFunc(failures, func(f casFailure) bool { return !f.sent.Before(r.window[0]) && f.sent.Before(r.window[1]) }) {
				continue
			}
			t.Logf("round %d, silo %d: the log of the process stopped (pid %d):\n%s", r.round, r.silo, r.stopped.PID(), r.stopped.Log())
		}
		t.Logf("every silo's log now:\n%s", cl.logs())
	}
	k.finish(t, ctx)
	requireUp(t, cl, func() string { return "by the end of the test" })
}

// awaitEvenLeaders polls cl every 250 ms, failing the test (when says when) as soon as a silo
// has exited, until at least least has passed and every partition is led, the counts of
// partitions the silos lead differing by at most one (what balancing converges to; see
// TestClusterLeadersAreBalanced); it fails the test if that takes more than 60 s. It returns
// how long it waited.
func awaitEvenLeaders(t *testing.T, ctx context.Context, cl *Cluster, least time.Duration, when func() string) time.Duration {
	t.Helper()
	const within = 60 * time.Second
	began := time.Now()
	counts := make([]int, len(cl.Silos))
	for {
		requireUp(t, cl, when)
		leaders := cl.Leaders(ctx)
		clear(counts)
		for _, i := range leaders {
			counts[i]++
		}
		waited := time.Since(began)
		if waited >= least && len(leaders) == cl.Specs[0].Partitions && slices.Max(counts)-slices.Min(counts) <= 1 {
			return waited
		}
		if waited > within {
			t.Fatalf("%s: leaders per silo %v (%d of %d partitions led) after %v: not even\n%s",
				when(), counts, len(leaders), cl.Specs[0].Partitions, within, cl.logs())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestClusterLostDiskUnderCASLoad: the same CAS load as TestClusterRollingRestartUnderCASLoad on
// three silos with a short --dead-after. One silo is SIGKILLed and its data dir deleted; once
// the other two have removed its replicas (two voters everywhere), it is started again on the
// empty dir, as a new silo: the groups add it as a learner, catch it up by snapshot, promote it
// and move leaderships to it. The kill is a fault, and calls sent before the groups settled
// without it are only logged; from then on (the planned moves: add, promote, balance) no call
// may fail. One silo in the short form, each in turn with ORRERY_CLUSTER_FULL=1.
func TestClusterLostDiskUnderCASLoad(t *testing.T) {
	const callDeadline = 3 * time.Second
	const callers = 4
	const apart = 8 * time.Second
	const deadAfter = 3 * time.Second
	victims := []int{1}
	if clusterFull() {
		victims = []int{0, 1, 2}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(4+3*len(victims))*time.Minute)
	defer cancel()
	spec := clusterSpec()
	spec.DeadAfter = deadAfter
	cl, c, k := startTicking(t, ctx, 3, spec, 1)
	phases := &phaseLog{}
	phases.set("steady, before the lost disk")
	load := startCASLoad(t, ctx, c, callers, clusterPartitions, callDeadline, phases)
	time.Sleep(apart)

	var planned [][2]time.Time // from the groups settling without the lost silo until the end of its pause
	for _, i := range victims {
		old := cl.Silos[i].SiloID()
		phases.set(fmt.Sprintf("silo %d (%s) killed, its disk lost", i, old))
		killed := time.Now()
		cl.Silos[i].Kill()
		_ = cl.Silos[i].Wait(10 * time.Second)
		if err := os.RemoveAll(cl.Specs[i].DataDir); err != nil {
			t.Fatal(err)
		}
		waitReplicated(t, ctx, cl, 2, 90*time.Second, old)
		settled := time.Now()
		phases.set(fmt.Sprintf("silo %d's replicas removed; restarting it on an empty data dir", i))
		cl.Restart(t, i)
		fresh := cl.Silos[i].SiloID()
		served := awaitServes(t, ctx, cl, i, 90*time.Second, time.Now(), fmt.Sprintf("its restart as silo %s", fresh))
		waitReplicated(t, ctx, cl, 3, 90*time.Second, old)
		t.Logf("silo %d (%s) killed and its disk lost: its replicas removed %v later; started again as silo %s, serving %v after its ready line, "+
			"a voter of every partition %v after its old replicas were removed",
			i, old, settled.Sub(killed).Round(time.Millisecond), fresh, served.All().Round(time.Millisecond), time.Since(settled).Round(time.Millisecond))
		phases.set(fmt.Sprintf("silo %d serving again as a new silo, leaderships moving to it", i))
		time.Sleep(apart)
		planned = append(planned, [2]time.Time{settled, time.Now()})
		requireUp(t, cl, func() string { return fmt.Sprintf("after silo %d came back as a new silo", i) })
	}
	phases.set("after the lost disks")
	time.Sleep(2 * time.Second)
	load.halt()

	failures := load.report(t)
	problems, applied := load.check(t, ctx)
	var inPlanned []casFailure
	for _, f := range failures {
		for _, w := range planned {
			if !f.sent.Before(w[0]) && f.sent.Before(w[1]) {
				inPlanned = append(inPlanned, f)
			}
		}
	}
	t.Logf("%d CAS calls by %d callers in %v: %d failed, %d of them while the groups added, promoted and balanced the new silo; %d transitions applied",
		load.calls, callers, time.Since(load.began).Round(time.Second), len(failures), len(inPlanned), applied)
	for _, p := range problems {
		t.Error(p)
	}
	if len(inPlanned) > 0 {
		t.Errorf("%d CAS calls failed while the groups added, promoted and balanced a new silo (planned moves)", len(inPlanned))
		t.Logf("phases:\n  %s", phases.timeline(load.began))
		t.Logf("every silo's log now:\n%s", cl.logs())
	}
	k.finish(t, ctx)
}
