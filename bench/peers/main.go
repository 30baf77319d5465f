package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

// side is one of the two systems compared: it runs one workload once, on a fresh server, and
// returns its figures and a progress detail.
type side interface {
	name() string
	run(ctx context.Context, workload string, run int, cfg workloadConfig) (metrics, string, error)
}

func main() {
	var (
		cfg       workloadConfig
		runs      int
		workloads string
		root      string
		siloArgs  string
		profiles  string
		sideNames string
		verbose   bool
	)
	flag.IntVar(&runs, "runs", 2, "runs of each workload on each side (the table shows their median, min and max)")
	flag.StringVar(&workloads, "workloads", "A,B,C", "comma-separated workloads to run: A (one-shot timers), B (closed-loop consume), C (burst of recurring schedules)")
	flag.StringVar(&root, "root", "../..", "the Orrery repository whose cmd/silo is built")
	flag.IntVar(&cfg.handlers, "handlers", 100, "handlers (concurrent workers) on each side")
	flag.IntVar(&cfg.timers, "timers", 10_000, "A: one-shot timers")
	flag.DurationVar(&cfg.spread, "spread", 20*time.Second, "A: the timers' due instants spread evenly over this")
	flag.DurationVar(&cfg.lead, "lead", 6*time.Second, "A, C: from the start of creating the timers or schedules to the first due instant (more than River's 5 s scheduler look-ahead)")
	flag.DurationVar(&cfg.grace, "grace", 15*time.Second, "A, C: how long after the last due instant an unhandled occurrence is waited for before it counts as missing")
	flag.IntVar(&cfg.backlog, "backlog", 5_000, "B: the most messages enqueued and not yet completed")
	flag.DurationVar(&cfg.warmup, "warmup", 5*time.Second, "B: warm-up before the window")
	flag.DurationVar(&cfg.window, "window", 20*time.Second, "B: the window completions are counted over")
	flag.IntVar(&cfg.schedules, "schedules", 1_000, "C: recurring schedules, every 1 s")
	flag.IntVar(&cfg.seconds, "seconds", 10, "C: seconds of occurrences measured")
	flag.StringVar(&siloArgs, "silo-args", "", "extra flags for the silo, space-separated (\"--max-procs=8\" runs it with GOMAXPROCS 8)")
	flag.StringVar(&profiles, "cpu-profile", "", "directory to write a CPU profile of each Orrery run's silo to (orrery-<workload>-<run>.pprof; the silo is then stopped by SIGTERM, not killed)")
	flag.StringVar(&sideNames, "sides", "orrery,river", "comma-separated sides to run: orrery, river (one side alone is for iterating on it; the table then has no ratios)")
	flag.BoolVar(&verbose, "v", false, "log the clients' lines (Orrery's client, River's) to stderr")
	flag.Parse()
	if verbose {
		clientLog = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}

	var list []string
	for w := range strings.SplitSeq(workloads, ",") {
		w = strings.ToUpper(strings.TrimSpace(w))
		if w != "A" && w != "B" && w != "C" {
			fmt.Fprintf(os.Stderr, "peers: -workloads: unknown workload %q (A, B or C)\n", w)
			os.Exit(2)
		}
		list = append(list, w)
	}
	on := map[string]bool{}
	for n := range strings.SplitSeq(sideNames, ",") {
		n = strings.ToLower(strings.TrimSpace(n))
		if n != "orrery" && n != "river" {
			fmt.Fprintf(os.Stderr, "peers: -sides: unknown side %q (orrery or river)\n", n)
			os.Exit(2)
		}
		on[n] = true
	}
	if runs < 1 || cfg.handlers < 1 || cfg.timers < 1 || cfg.schedules < 1 || cfg.seconds < 1 || cfg.backlog < 100 || cfg.window <= 0 {
		fmt.Fprintln(os.Stderr, "peers: -runs, -handlers, -timers, -schedules, -seconds and -window must be positive, -backlog at least 100")
		os.Exit(2)
	}

	// Every server is stopped on the way out: at the end, on a failure, and on SIGINT or
	// SIGTERM (a second signal, or 30 s without the run unwinding, stops them at once).
	reg := &cleanups{}
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-signals
		fmt.Fprintf(os.Stderr, "peers: %v: stopping\n", sig)
		cancel()
		select {
		case <-signals:
		case <-time.After(30 * time.Second):
		}
		reg.runAll()
		os.Exit(130)
	}()
	err := run(ctx, reg, list, on, runs, root, strings.Fields(siloArgs), profiles, cfg)
	reg.runAll()
	switch {
	case ctx.Err() != nil:
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

// run prepares the sides that are on, runs every workload runs times on each, and prints the
// table.
func run(ctx context.Context, reg *cleanups, workloads []string, on map[string]bool, runs int, root string, siloArgs []string, profiles string, cfg workloadConfig) error {
	var binDir string
	if on["river"] {
		var err error
		if binDir, err = ensurePostgres(ctx); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp("", "orrery-peers-")
	if err != nil {
		return err
	}
	reg.add(func() { os.RemoveAll(tmp) })
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	binary := filepath.Join(tmp, "silo")
	fmt.Fprintf(os.Stderr, "peers: building the silo from %s\n", absRoot)
	if err := buildSilo(ctx, absRoot, binary); err != nil {
		return err
	}
	if profiles != "" {
		if profiles, err = filepath.Abs(profiles); err == nil {
			err = os.MkdirAll(profiles, 0o755)
		}
		if err != nil {
			return fmt.Errorf("-cpu-profile: %w", err)
		}
	}
	orrery := &orrerySide{binary: binary, args: siloArgs, profiles: profiles, reg: reg}
	riverS := &riverSide{binDir: binDir, reg: reg}
	res := results{}
	began := time.Now()
	for r := 1; r <= runs; r++ {
		for _, w := range workloads {
			// The sides take turns going first, so neither always runs on a machine the other
			// has just warmed (page cache, CPU frequency).
			sides := []side{orrery, riverS}
			if r%2 == 0 {
				sides = []side{riverS, orrery}
			}
			for _, s := range sides {
				if !on[strings.ToLower(s.name())] {
					continue
				}
				start := time.Now()
				m, note, err := s.run(ctx, w, r, cfg)
				if err != nil {
					return fmt.Errorf("run %d, workload %s, %s: %w", r, w, s.name(), err)
				}
				res[s.name()] = append(res[s.name()], m)
				fmt.Fprintf(os.Stderr, "peers: run %d/%d %s %-6s %s (%v)\n", r, runs, w, s.name(), note, time.Since(start).Round(time.Second))
			}
		}
	}
	fmt.Fprintf(os.Stderr, "peers: done in %v\n", time.Since(began).Round(time.Second))

	settings := "on its defaults"
	if len(siloArgs) > 0 {
		settings = "with " + strings.Join(siloArgs, " ")
	}
	beside := "alone"
	if on["river"] {
		beside = fmt.Sprintf("beside River %s (%s)", moduleVersion("github.com/riverqueue/river"), riverS.settings)
	}
	fmt.Printf("Orrery (one silo process %s) %s, %d run(s) of workloads %s, %d handlers a side, %d CPUs.\n\n",
		settings, beside, runs, strings.Join(workloads, ", "), cfg.handlers, runtime.NumCPU())
	writeTable(os.Stdout, res, orrery.name(), riverS.name())
	fmt.Println()
	fmt.Println("Asynq: not measured; its module on this machine's module proxy is not an approved release.")
	return nil
}

// moduleVersion is the version of module path this binary was built with.
func moduleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == path {
				return dep.Version
			}
		}
	}
	return "(unknown version)"
}
