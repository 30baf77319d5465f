// Command silo runs one Orrery silo. Every flag can also be set in the environment as
// ORRERY_<FLAG> (upper case, '-' as '_'); a flag on the command line wins.
//
//	silo --data ./data --host 127.0.0.1 --port 7381 --gossip-port 7382 --admin 127.0.0.1:7380
//	silo --data ./data --port 7391 --gossip-port 7392 --admin 127.0.0.1:7390 --seeds 127.0.0.1:7382
//
//	silo import --data ./data
//	silo certs --out ./certs --silos a,b,c --clients alice,bob
//
// Every silo of a cluster can take the same --seeds list; three silos with empty data dirs
// create one cluster together when each is started with --bootstrap-expect 3, and any silo
// restarted with the same flags rejoins it (a data dir of another cluster is refused):
//
//	silo --data ./data/1 --port 7381 --gossip-port 7382 --admin 127.0.0.1:7380 --bootstrap-expect 3 --seeds 127.0.0.1:7382,127.0.0.1:7392,127.0.0.1:7402
//
// A silo starts only with credentials, --admin-tokens-file and --gossip-key-file, or with
// --insecure-dev for development (make run, make cluster); its ready line says which
// (security=tokens+gossip-key+mtls or security=INSECURE-DEV).
//
// One silo uses a data root at a time. It prints one line "silo ready ..." with its ids and
// addresses once it serves: it has joined its cluster, its store is open and every partition
// answers (when it cannot join or they do not answer within --open-timeout, the store cannot
// be opened, or the cluster has retired this silo, it exits with status 2 and the error). It
// shuts down gracefully on SIGTERM or SIGINT (stop coordinating, stop the partitions, leave
// the cluster, close the store), and exits with status 1 if the cluster retires it (it was
// missing longer than --dead-after), removes it from every partition's Raft group, refuses it
// when it rejoins, or its partitions fail (a failed write or apply: the next start recovers
// from the store). A pause or a network cut shorter than --dead-after never ends the process:
// when the cluster no longer accepts the silo's member id, the silo rejoins in-process under a
// new one (orrery_member_rejoins_total counts it).
//
// The process tests arm faults through the environment of this binary, which alone reads it:
// ORRERY_FAILPOINT (a crash boundary, optionally only for a kind of command: due-entry-applied,
// expire-entry-applied; see package partition), ORRERY_RAFTNET_FAULTS and ORRERY_RAFTNET_FAULTS_FILE
// (Raft transport faults), ORRERY_DIVERGE (a replica that diverges on purpose),
// ORRERY_CLOCK_OFFSET (a signed duration such as +7m or -90s: the silo's wall clock, from which
// it stamps logged time and judges what is due, runs that far off the real time) and
// ORRERY_FREE_BYTES_FILE (a file whose byte count, while it exists, the silo takes for its
// disk's free space: 0 is a full disk); both for testing only, never in a deployment.
//
// silo import imports a data root of the old layout (cluster.json and one Badger database per
// partition, partitions/<n>/), which a silo refuses to start on, into the silo store
// (persistence.ImportPartitionStores), prints what it copied of each partition and exits; the
// old files stay, renamed to imported-cluster.json and imported-partitions/. Its flags are
// --data and --partitions (default: the count cluster.json records), from the environment too.
//
// silo certs writes a development CA (ca.pem, ca-key.pem) and one certificate and key per silo
// (silo-<name>.pem, silo-<name>-key.pem) and per client principal (client-<p>.pem,
// client-<p>-key.pem) into --out, valid for --valid-for (a year), for loopback and --hosts. A
// silo started with --tls-ca, --tls-cert and --tls-key secures its actor transport with mutual
// TLS: silos and clients must present certificates of that CA, and a client acts as the
// principal its certificate names (cluster/transportauth). The certificates are for
// development; a deployment issues its own from its own CA.
//
// It runs with the GOMAXPROCS Go chooses (or the GOMAXPROCS environment variable) unless
// --max-procs sets one (docs/benchmarks.md has the comparison that left it to Go), and with
// Go's garbage collector target at --gc-percent (DefaultGCPercent) unless GOGC is in the
// environment and --gc-percent is not given.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/cluster/raftnet"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/schedule/cron"
	"github.com/orreryhq/orrery/grains/schedule/zonerules"
	"github.com/orreryhq/orrery/partition"
	"github.com/orreryhq/orrery/silo"
)

func main() {
	if err := run(os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "silo:", err)
		os.Exit(2)
	}
}

func run(args []string, getenv func(string) string) error {
	if len(args) > 0 && args[0] == "import" {
		return runImport(args[1:], getenv, os.Stdout)
	}
	if len(args) > 0 && args[0] == "certs" {
		return runCerts(args[1:], getenv, os.Stdout)
	}
	opts, err := parseConfig(args, getenv)
	if err != nil {
		return err
	}
	cfg := opts.silo
	if opts.maxProcs > 0 {
		runtime.GOMAXPROCS(opts.maxProcs)
	}
	if opts.gcPercent > 0 {
		debug.SetGCPercent(opts.gcPercent)
	}
	if opts.cpuProfile != "" {
		stopProfile, err := startCPUProfile(opts.cpuProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	logger := newLogger(os.Stderr, opts.logFormat, opts.logLevel)
	cfg.Logger = logger
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s, err := silo.Start(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Printf("silo ready id=%s silo=%s cluster=%s actor=%s gossip=%s admin=%s data=%s partitions=%d security=%s zone_rules=%s cron_evaluator=%d\n",
		s.ID(), cluster.FormatID(s.SiloID()), cluster.FormatID(s.ClusterID()), s.ActorAddress(), s.GossipAddress(), s.AdminAddress(), cfg.DataDir, cfg.Partitions, s.Security(), zonerules.Version, cron.EvaluatorVersion)
	select {
	case <-ctx.Done():
		logger.Info("silo stopping (signal)")
		s.Stop()
		return nil
	case <-s.Done():
		logger.Error("silo stopped", "err", s.Err())
		os.Exit(1)
	}
	return nil
}

// DefaultGCPercent is the binary's garbage collection target (--gc-percent). Go's own, 100,
// lets the heap grow to twice the live heap between collections; a silo's live heap is
// mostly Badger's memtable arenas and table builders and its caches, so that doubling was
// most of its memory. At 50 the collector ran about twice as often, still a few percent of
// the CPU (docs/benchmarks.md).
const DefaultGCPercent = 50

// flagGiven reports whether the command line set flag name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// options are what the command line and environment configure.
type options struct {
	silo     silo.Config
	logLevel slog.Level
	// logFormat is "text" (slog's key=value lines) or "json" (one JSON object a line).
	logFormat string
	// maxProcs is the --max-procs value (see maxProcs).
	maxProcs int
	// gcPercent is the GC target the binary sets (debug.SetGCPercent); 0 leaves Go's.
	gcPercent int
	// cpuProfile is the --cpu-profile file ("": none).
	cpuProfile string
}

// startCPUProfile profiles the process's CPU into path until the returned stop, which writes
// the profile out.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpu-profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "silo: cpu-profile:", err)
		}
	}, nil
}

// parseConfig reads flags, falling back to ORRERY_<FLAG> environment variables.
func parseConfig(args []string, getenv func(string) string) (options, error) {
	fs := flag.NewFlagSet("silo", flag.ContinueOnError)
	var opts options
	cfg := &opts.silo
	var seeds, level, grantsFile, metricsSchedules string
	var adminTokensFile, gossipKeyFile string
	fs.StringVar(&cfg.DataDir, "data", silo.DefaultDataDir, "data root (the silo store, <data>/store)")
	fs.Uint64Var(&cfg.Store.MinFreeBytes, "min-free-bytes", silo.DefaultMinFreeBytes, "free-disk floor of the silo store: below it the silo refuses new commands and /readyz is 503 (0: the default)")
	fs.StringVar(&cfg.Host, "host", silo.DefaultHost, "address to bind and advertise (actor transport and gossip)")
	fs.IntVar(&cfg.Port, "port", silo.DefaultPort, "actor transport port (0: a free port)")
	fs.IntVar(&cfg.GossipPort, "gossip-port", silo.DefaultGossipPort, "memberlist gossip port (0: a free port)")
	fs.StringVar(&seeds, "seeds", "", "comma-separated gossip addresses of the cluster's silos, the same list for every silo (a silo ignores its own)")
	fs.IntVar(&cfg.BootstrapExpect, "bootstrap-expect", 0, "how many silos with empty data dirs create a new cluster together, the same on each of them "+
		"(0: 1 without --seeds; with --seeds only join an existing cluster)")
	fs.IntVar(&cfg.Partitions, "partitions", silo.DefaultPartitions, "partition count, fixed when the data root is created")
	fs.StringVar(&cfg.Admin, "admin", silo.DefaultAdmin, `admin HTTP address ("off" disables it)`)
	fs.StringVar(&cfg.ClusterName, "cluster", silo.DefaultClusterName, "cluster name")
	fs.IntVar(&cfg.Replicas, "replicas", silo.DefaultReplicas, "replicas of each partition once enough silos are live (1 to 7), the same on every silo")
	fs.StringVar(&cfg.FailureProfile, "failure-profile", silo.DefaultFailureProfile, "failure detection and election timing: loopback (silos on one host) or lan")
	fs.DurationVar(&cfg.DeadAfter, "dead-after", silo.DefaultDeadAfter, "how long a silo may be missing before its replicas are re-created on other silos")
	fs.DurationVar(&cfg.LateAfter, "late-after", silo.DefaultLateAfter, "liveness bound: a schedule due longer ago without an outcome, or a partition without a leader for longer, is reported (log, /metrics, inspection)")
	fs.DurationVar(&cfg.ConsistencyCheckEvery, "consistency-check-every", partition.DefaultCheckEvery, "how often each partition's leader compares its replicas' state checksums (0: never)")
	fs.DurationVar(&cfg.MaxClockOffset, "max-clock-offset", silo.DefaultMaxClockOffset, "bound on this silo's wall-clock offset from its peers': beyond it from a strict majority of the silos it sees, it hands over and takes no partition leadership and /readyz answers 503 (0: not checked, still measured)")
	fs.DurationVar(&cfg.OpenTimeout, "open-timeout", silo.DefaultOpenTimeout, "how long to wait for the partitions placed on this silo to open before exiting with their error")
	fs.StringVar(&metricsSchedules, "metrics-schedules", "", fmt.Sprintf("comma-separated schedule ids whose occurrences /metrics counts on their own, labelled schedule (at most %d)", silo.MaxMetricsSchedules))
	fs.StringVar(&cfg.OTLPEndpoint, "otlp-endpoint", "", `OTLP/HTTP collector receiving the silo's traces, host:port or an http(s) URL (path default /v1/traces); empty: no traces`)
	fs.StringVar(&level, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&opts.logFormat, "log-format", "text", "log format: text (key=value lines) or json (one object a line)")
	fs.StringVar(&opts.cpuProfile, "cpu-profile", "", "file to write a CPU profile (go tool pprof) of the silo's run to, from its start to a stop by SIGTERM or SIGINT; empty: none")
	fs.IntVar(&opts.maxProcs, "max-procs", 0, "GOMAXPROCS to run with (0: Go's choice, or the GOMAXPROCS environment variable)")
	fs.IntVar(&opts.gcPercent, "gc-percent", DefaultGCPercent, "garbage collection target, as GOGC: the heap grows this many percent over the live heap before a collection (0: Go's, GOGC from the environment or 100; GOGC in the environment wins over the default)")
	fs.BoolVar(&cfg.InsecureDev, "insecure-dev", false, "development mode: start without credentials; every capability on every namespace for the default client principal (anonymous) and the silo's own client")
	fs.StringVar(&cfg.TLSCA, "tls-ca", "", "PEM file of the cluster CA: mutual TLS on the actor transport (with --tls-cert and --tls-key; silo certs writes development ones)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM file of this silo's certificate, naming the silo (URI SAN orrery:silo:<name>)")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "PEM file of this silo's private key")
	fs.StringVar(&grantsFile, "grants-file", "", "JSON file of grants put on every partition at every start (silo.ParseGrants documents the format)")
	fs.StringVar(&adminTokensFile, "admin-tokens-file", "", "JSON file of the admin endpoint's bearer tokens, by SHA-256 hash, and their principals (silo.ParseAdminTokens documents the format)")
	fs.StringVar(&gossipKeyFile, "gossip-key-file", "", "file holding the gossip encryption key, 16, 24 or 32 bytes in hex or base64, the same on every silo and client (cluster.ParseSecretKey)")
	limits := limitFlags(fs, &cfg.Limits)
	if err := parseFlags(fs, args, getenv); err != nil {
		return opts, err
	}
	if err := limits.validate(); err != nil {
		return opts, err
	}
	if opts.maxProcs < 0 {
		return opts, fmt.Errorf("max-procs: must be at least 0 (0: Go's choice), got %d", opts.maxProcs)
	}
	if opts.gcPercent < 0 {
		return opts, fmt.Errorf("gc-percent: must be at least 0 (0: Go's), got %d", opts.gcPercent)
	}
	if getenv("GOGC") != "" && getenv("ORRERY_GC_PERCENT") == "" && !flagGiven(fs, "gc-percent") {
		opts.gcPercent = 0
	}
	if cfg.BootstrapExpect < 0 {
		return opts, fmt.Errorf("bootstrap-expect: must be at least 0, got %d", cfg.BootstrapExpect)
	}
	if cfg.Replicas < 1 || cfg.Replicas > 7 {
		return opts, fmt.Errorf("replicas: must be between 1 and 7, got %d", cfg.Replicas)
	}
	switch {
	case cfg.ConsistencyCheckEvery < 0:
		return opts, fmt.Errorf("consistency-check-every: must not be negative, got %v", cfg.ConsistencyCheckEvery)
	case cfg.ConsistencyCheckEvery == 0:
		cfg.ConsistencyCheckEvery = -1 // never
	}
	switch {
	case cfg.MaxClockOffset < 0:
		return opts, fmt.Errorf("max-clock-offset: must not be negative, got %v", cfg.MaxClockOffset)
	case cfg.MaxClockOffset == 0:
		cfg.MaxClockOffset = -1 // not checked
	}
	if cfg.DeadAfter <= 0 {
		return opts, fmt.Errorf("dead-after: must be positive, got %v", cfg.DeadAfter)
	}
	if cfg.LateAfter <= 0 {
		return opts, fmt.Errorf("late-after: must be positive, got %v", cfg.LateAfter)
	}
	if _, err := silo.FailureProfileNamed(cfg.FailureProfile); err != nil {
		return opts, err
	}
	for _, s := range strings.Split(seeds, ",") {
		if s = strings.TrimSpace(s); s != "" {
			cfg.Seeds = append(cfg.Seeds, s)
		}
	}
	if grantsFile != "" {
		data, err := os.ReadFile(grantsFile)
		if err != nil {
			return opts, fmt.Errorf("grants-file: %w", err)
		}
		if cfg.Grants, err = silo.ParseGrants(data); err != nil {
			return opts, fmt.Errorf("grants-file %s: %w", grantsFile, err)
		}
	}
	if err := readFlagFile("admin-tokens-file", adminTokensFile, func(data []byte) (err error) {
		cfg.AdminTokens, err = silo.ParseAdminTokens(data)
		return err
	}); err != nil {
		return opts, err
	}
	if err := readFlagFile("gossip-key-file", gossipKeyFile, func(data []byte) (err error) {
		cfg.GossipKey, err = cluster.ParseSecretKey(data)
		return err
	}); err != nil {
		return opts, err
	}
	for _, id := range strings.Split(metricsSchedules, ",") {
		if id = strings.TrimSpace(id); id != "" {
			cfg.MetricsSchedules = append(cfg.MetricsSchedules, id)
		}
	}
	if err := opts.logLevel.UnmarshalText([]byte(level)); err != nil {
		return opts, fmt.Errorf("log-level: %w", err)
	}
	if opts.logFormat != "text" && opts.logFormat != "json" {
		return opts, fmt.Errorf("log-format: must be text or json, got %q", opts.logFormat)
	}
	if err := armTestHooks(&opts.silo, getenv); err != nil {
		return opts, err
	}
	return opts, nil
}

// armTestHooks arms, from the process's environment, the faults the process tests inject into a
// real silo: a crash failpoint (partition.FailpointEnv), Raft transport faults
// (raftnet.FaultsEnv, and raftnet.FaultsFileEnv for a file followed while it runs), replicas
// that diverge on purpose (partition.DivergeEnv), a wall clock offset (clockOffsetEnv) and a
// free disk space read from a file (freeBytesFileEnv). Only this binary reads them: an embedded silo
// gets them through silo.Config, or not at all.
func armTestHooks(cfg *silo.Config, getenv func(string) string) error {
	fp, err := partition.ProcessFailpoints(getenv(partition.FailpointEnv))
	if err != nil {
		return err
	}
	cfg.Failpoints = fp
	if cfg.RaftFaults, err = raftnet.ParseFaults(getenv(raftnet.FaultsEnv)); err != nil {
		return err
	}
	cfg.RaftFaultsFile = getenv(raftnet.FaultsFileEnv)
	n, ok, err := partition.ParseDiverge(getenv(partition.DivergeEnv))
	if err != nil {
		return err
	}
	if ok {
		cfg.Diverge = append(cfg.Diverge, n)
	}
	offset, err := parseClockOffset(getenv(clockOffsetEnv))
	if err != nil {
		return err
	}
	if offset != 0 {
		cfg.Clock = offsetClock{base: clock.Real(), offset: offset}
	}
	if path := getenv(freeBytesFileEnv); path != "" {
		cfg.Store.FreeBytesFunc = freeBytesFrom(path)
	}
	return nil
}

// readFlagFile reads the file a flag names, when it names one, and hands its contents to
// parse; its errors name the flag and the file.
func readFlagFile(flag, path string, parse func(data []byte) error) error {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	if err := parse(data); err != nil {
		return fmt.Errorf("%s %s: %w", flag, path, err)
	}
	return nil
}

// newLogger logs to w at level in format ("json": slog's JSON handler; otherwise its text
// handler).
func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	handlerOpts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, handlerOpts))
	}
	return slog.New(slog.NewTextHandler(w, handlerOpts))
}

// parseFlags sets fs's flags from ORRERY_<FLAG> environment variables, then parses args, so
// explicit flags override the environment. Arguments after the flags are refused.
func parseFlags(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := "ORRERY_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(name); v != "" && envErr == nil {
			if err := f.Value.Set(v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	})
	if envErr != nil {
		return envErr
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}

// limitChecks validates the limit flags after parsing: each names its flag.
type limitChecks []func() error

func (c limitChecks) validate() error {
	for _, check := range c {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// limitFlags defines the flags of the limits an operator has a reason to change, defaulting
// to input.DefaultLimits(), and returns their checks. They are what this silo proposes to the
// partitions it leads (engine.Config.Limits); replicas apply under the partition's.
func limitFlags(fs *flag.FlagSet, lim *input.Limits) limitChecks {
	*lim = input.DefaultLimits()
	var checks limitChecks
	positive := func(name string, value func() int64) {
		checks = append(checks, func() error {
			if v := value(); v <= 0 {
				return fmt.Errorf("%s: must be positive, got %d", name, v)
			}
			return nil
		})
	}
	intFlag := func(name string, v *int, usage string) {
		fs.IntVar(v, name, *v, usage)
		positive(name, func() int64 { return int64(*v) })
	}
	uintFlag := func(name string, v *uint64, usage string) {
		fs.Uint64Var(v, name, *v, usage)
		positive(name, func() int64 { return int64(min(*v, 1<<62)) })
	}
	durationFlag := func(name string, v *int64, usage string) {
		fs.Var((*microsFlag)(v), name, usage)
		checks = append(checks, func() error {
			if *v < input.Second {
				return fmt.Errorf("%s: must be at least 1s, got %v", name, time.Duration(*v)*time.Microsecond)
			}
			return nil
		})
	}
	intFlag("max-payload-bytes", &lim.MaxPayloadBytes, "largest message payload (JSON bytes)")
	intFlag("max-headers-bytes", &lim.MaxHeadersBytes, "largest message headers (JSON bytes)")
	intFlag("max-state-bytes", &lim.MaxStateBytes, "largest saga state (JSON bytes)")
	uintFlag("max-lane-messages", &lim.MaxLaneMessages, "most live messages in one lane (quota)")
	uintFlag("max-lane-bytes", &lim.MaxLaneBytes, "most payload and header bytes in one lane (quota)")
	intFlag("max-mutations-per-batch", &lim.MaxMutationsPerBatch, "most mutations in one command")
	durationFlag("receipt-retention", &lim.ReceiptRetentionMicros, "how long a command's receipt is kept for replay")
	durationFlag("ledger-retention", &lim.LedgerRetentionMicros, "how long an occurrence ledger record is kept after its last write")
	durationFlag("audit-retention", &lim.AuditRetentionMicros, "how long an audit record (a grant change or a denial) is kept")
	durationFlag("tombstone-retention", &lim.TombstoneRetentionMicros, "how long an acked or expired message id stays taken")
	durationFlag("max-lease", &lim.MaxLeaseMicros, "longest lease a receive may ask for")
	fs.Var((*microsFlag)(&lim.PriorityStepMicros), "priority-step", "how much earlier a message of one priority more counts as visible to a receive: a lower priority waits at most 9 steps behind later higher ones; 0 is strict priority (a lower priority may starve); at most 24h")
	checks = append(checks, func() error {
		if err := input.PriorityStep("priority-step", lim.PriorityStepMicros); err != nil {
			return fmt.Errorf("priority-step: must be between 0 (strict priority) and 24h, got %v", time.Duration(lim.PriorityStepMicros)*time.Microsecond)
		}
		return nil
	})
	checks = append(checks, func() error {
		if lim.MaxLeaseMicros < lim.DefaultLeaseMicros {
			return fmt.Errorf("max-lease: must be at least the default lease %v, got %v",
				time.Duration(lim.DefaultLeaseMicros)*time.Microsecond, time.Duration(lim.MaxLeaseMicros)*time.Microsecond)
		}
		return nil
	})
	return checks
}

// microsFlag is a duration flag stored in microseconds.
type microsFlag int64

// String renders the duration.
func (m *microsFlag) String() string { return (time.Duration(*m) * time.Microsecond).String() }

// Set parses a Go duration ("24h", "90s").
func (m *microsFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return err
	}
	*m = microsFlag(d.Microseconds())
	return nil
}
