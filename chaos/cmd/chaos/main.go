// Command chaos runs a cluster of real silo processes on loopback under a seeded nemesis, with
// a workload through the Go client, and checks the recorded history: make chaos DURATION=10m
// SEED=42 SILOS=5. It prints the seed first, each fault with its UTC timestamps, a JSON report's
// path, and last a CHAOS RESULT line; it exits 1 on any violation (printing the command that
// runs the seed again), 2 when the run could not finish. Every silo it started is stopped, and
// every cgroup and nftables table it made removed, on exit, on failure and on SIGINT.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/orreryhq/orrery/chaos"
)

func main() { os.Exit(run()) }

func run() int {
	var (
		duration      = flag.Duration("duration", 5*time.Minute, "how long faults are injected")
		seedFlag      = flag.String("seed", "", "the seed of every random choice (decimal uint64; empty: a random one)")
		silos         = flag.Int("silos", 3, "how many silos the cluster has")
		partitions    = flag.Int("partitions", 8, "the cluster's partition count")
		kindsFlag     = flag.String("kinds", "", "comma-separated fault kinds to inject (empty: all): "+kindNames())
		requireNetcut = flag.Bool("require-netcut", false, "fail when this machine cannot isolate a silo's network traffic (root, cgroup v2, nft) instead of skipping that kind of fault")
		reportPath    = flag.String("report", "", "where to write the JSON report (empty: report.json in the run's directory)")
		keepData      = flag.Bool("keep-data", false, "keep the silos' data dirs in the run's directory after the run")
		gapMin        = flag.Duration("gap-min", 5*time.Second, "shortest recovery gap between one fault's recovery and the next")
		gapMax        = flag.Duration("gap-max", 15*time.Second, "longest recovery gap (at least -gap-min)")
		checkEvery    = flag.Duration("consistency-check-every", 5*time.Second, "the silos' --consistency-check-every: how often each partition's leader compares its replicas' checksums during the run (each divergence found is a violation)")
	)
	flag.Parse()
	seed := rand.Uint64()
	if *seedFlag != "" {
		var err error
		if seed, err = strconv.ParseUint(*seedFlag, 10, 64); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: -seed %q: %v\n", *seedFlag, err)
			return 2
		}
	}
	if *checkEvery <= 0 {
		fmt.Fprintf(os.Stderr, "chaos: -consistency-check-every %v: want a positive period\n", *checkEvery)
		return 2
	}
	if *gapMin <= 0 || *gapMax < *gapMin {
		fmt.Fprintf(os.Stderr, "chaos: -gap-min %v, -gap-max %v: want 0 < gap-min <= gap-max\n", *gapMin, *gapMax)
		return 2
	}
	fmt.Printf("seed %d\n", seed)
	var kinds []chaos.FaultKind
	if *kindsFlag != "" {
		for name := range strings.SplitSeq(*kindsFlag, ",") {
			kind := chaos.FaultKind(strings.TrimSpace(name))
			if !isKind(kind) {
				fmt.Fprintf(os.Stderr, "chaos: -kinds: no fault kind %q (kinds: %s)\n", kind, kindNames())
				return 2
			}
			kinds = append(kinds, kind)
		}
	}
	dir, err := os.MkdirTemp("", fmt.Sprintf("orrery-chaos-%d-", seed))
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		return 2
	}
	if *reportPath == "" {
		*reportPath = filepath.Join(dir, "report.json")
	}
	fmt.Printf("run directory %s (silo logs, history, report)\n", dir)

	s := &session{dir: dir, keep: *keepData}
	defer s.close()
	// The silos run in process groups of their own, so a SIGINT at the terminal reaches only
	// this process: the first ends the run (the silos are stopped, the verdict printed), a
	// second stops the silos at once and exits.
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-signals
		fmt.Fprintln(os.Stderr, "chaos: interrupted; ending the run and stopping the silos (again to stop them at once)")
		interrupt()
		<-signals
		s.close()
		os.Exit(130)
	}()

	cfg := chaos.RunConfig{Seed: seed, Silos: *silos, Partitions: *partitions, Duration: *duration, Kinds: kinds, GapMin: *gapMin, GapMax: *gapMax,
		RequireNetcut: *requireNetcut, CheckEvery: *checkEvery, LogDir: dir, Logf: s.Logf}
	report, runErr := runChaos(ctx, s, cfg)
	s.close() // the silos are stopped and the cgroups removed before the verdict
	if report == nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\nreproduce: %s\n", runErr, chaos.ReproduceCommand(seed, *duration, *silos))
		return 2
	}
	if data, err := json.MarshalIndent(report, "", "  "); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: report: %v\n", err)
	} else if err := os.WriteFile(*reportPath, append(data, '\n'), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: report: %v\n", err)
	}
	for _, skipped := range report.Skipped {
		fmt.Printf("skipped %s\n", skipped)
	}
	for _, v := range report.Violations {
		fmt.Printf("VIOLATION %s\n", v)
	}
	for _, p := range report.Problems {
		fmt.Printf("PROBLEM %s\n", p)
	}
	for _, e := range report.ProcessExits {
		fmt.Printf("PROCESS EXIT %s silo %d (%s, pid %d): %s\n", e.Time.Format(time.RFC3339Nano), e.Silo, e.SiloID, e.PID, e.Status)
	}
	fmt.Printf("%d faults; checked: %s; not yet built: %s\n", len(report.Faults), strings.Join(report.Checked, ", "), strings.Join(report.NotChecked, ", "))
	fmt.Printf("report %s\n", *reportPath)
	code := 0
	switch {
	case ctx.Err() != nil:
		fmt.Printf("the run was interrupted: %v\n", runErr)
		code = 130
	case runErr != nil:
		fmt.Printf("the run could not finish: %v\n", runErr)
		code = 2
	case report.Failed() || s.failed:
		code = 1
	}
	if code != 0 {
		fmt.Printf("reproduce: %s\n", report.Reproduce)
	}
	if !report.Complete {
		if runErr == nil {
			runErr = errors.New("stopped before its checkers")
		}
		fmt.Println(report.IncompleteLine(runErr))
		return max(code, 2)
	}
	fmt.Println(report.ResultLine())
	return code
}

// runChaos runs chaos.Run, turning a Fatal of the session into an error.
func runChaos(ctx context.Context, s *session, cfg chaos.RunConfig) (report *chaos.Report, err error) {
	defer func() {
		if v := recover(); v != nil {
			f, ok := v.(fatal)
			if !ok {
				panic(v)
			}
			err = errors.New(string(f))
		}
	}()
	return chaos.Run(ctx, s, cfg)
}

func isKind(kind chaos.FaultKind) bool {
	for _, k := range chaos.AllFaultKinds {
		if k == kind {
			return true
		}
	}
	return false
}

func kindNames() string {
	names := make([]string, len(chaos.AllFaultKinds))
	for i, k := range chaos.AllFaultKinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}
