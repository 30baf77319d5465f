package chaos

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestChaosShortRun is make chaos in short: three silos, 75 s of faults (SIGKILL, SIGSTOP, a
// crash failpoint and, where the machine can, network isolation; at least three of them), then
// healing, 15 s of quiet and the checkers. It fails on any violation, any silo exit the nemesis
// did not cause and any problem (a cluster that did not recover, a queue that did not drain). The wiped data
// dir and the rolling restart, each longer than the whole run, are left to make chaos, and so
// are the skewed clock (a clock ahead holds the drain until the real time catches up), other
// zone rules, the split (five silos) and combined faults.
func TestChaosShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of silo processes for about two minutes")
	}
	seed := chaosSeed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	report, err := Run(ctx, t, RunConfig{Seed: seed, Duration: 75 * time.Second, Kinds: []FaultKind{FaultKill, FaultPause, FaultIsolate, FaultFailpoint},
		GapMin: 2 * time.Second, GapMax: 5 * time.Second, Quiet: 15 * time.Second, RequireNetcut: os.Getenv(NetcutRequiredEnv) == "1"})
	if report != nil {
		t.Log(report.ResultLine())
		for _, s := range report.Skipped {
			t.Logf("skipped %s", s)
		}
		for _, v := range report.Violations {
			t.Errorf("violation: %s", v)
		}
		for _, p := range report.Problems {
			t.Errorf("problem: %s", p)
		}
		for _, e := range report.ProcessExits {
			t.Errorf("silo %d (%s, pid %d) exited, not by the nemesis, at %v: %s\n%s", e.Silo, e.SiloID, e.PID, e.Time, e.Status, e.LogTail)
		}
		if len(report.Faults) < 3 {
			t.Errorf("%d faults injected, want at least 3", len(report.Faults))
		}
	}
	if err != nil {
		t.Fatalf("the run could not finish: %v", err)
	}
}
