package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/cluster/clockoffset"
)

// nemesisRig is a cluster of real silo processes under a run's workload (schedules, timers,
// sagas, probes) and a nemesis over it, for tests of one fault kind.
type nemesisRig struct {
	cl  *Cluster
	nem *nemesis
	w   *workload
	ctx context.Context
}

// startNemesisRig starts silos silos (4 partitions, 3 replicas each), the workload with its
// load, and a nemesis watching every process; all of it is stopped when the test ends.
func startNemesisRig(t *testing.T, silos int, spec SiloSpec) *nemesisRig {
	t.Helper()
	seed := chaosSeed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	spec.Partitions, spec.Replicas, spec.DeadAfter = 4, 3, 30*time.Second
	cl := StartCluster(t, silos, spec)
	nem := newNemesis(t, cl, seed, AllFaultKinds, nemesisTimings{GapMin: time.Second, GapMax: 2 * time.Second,
		RecoveryTimeout: 2 * time.Minute, DeadAfter: spec.DeadAfter}, t.Logf)
	t.Cleanup(nem.halt)
	if err := nem.awaitWhole(ctx, "the cluster's start"); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, client.DialConfig{Seeds: cl.Seeds(), Options: client.Options{Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	nem.probe = c
	w, err := startWorkload(ctx, c, seed, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.workerStop)
	t.Cleanup(w.stopLoad)
	if err := awaitFlowing(ctx, w, time.Minute); err != nil {
		t.Fatal(err)
	}
	w.startLoad(ctx, seed)
	return &nemesisRig{cl: cl, nem: nem, w: w, ctx: ctx}
}

// checkFault fails the test when the fault has an error, the cluster did not recover, or a silo
// exited without the nemesis causing it.
func (r *nemesisRig) checkFault(t *testing.T, f Fault, err error) {
	t.Helper()
	t.Logf("fault %s: %s", f.Kind, f.Detail)
	if err != nil {
		t.Errorf("fault %s: %v", f.Kind, err)
	}
	if err := r.nem.awaitWhole(r.ctx, string(f.Kind)); err != nil {
		t.Errorf("after fault %s: %v", f.Kind, err)
	}
	for _, e := range r.nem.processExits() {
		t.Errorf("silo %d (%s) exited, not by the nemesis: %s\n%s", e.Silo, e.SiloID, e.Status, e.LogTail)
	}
}

// TestNemesisFailpointKillsAtTheDueCoordinatorsCommands: a silo armed by FaultFailpoint at the
// due coordinator's emission (due-entry-applied) or its saga expiry (expire-entry-applied)
// kills itself there, an exit the nemesis expects, and comes back unarmed.
func TestNemesisFailpointKillsAtTheDueCoordinatorsCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of silo processes")
	}
	r := startNemesisRig(t, 3, SiloSpec{})
	for k, armed := range []string{"due-entry-applied:2", "expire-entry-applied:1"} {
		f := Fault{Kind: FaultFailpoint}
		err := r.nem.failpointAt(r.ctx, &f, k, -1, armed)
		r.checkFault(t, f, err)
		if !strings.Contains(f.Detail, "killed itself at the failpoint") {
			t.Errorf("armed with %s, the silo did not die at its failpoint: %s", armed, f.Detail)
		}
		if r.cl.Silos[k].Exited() {
			t.Errorf("silo %d is down after the fault", k)
		}
	}
}

// TestNemesisSkewRunsASiloOnAnOffsetClock: FaultSkew restarts a silo with its clock 3 minutes
// ahead. Every other silo being up, it judges itself clock-unfit against them: within
// skewedLeadsNothingWithin of rejoining it leads no partition, and none again while skewed; its
// /readyz answers 503 naming the clock offset; the partitions keep serving, and no message is
// received with an enqueue time beyond the bound after its receipt (the skewed silo stamped no
// logged time); the nemesis records only the bound for the checkers. A silo 3 minutes behind
// leads nothing either. Both come back on the real clock, with no exit the nemesis did not
// cause.
func TestNemesisSkewRunsASiloOnAnOffsetClock(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of silo processes")
	}
	r := startNemesisRig(t, 3, SiloSpec{})
	var skewed []*SiloProcess
	for k, offset := range []time.Duration{3 * time.Minute, -3 * time.Minute} {
		f := Fault{Kind: FaultSkew, Detail: fmt.Sprintf("silo %d on a clock %s", k, signed(offset))}
		handled := len(r.w.log.snapshot())
		err := r.nem.withSkew(r.ctx, k, offset, true, func() error {
			skewed = append(skewed, r.cl.Silos[k])
			return r.skewedLeadsNothing(k, 20*time.Second)
		})
		r.checkFault(t, f, err)
		if served := len(r.w.log.snapshot()) - handled; served == 0 {
			t.Errorf("silo %d on a clock %s: no message was handled meanwhile", k, signed(offset))
		}
	}
	bound := clockoffset.DefaultMaxOffset + time.Second
	ahead := map[int][]delivery{} // by partition
	for _, d := range r.w.log.snapshot() {
		if d.enqueuedAt.Sub(d.handledAt) > bound {
			ahead[d.partition] = append(ahead[d.partition], d)
		}
	}
	if len(ahead) > 0 {
		for n, ds := range ahead {
			first, last := ds[0], ds[len(ds)-1]
			t.Errorf("partition %d: %d messages were received with an enqueue time more than %v after their receipt: the skewed silo stamped logged time; the first enqueued at %s, received at %s; the last enqueued at %s, received at %s",
				n, len(ds), bound, first.enqueuedAt.UTC().Format(time.RFC3339Nano), first.handledAt.UTC().Format(time.RFC3339Nano),
				last.enqueuedAt.UTC().Format(time.RFC3339Nano), last.handledAt.UTC().Format(time.RFC3339Nano))
		}
		for _, p := range skewed {
			t.Logf("the skewed silo (pid %d): its lines on its clock and as a partition's leader:\n%s", p.PID(), grepLines(p.Log(), "clock", "due coordinator", "leads partitions"))
		}
	}
	if got := r.nem.clockAhead(); got.by != clockoffset.DefaultMaxOffset {
		t.Errorf("clock ahead recorded %v, want the bound %v", got.by, clockoffset.DefaultMaxOffset)
	}
}

// skewedLeadsNothingWithin bounds how long a silo restarted on a clock far off the others'
// may still lead a partition once it has rejoined: its first clock probes, then a leadership
// transfer.
const skewedLeadsNothingWithin = 10 * time.Second

// skewedLeadsNothing watches, for held, that silo i leads no partition once
// skewedLeadsNothingWithin has passed, and that its /readyz answers 503 naming the clock
// offset by then.
func (r *nemesisRig) skewedLeadsNothing(i int, held time.Duration) error {
	start := time.Now()
	var errs []error
	for time.Since(start) < held {
		settled := time.Since(start) > skewedLeadsNothingWithin
		var led []int
		for n, leader := range r.cl.Leaders(r.ctx) {
			if leader == i {
				led = append(led, n)
			}
		}
		if settled && len(led) > 0 {
			errs = append(errs, fmt.Errorf("%v after it rejoined, skewed silo %d leads partitions %v", time.Since(start).Round(time.Millisecond), i, led))
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	status, body, err := httpAnswer(r.ctx, "http://"+r.cl.Silos[i].AdminAddress()+"/readyz")
	if err != nil || status != http.StatusServiceUnavailable || !strings.Contains(body, "clock offset") {
		errs = append(errs, fmt.Errorf("skewed silo %d's /readyz: %d %s (%v), want 503 naming the clock offset", i, status, body, err))
	}
	return errors.Join(errs...)
}

// TestNemesisZoneRulesRestartsASiloWithOtherRules: FaultZoneRules restarts a silo with a
// ZONEINFO in which Europe/Berlin is UTC; the silo says it ignores it, and every occurrence of
// the workload's Europe/Berlin cron schedules delivered meanwhile is at an instant of the
// compiled rules.
func TestNemesisZoneRulesRestartsASiloWithOtherRules(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of silo processes")
	}
	r := startNemesisRig(t, 3, SiloSpec{})
	f := Fault{Kind: FaultZoneRules}
	err := r.nem.zoneRules(r.ctx, &f)
	r.checkFault(t, f, err)
	crons := map[string]bool{}
	for _, s := range r.w.crons {
		crons[s.lane.GetKey()] = true
	}
	delivered := 0
	for _, d := range r.w.log.snapshot() {
		if !crons[d.key] || d.origin != client.OriginOccurrence {
			continue
		}
		delivered++
		if !r.w.cronHours.holds(d.nominal) {
			t.Errorf("cron occurrence %s at %v, not an instant of %q in %s", d.id, d.nominal, r.w.cronHours.expression(), cronZone)
		}
	}
	if delivered == 0 && time.Now().In(r.w.cronHours.zone).Hour() == r.w.cronHours.first {
		t.Errorf("no cron occurrence delivered within the hour they are due")
	}
	t.Logf("%d cron occurrences delivered", delivered)
}

// TestNemesisSplitCutsTheClusterInTwo: five silos split two from three, while the test process
// reaches all five: every partition still answers a command (each group holds a quorum on one
// side, which serves it), and no silo stops. Healed, every silo lists every silo alive within a
// few gossip rounds, and the cluster is whole again (awaitWhole: every partition led, its full
// group of voters, answering a command). Then FaultSplit does it again at random and the cluster
// recovers.
//
// The silos' membership views need not split: the test's client, a memberlist node both sides
// reach, answers memberlist's indirect probes and relays its gossip, so each side may go on
// listing the other live (memberlist's failure detection is built to ride out connectivity
// that is not transitive); a side that does declare the other dead finds it again after the
// heal (cluster.failedPeers). It runs under make cluster-test (ORRERY_CLUSTER_FULL=1) only.
func TestNemesisSplitCutsTheClusterInTwo(t *testing.T) {
	if testing.Short() || !clusterFull() {
		t.Skip("starts a cluster of five silo processes, and splits it; make cluster-test runs it")
	}
	RequireNetcut(t)
	r := startNemesisRig(t, 5, SiloSpec{Isolatable: true})
	sideA, sideB := []int{0, 3}, []int{1, 2, 4}
	procs := func(side []int) []*SiloProcess {
		var out []*SiloProcess
		for _, j := range side {
			out = append(out, r.cl.Silos[j])
		}
		return out
	}
	s, err := Split(procs(sideA), procs(sideB))
	if err != nil {
		t.Fatal(err)
	}
	healed := false
	defer func() {
		if !healed {
			_ = s.Heal()
		}
	}()
	// sees reports whether silo i lists every silo of alive alive.
	sees := func(i int, alive []int) error {
		ctx, cancel := context.WithTimeout(r.ctx, 3*time.Second)
		defer cancel()
		table, err := ReadSilos(ctx, r.cl.Silos[i].AdminAddress())
		if err != nil {
			return err
		}
		listed := map[string]bool{}
		for _, row := range table.Silos {
			listed[row.SiloID] = row.Alive
		}
		for _, j := range alive {
			if !listed[r.cl.Silos[j].SiloID()] {
				return fmt.Errorf("silo %d does not list silo %d alive", i, j)
			}
		}
		return nil
	}
	split := time.Now()
	// Held a while, for the sides to act on it (leaders cut from their quorum step down, the
	// other side elects), then every partition must answer.
	time.Sleep(5 * time.Second)
	if err := probePartitions(r.ctx, r.nem.probe, r.cl.Specs[0].Partitions, 15*time.Second); err != nil {
		t.Fatalf("%v into the split: %v\n%s", time.Since(split).Round(time.Millisecond), err, describeReplicas(r.ctx, r.cl))
	}
	t.Logf("every partition answered a command %v into the split", time.Since(split).Round(time.Millisecond))
	for i, p := range r.cl.Silos {
		if p.Exited() {
			t.Fatalf("silo %d exited during the split\n%s", i, p.Log())
		}
	}
	healed = true
	if err := s.Heal(); err != nil {
		t.Fatal(err)
	}
	heal := time.Now()
	all := []int{0, 1, 2, 3, 4}
	for {
		var errs []error
		for i := range all {
			errs = append(errs, sees(i, all))
		}
		err := errors.Join(errs...)
		if err == nil {
			break
		}
		if time.Since(heal) > 20*time.Second {
			t.Fatalf("20 s after the heal: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("every silo lists every silo alive %v after the heal", time.Since(heal).Round(time.Millisecond))
	if err := r.nem.awaitWhole(r.ctx, "the split"); err != nil {
		t.Fatal(err)
	}
	t.Logf("the cluster is whole %v after the heal", time.Since(heal).Round(time.Millisecond))
	f := Fault{Kind: FaultSplit}
	err = r.nem.split(r.ctx, &f)
	r.checkFault(t, f, err)
}

// TestNemesisCombinedTakesTwoSilosAtOnce: in a cluster of three, FaultCombined takes one silo
// down while another runs on a skewed clock, never two down; both come back.
func TestNemesisCombinedTakesTwoSilosAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of silo processes")
	}
	r := startNemesisRig(t, 3, SiloSpec{})
	f := Fault{Kind: FaultCombined}
	err := r.nem.combined(r.ctx, &f)
	r.checkFault(t, f, err)
	if len(f.Parts) != 2 || f.Parts[1] != FaultSkew || !strings.Contains(f.Detail, "runs on a clock") {
		t.Errorf("a combined fault of three silos: parts %v (%s), want a silo down and one skewed", f.Parts, f.Detail)
	}
	r.nem.faults = append(r.nem.faults, f)
	if got := r.nem.counts(); got[FaultCombined] != 1 || got[FaultSkew] != 1 {
		t.Errorf("counts %v", got)
	}
}

// TestNemesisFullDiskRefusesAndRecovers: FaultFullDisk fills a silo's disk (its free-space
// file says 0 bytes): the silo refuses new work (its /readyz answers 503), stays up, and serves
// again on its own once the disk is emptied.
func TestNemesisFullDiskRefusesAndRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of silo processes")
	}
	r := startNemesisRig(t, 3, SiloSpec{})
	leader, err := r.cl.LeaderOf(r.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := Fault{Kind: FaultFullDisk}
	err = r.nem.fullDiskFor(r.ctx, &f, leader, 0, 8*time.Second)
	r.checkFault(t, f, err)
	if !strings.Contains(f.Detail, "answered 503 while full") {
		t.Errorf("the full silo did not refuse: %s", f.Detail)
	}
}
