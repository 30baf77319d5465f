package chaos

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery/client"
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
// ahead, which then leads some partitions (leaderships are balanced within seconds) and stamps
// their logged time ahead: messages are received with an enqueue time minutes after the real
// time; the nemesis records the offset for the checkers. A silo 3 minutes behind serves too.
// Both come back on the real clock, with no exit the nemesis did not cause.
func TestNemesisSkewRunsASiloOnAnOffsetClock(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of silo processes")
	}
	r := startNemesisRig(t, 3, SiloSpec{})
	f := Fault{Kind: FaultSkew}
	err := r.nem.skewBy(r.ctx, &f, 0, -1, 3*time.Minute, 20*time.Second)
	r.checkFault(t, f, err)
	ahead := 0
	for _, d := range r.w.log.snapshot() {
		if d.enqueuedAt.Sub(d.handledAt) > 2*time.Minute {
			ahead++
		}
	}
	if ahead == 0 {
		t.Errorf("no message was received with an enqueue time 2 minutes after its receipt: the skewed silo stamped no logged time")
	}
	if got := r.nem.clockAhead(); got.by != 3*time.Minute || time.Until(got.until) < 2*time.Minute {
		t.Errorf("clock ahead recorded %v until %v, want 3m until about 3m from now", got.by, got.until)
	}
	f = Fault{Kind: FaultSkew}
	err = r.nem.skewBy(r.ctx, &f, 1, -1, -3*time.Minute, 20*time.Second)
	r.checkFault(t, f, err)
	if got := r.nem.clockAhead(); got.by != 3*time.Minute {
		t.Errorf("a clock behind changed the clock ahead to %v", got.by)
	}
}
