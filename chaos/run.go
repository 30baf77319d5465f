package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/orreryhq/orrery/client"
)

// RunConfig configures Run. Zero fields take their defaults.
type RunConfig struct {
	// Seed draws every random choice of the run: the fault kinds' order, each fault's target
	// (by role: the leader of which partition, or which silo), how long it is held, the gaps
	// between faults, and the workload's choices. Timing is not replayed: the same seed makes
	// the same choices, not the same interleaving.
	Seed uint64
	// Silos is how many silos the cluster has (default 3); Partitions its partition count
	// (default 8); Replicas how many replicas each partition has (default 3).
	Silos, Partitions, Replicas int
	// Duration is how long faults are injected (default 5 min); a fault begun before its end is
	// carried to its end.
	Duration time.Duration
	// Kinds are the kinds of fault injected (default AllFaultKinds).
	Kinds []FaultKind
	// RequireNetcut makes a machine that cannot isolate a silo an error; otherwise FaultIsolate
	// is skipped there, and the report says why.
	RequireNetcut bool
	// GapMin and GapMax bound the recovery gap between faults (default 5 s and 15 s).
	GapMin, GapMax time.Duration
	// RecoveryTimeout bounds the wait for the cluster to be whole again after a fault (default
	// 2 min); past it the run records a problem.
	RecoveryTimeout time.Duration
	// DeadAfter is the silos' --dead-after (default 30 s): a killed, paused or isolated silo
	// comes back well within it, a wiped one is removed after it.
	DeadAfter time.Duration
	// Quiet is how long the healed cluster runs before the schedules are cancelled and the
	// history closed (default 20 s).
	Quiet time.Duration
	// RecoveryBound: a timer due within it of the history's end need not have been delivered
	// (default 20 s).
	RecoveryBound time.Duration
	// Logf receives the run's log lines (default t.Logf).
	Logf func(format string, args ...any)
	// CheckEvery is the silos' --consistency-check-every (default 5 s): how often each
	// partition's leader compares its replicas' state checksums while faults go on. The run
	// counts every divergence such a check found (loggedInconsistencies) besides the check
	// after healing.
	CheckEvery time.Duration
	// LogDir, when set, receives every silo process's log (silo-<n>-pid<pid>.log, n counting
	// the processes in the order they started) and the history (history.jsonl) at the end.
	LogDir string
}

// withDefaults fills the zero fields.
func (c RunConfig) withDefaults(t TB) RunConfig {
	if c.Silos == 0 {
		c.Silos = 3
	}
	if c.Partitions == 0 {
		c.Partitions = 8
	}
	if c.Replicas == 0 {
		c.Replicas = 3
	}
	if c.Duration == 0 {
		c.Duration = 5 * time.Minute
	}
	if len(c.Kinds) == 0 {
		c.Kinds = AllFaultKinds
	}
	if c.GapMin == 0 {
		c.GapMin = 5 * time.Second
	}
	if c.GapMax == 0 {
		c.GapMax = 15 * time.Second
	}
	if c.RecoveryTimeout == 0 {
		c.RecoveryTimeout = 2 * time.Minute
	}
	if c.DeadAfter == 0 {
		c.DeadAfter = 30 * time.Second
	}
	if c.Quiet == 0 {
		c.Quiet = 20 * time.Second
	}
	if c.RecoveryBound == 0 {
		c.RecoveryBound = 20 * time.Second
	}
	if c.CheckEvery == 0 {
		c.CheckEvery = 5 * time.Second
	}
	if c.Logf == nil {
		c.Logf = t.Logf
	}
	return c
}

// Counts are a run's figures, as its CHAOS RESULT line prints them.
type Counts struct {
	Kills  int `json:"kills"`
	Pauses int `json:"pauses"`
	// Partitions counts the network partitions: a silo isolated from all, and 2/3 splits
	// (Splits counts those alone).
	Partitions      int `json:"partitions"`
	Splits          int `json:"splits"`
	Wipes           int `json:"wipes"`
	RollingRestarts int `json:"rolling_restarts"`
	// Skews counts the silos run with their wall clock offset, Failpoints the silos run with a
	// crash failpoint armed, ZoneRules the silos run with other time-zone rules, Combined the
	// faults of several at once (each also counted by its own kind).
	Skews      int `json:"skews"`
	Failpoints int `json:"failpoints"`
	ZoneRules  int `json:"zone_rules"`
	Combined   int `json:"combined"`
	// FullDisks counts the silos whose disk was filled (FaultFullDisk).
	FullDisks int `json:"full_disks"`
	// Ops counts the workload's calls (schedule changes, timers, enqueues, receives that
	// never ack, saga calls, replays), OpsFailed those that returned an error.
	Ops       int64 `json:"ops"`
	OpsFailed int64 `json:"ops_failed"`
	// Occurrences counts the occurrence ids delivered, Redelivered the ids delivered more than
	// once (expired leases, released messages, lost acks).
	Occurrences int `json:"occurrences"`
	Redelivered int `json:"redelivered"`
	// Timers counts the At timers whose creation returned success, TimersUnconfirmed those
	// whose creation did not (not required to fire); Enqueued the enqueues that returned
	// success.
	Timers            int    `json:"timers"`
	TimersUnconfirmed int    `json:"timers_unconfirmed"`
	Enqueued          int    `json:"enqueued"`
	DeadLettered      uint64 `json:"dead_lettered"`
	// Sagas counts the sagas started, SagaOps their calls (reads included), SagaUnknown the
	// calls whose outcome is unknown, SagaTimeouts the distinct timeout messages delivered;
	// Replays the commands sent again under their command id, ReplaysCompared those whose
	// replay was answered.
	Sagas           int `json:"sagas"`
	SagaOps         int `json:"saga_ops"`
	SagaUnknown     int `json:"saga_unknown_outcomes"`
	SagaTimeouts    int `json:"saga_timeouts"`
	Replays         int `json:"replays"`
	ReplaysCompared int `json:"replays_compared"`
	// ScheduleOps counts the workload's schedule calls at an expected revision and reads of a
	// schedule's revision, ScheduleUnknown those whose outcome is unknown.
	ScheduleOps     int `json:"schedule_ops"`
	ScheduleUnknown int `json:"schedule_unknown_outcomes"`
	Duplicates      int `json:"duplicates"`
	Gaps            int `json:"gaps"`
	// Lost and Early count saga timeouts too: a TimedOut saga whose timeout message never
	// came, a saga left Waiting long after its deadline; a timeout enqueued before its deadline.
	Lost  int `json:"lost"`
	Early int `json:"early"`
	// DoubleTimeouts counts saga timeouts the saga contract rules out (checkSagaTimeouts);
	// ReceiptMismatches the replayed commands not answered with the first receipt's bytes.
	DoubleTimeouts    int `json:"double_timeouts"`
	ReceiptMismatches int `json:"receipt_mismatches"`
	// Linearizable says whether every saga's history of CAS calls, reads and expiries and every
	// schedule's history of compare-and-sets and reads was found linearizable; null when the
	// check did not run or could not decide (Report.Linearizability says which histories).
	Linearizable *bool `json:"linearizable"`
	// Inconsistencies counts the divergences found: each replica a periodic consistency check
	// found divergent at an index while the run went on (a partition's leader logged it), and
	// each partition whose replicas' checksums differed at the check after healing.
	Inconsistencies int `json:"inconsistencies"`
	// TwoLeaders counts the (partition, term) pairs in which the sampled replica views named
	// two different leaders (checkOneLeaderPerTerm); LoggedTimeBackward the sampled
	// partition statuses whose logged time was below one at a lower applied index
	// (checkLoggedTimeNeverDecreases).
	TwoLeaders         int `json:"two_leaders"`
	LoggedTimeBackward int `json:"logged_time_backward"`
	// RaftTablesRead counts the partition tables the Raft sampler read during the run,
	// RaftTablesFailed its reads that failed (a silo down, paused or isolated); LeaderClaims
	// the sampled replica views that claimed to lead, LeaderTerms the (partition, term) pairs
	// some view named a leader of, StatusMarks the partition statuses (applied index and
	// logged time) sampled.
	RaftTablesRead   int `json:"raft_tables_read"`
	RaftTablesFailed int `json:"raft_tables_failed"`
	LeaderClaims     int `json:"leader_claims"`
	LeaderTerms      int `json:"leader_terms"`
	StatusMarks      int `json:"status_marks"`
	// MaxLatenessMS is the largest enqueue time minus nominal instant of an occurrence of a
	// schedule never paused, or of a timer.
	MaxLatenessMS int64 `json:"max_lateness_ms"`
	// UnavailableS is the longest time a partition went without a successful enqueue (less
	// the probes' 1 s period).
	UnavailableS float64 `json:"unavailable_s"`
	// ProcessExits counts silo exits the nemesis did not cause.
	ProcessExits int `json:"process_exits"`
}

// Report is what a run found.
type Report struct {
	Seed       uint64 `json:"seed"`
	Silos      int    `json:"silos"`
	Partitions int    `json:"partitions"`
	Replicas   int    `json:"replicas"`
	Duration   string `json:"duration"`
	// Reproduce is the command that runs the same seed again.
	Reproduce string    `json:"reproduce"`
	Started   time.Time `json:"started"`
	Ended     time.Time `json:"ended"`
	// Kinds are the kinds of fault the run injected from; Skipped the kinds it could not, and
	// why.
	Kinds   []FaultKind `json:"kinds"`
	Skipped []string    `json:"skipped,omitempty"`
	Faults  []Fault     `json:"faults"`
	Counts  Counts      `json:"counts"`
	// ClockAheadS is how far ahead of the real time, in seconds, a leader's clock may have run
	// (FaultSkew: the bound --max-clock-offset when the skewed silo was clock-unfit, its whole
	// offset when it was not judged, in combined): the early checker allows receiving an
	// occurrence that long before its nominal instant.
	ClockAheadS float64 `json:"clock_ahead_s"`
	// Checked names the checkers that ran; NotChecked those of issue 37 not built yet.
	Checked    []string `json:"checked"`
	NotChecked []string `json:"not_checked"`
	// Linearizability is what the linearizability check covered: one entry per kind of
	// history (sagas, schedules).
	Linearizability []HistoriesChecked `json:"linearizability"`
	// Violations describes each violation the checkers found; Problems what else went wrong
	// (a cluster that did not recover, a queue that did not drain).
	Violations   []string      `json:"violations"`
	Problems     []string      `json:"problems"`
	ProcessExits []ProcessExit `json:"process_exits"`
	// Complete is set when the run got as far as its checkers; a run interrupted or stopped
	// before has counts of what it did, but no verdict.
	Complete bool `json:"complete"`
}

// HistoriesChecked is what the linearizability check found over one kind of history.
type HistoriesChecked struct {
	// Kind is saga or schedule; Histories counts the records checked (each its own history),
	// Operations their operations (a saga's inferred expiries included, reads of unknown
	// outcome left out).
	Kind       string `json:"kind"`
	Histories  int    `json:"histories"`
	Operations int    `json:"operations"`
	// Illegal counts the histories found not linearizable (each a violation), Undecided those
	// porcupine could not decide within its budget (each a problem).
	Illegal   int `json:"illegal"`
	Undecided int `json:"undecided"`
}

// Checkers a run has.
var (
	checkedByRun = []string{"duplicates", "gaps", "early", "lost", "max_lateness", "unavailable", "double_timeouts",
		"receipt_mismatches",
		"linearizable (porcupine over each saga's CAS calls, reads and expiries, and each schedule's compare-and-sets and reads)",
		"inconsistencies (every periodic consistency check while faults go on, and one after healing)",
		"two_leaders (replica views sampled from every live silo every 500 ms)",
		"logged_time_backward (partition statuses sampled from every live silo every 500 ms)", "process_exits"}
	notCheckedYet = []string{}
)

// Failed reports whether the run found a violation, a silo exit it did not cause, or a
// problem.
func (r *Report) Failed() bool {
	return len(r.Violations) > 0 || r.Counts.Inconsistencies > 0 || r.Counts.ProcessExits > 0 || len(r.Problems) > 0
}

// IncompleteLine is the last line of a run that did not get as far as its checkers: what it
// injected, and why it stopped.
func (r *Report) IncompleteLine(reason error) string {
	c := r.Counts
	return fmt.Sprintf("CHAOS INCOMPLETE seed=%d silos=%d kills=%d pauses=%d partitions=%d wipes=%d skews=%d failpoints=%d process_exits=%d: %v",
		r.Seed, r.Silos, c.Kills, c.Pauses, c.Partitions, c.Wipes, c.Skews, c.Failpoints, c.ProcessExits, reason)
}

// ResultLine is the run's one-line verdict; linearizable reads unknown when the check could
// not decide. partitions counts isolations and splits; zone_rules, splits, combined and
// full_disks follow failpoints.
func (r *Report) ResultLine() string {
	c := r.Counts
	linearizable := "unknown"
	if c.Linearizable != nil {
		linearizable = fmt.Sprint(*c.Linearizable)
	}
	return fmt.Sprintf("CHAOS RESULT seed=%d silos=%d kills=%d pauses=%d partitions=%d wipes=%d skews=%d failpoints=%d zone_rules=%d splits=%d combined=%d full_disks=%d ops=%d occurrences=%d "+
		"duplicates=%d gaps=%d lost=%d early=%d double_timeouts=%d receipt_mismatches=%d inconsistencies=%d two_leaders=%d "+
		"logged_time_backward=%d linearizable=%s max_lateness_ms=%d unavailable_s=%.1f process_exits=%d",
		r.Seed, r.Silos, c.Kills, c.Pauses, c.Partitions, c.Wipes, c.Skews, c.Failpoints, c.ZoneRules, c.Splits, c.Combined, c.FullDisks, c.Ops, c.Occurrences,
		c.Duplicates, c.Gaps, c.Lost, c.Early, c.DoubleTimeouts, c.ReceiptMismatches, c.Inconsistencies, c.TwoLeaders,
		c.LoggedTimeBackward, linearizable,
		c.MaxLatenessMS, c.UnavailableS, c.ProcessExits)
}

// ReproduceCommand is the make command that runs seed again with the same duration and silos.
func ReproduceCommand(seed uint64, duration time.Duration, silos int) string {
	return fmt.Sprintf("make chaos SEED=%d DURATION=%s SILOS=%d", seed, shortDuration(duration), silos)
}

// shortDuration renders d without trailing zero units: 10m, 1h30m, 90s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Run starts a cluster of real silo processes (each stopped through t.Cleanup), runs a
// workload against it through the Go client while a seeded nemesis injects one fault at a
// time, heals the cluster, lets it run quiet, closes the history and checks it. The report is
// returned whatever was found; the error says why the run could not finish (its report is then
// partial).
func Run(ctx context.Context, t TB, cfg RunConfig) (*Report, error) {
	t.Helper()
	cfg = cfg.withDefaults(t)
	logf := func(format string, args ...any) {
		cfg.Logf("%s "+format, append([]any{stamp(time.Now())}, args...)...)
	}
	r := &Report{Seed: cfg.Seed, Silos: cfg.Silos, Partitions: cfg.Partitions, Replicas: cfg.Replicas, Duration: shortDuration(cfg.Duration),
		Reproduce: ReproduceCommand(cfg.Seed, cfg.Duration, cfg.Silos), Started: time.Now().UTC(),
		Checked: checkedByRun, NotChecked: notCheckedYet, Violations: []string{}, Problems: []string{}, ProcessExits: []ProcessExit{}}
	defer func() { r.Ended = time.Now().UTC() }()
	kinds := slices.Clone(cfg.Kinds)
	skip := func(kind FaultKind, why string) {
		kinds = slices.DeleteFunc(kinds, func(k FaultKind) bool { return k == kind })
		r.Skipped = append(r.Skipped, fmt.Sprintf("%s: %s", kind, why))
		logf("SKIPPED fault kind %s: %s", kind, why)
	}
	if slices.Contains(kinds, FaultSplit) && cfg.Silos < 5 {
		skip(FaultSplit, fmt.Sprintf("a 2/3 split needs at least 5 silos, the run has %d", cfg.Silos))
	}
	for _, kind := range []FaultKind{FaultIsolate, FaultSplit} {
		if !slices.Contains(kinds, kind) {
			continue
		}
		if err := NetcutAvailable(); err != nil {
			if cfg.RequireNetcut {
				return r, fmt.Errorf("this machine cannot isolate a silo: %w", err)
			}
			skip(kind, fmt.Sprintf("this machine cannot isolate a silo: %v", err))
		}
	}
	if len(kinds) == 0 {
		return r, errors.New("no kind of fault left to inject")
	}
	r.Kinds = kinds

	logf("seed %d: starting %d silos, %d partitions, %d replicas each", cfg.Seed, cfg.Silos, cfg.Partitions, cfg.Replicas)
	cl := StartCluster(t, cfg.Silos, SiloSpec{Partitions: cfg.Partitions, Replicas: cfg.Replicas, DeadAfter: cfg.DeadAfter,
		Isolatable: slices.Contains(kinds, FaultIsolate) || slices.Contains(kinds, FaultSplit),
		Args:       []string{fmt.Sprintf("--consistency-check-every=%v", cfg.CheckEvery)}})
	for i, p := range cl.Silos {
		logf("silo %d: id %s, pid %d, gossip %s, admin %s, data %s", i, p.SiloID(), p.PID(), p.GossipAddress(), p.AdminAddress(), p.Spec.DataDir)
	}
	nem := newNemesis(t, cl, cfg.Seed, kinds, nemesisTimings{GapMin: cfg.GapMin, GapMax: cfg.GapMax,
		RecoveryTimeout: cfg.RecoveryTimeout, DeadAfter: cfg.DeadAfter}, logf)
	defer func() {
		nem.halt()
		r.Faults = nem.faults
		counts := nem.counts()
		r.Counts.Kills, r.Counts.Pauses, r.Counts.Partitions = counts[FaultKill], counts[FaultPause], counts[FaultIsolate]+counts[FaultSplit]
		r.Counts.Splits, r.Counts.Combined, r.Counts.FullDisks = counts[FaultSplit], counts[FaultCombined], counts[FaultFullDisk]
		r.Counts.Wipes, r.Counts.RollingRestarts, r.Counts.Failpoints = counts[FaultWipe], counts[FaultRollingRestart], counts[FaultFailpoint]
		r.Counts.Skews, r.Counts.ZoneRules = counts[FaultSkew], counts[FaultZoneRules]
		r.ClockAheadS = nem.clockAhead().by.Seconds()
		r.ProcessExits = nem.processExits()
		r.Counts.ProcessExits = len(r.ProcessExits)
		r.Problems = append(r.Problems, nem.problems...)
		if cfg.LogDir != "" {
			if err := writeSiloLogs(cfg.LogDir, nem.processes()); err != nil {
				logf("silo logs: %v", err)
			}
		}
	}()
	if err := nem.awaitWhole(ctx, "the cluster's start"); err != nil {
		return r, err
	}
	sampler := startRaftSampler(nem.liveAdminAddresses, raftSampleInterval, raftSampleTimeout)
	samplerStopped := false
	defer func() {
		if !samplerStopped {
			sampler.stopSampling()
		}
	}()

	dialCtx, cancel := context.WithTimeout(ctx, time.Minute)
	c, err := client.Dial(dialCtx, client.DialConfig{Seeds: cl.Seeds(), Options: client.Options{Logger: slog.New(slog.DiscardHandler)}})
	cancel()
	if err != nil {
		return r, fmt.Errorf("dial the cluster: %w", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	nem.probe = c
	w, err := startWorkload(ctx, c, cfg.Seed, logf)
	if err != nil {
		return r, err
	}
	t.Cleanup(w.workerStop)
	defer w.stopLoad()
	defer func() {
		r.Counts.Ops, r.Counts.OpsFailed = w.ops.Load(), w.opsFailed.Load()
		r.Counts.UnavailableS = w.longestUnavailable().Seconds()
	}()
	if err := awaitFlowing(ctx, w, time.Minute); err != nil {
		return r, err
	}
	logf("workload: %d Every-1s schedules in namespace %s, occurrences flowing from every partition", len(w.schedules), w.namespace)
	w.startLoad(ctx, cfg.Seed)
	nem.run(ctx, time.Now().Add(cfg.Duration))
	logf("faults over (%d injected); healing", len(nem.faults))
	if err := nem.awaitWhole(ctx, "the last fault"); err != nil && ctx.Err() != nil {
		w.stopLoad()
		return r, err
	}
	w.stopLoad()
	w.settle(ctx)
	logf("quiet for %v", cfg.Quiet)
	if !sleep(ctx, cfg.Quiet) {
		return r, ctx.Err()
	}
	if failed := w.cancelAll(ctx); failed > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%d schedules could not be cancelled and read back after healing", failed))
	}
	if unread := w.readSagas(ctx); unread > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%d sagas could not be read back after healing", unread))
	}
	dead, err := w.drain(ctx, drainBound(nem.clockAhead(), time.Now()))
	end := time.Now()
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
	}
	r.Counts.DeadLettered = dead
	if err := w.stopWorker(); err != nil {
		r.Problems = append(r.Problems, fmt.Sprintf("worker: %v", err))
	}
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	if err := w.readLedgers(ctx); err != nil {
		r.Problems = append(r.Problems, err.Error())
	}
	if err := w.readGenerations(ctx); err != nil {
		r.Problems = append(r.Problems, err.Error())
	}
	samplerStopped = true
	replicaViews, statusMarks, tablesRead, tablesFailed := sampler.stopSampling()
	h := w.history(end, cfg.RecoveryBound)
	h.clockAhead = nem.clockAhead().by
	if cfg.LogDir != "" {
		if err := writeHistory(filepath.Join(cfg.LogDir, "history.jsonl"), h); err != nil {
			logf("history: %v", err)
		}
	}
	v := checkHistory(h)
	r.Violations = append(r.Violations, v.problems...)
	r.Counts.Occurrences, r.Counts.Redelivered = v.occurrences, v.redelivered
	r.Counts.Duplicates, r.Counts.Gaps, r.Counts.Lost, r.Counts.Early = v.duplicates, v.gaps, v.lost, v.early
	r.Counts.MaxLatenessMS = v.maxLateness.Milliseconds()
	r.Counts.Timers, r.Counts.TimersUnconfirmed, r.Counts.Enqueued = len(h.timers), w.unconfirmed, len(h.enqueued)
	checkSagas(r, h)
	checkLinearizability(r, h)
	for _, c := range r.Linearizability {
		logf("linearizability: %d %s histories, %d operations; %d not linearizable, %d undecided", c.Histories, c.Kind, c.Operations, c.Illegal, c.Undecided)
	}
	inconsistent, err := checkConsistency(ctx, cl)
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
	}
	inconsistent = append(loggedInconsistencies(nem.processes()), inconsistent...)
	r.Counts.Inconsistencies = len(inconsistent)
	r.Violations = append(r.Violations, inconsistent...)
	checkRaft(r, replicaViews, statusMarks, tablesRead, tablesFailed)
	logf("raft sampled: %s; %d leader claims over %d (partition, term) pairs", sampler, r.Counts.LeaderClaims, r.Counts.LeaderTerms)
	r.Complete = true
	logf("history closed: %d deliveries, %d occurrences, %d timers, %d enqueued, %d sagas (%d calls, %d of unknown outcome, %d timeouts), %d replays, "+
		"%d schedule calls (%d of unknown outcome); %d violations",
		len(h.deliveries), v.occurrences, len(h.timers), len(h.enqueued), r.Counts.Sagas, r.Counts.SagaOps, r.Counts.SagaUnknown,
		r.Counts.SagaTimeouts, r.Counts.Replays, r.Counts.ScheduleOps, r.Counts.ScheduleUnknown, len(r.Violations))
	return r, nil
}

// drainTimeout bounds the drain of the workload's queues after healing.
const drainTimeout = 90 * time.Second

// drainBound is how long the drain may take from now: drainTimeout, past the instant until
// which a partition's logged time may still be ahead of the real time because a silo's clock
// ran ahead (FaultSkew). Its leases end by that logged time, so a message leased and never
// acked while it was ahead is delivered again only once the real time has caught up.
func drainBound(ahead clockAhead, now time.Time) time.Duration {
	return drainTimeout + max(ahead.until.Sub(now), 0)
}

// The Raft sampler reads every live silo's partition table every raftSampleInterval (a read
// fans out to one status inspection per partition inside the silo), each read bounded by
// raftSampleTimeout.
const (
	raftSampleInterval = 500 * time.Millisecond
	raftSampleTimeout  = 2 * time.Second
)

// checkRaft runs the Raft checkers over the samples read during the run and adds their counts
// and violations to r; a run that read no partition table has checked nothing, a problem.
func checkRaft(r *Report, replicaViews []replicaSample, statusMarks []statusSample, tablesRead, tablesFailed int) {
	r.Counts.RaftTablesRead, r.Counts.RaftTablesFailed = tablesRead, tablesFailed
	if tablesRead == 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("the Raft sampler read no partition table (%d reads failed)", tablesFailed))
	}
	lc := checkOneLeaderPerTerm(replicaViews)
	r.Counts.TwoLeaders, r.Counts.LeaderClaims, r.Counts.LeaderTerms = lc.twoLeaders, lc.claims, lc.terms
	r.Violations = append(r.Violations, lc.problems...)
	tc := checkLoggedTimeNeverDecreases(statusMarks)
	r.Counts.LoggedTimeBackward, r.Counts.StatusMarks = tc.backward, tc.samples
	r.Violations = append(r.Violations, tc.problems...)
}

// linearizabilityBudget bounds porcupine's search over one saga's or one schedule's history.
const linearizabilityBudget = 30 * time.Second

// checkSagas runs the saga timeout and receipt checkers over h and adds their counts,
// violations and problems to r.
func checkSagas(r *Report, h history) {
	sv := checkSagaTimeouts(h)
	r.Violations = append(r.Violations, sv.problems...)
	r.Counts.Sagas, r.Counts.SagaOps, r.Counts.SagaTimeouts = sv.sagas, len(h.sagaOps), sv.timeouts
	r.Counts.DoubleTimeouts = sv.doubleTimeouts
	for _, op := range h.sagaOps {
		if op.outcome == outcomeUnknown {
			r.Counts.SagaUnknown++
		}
	}
	r.Counts.Lost += sv.lost
	r.Counts.Early += sv.early
	rv := checkReceipts(h.replays)
	r.Violations = append(r.Violations, rv.problems...)
	r.Counts.Replays, r.Counts.ReplaysCompared, r.Counts.ReceiptMismatches = rv.replays, rv.compared, rv.mismatches
}

// checkLinearizability counts h's schedule calls, runs the linearizability check over its saga
// and schedule histories and adds what it covered, its violations (a history not
// linearizable) and problems (one not decided) to r. Linearizable is false when any history is illegal, true when every one was
// decided linearizable, and null otherwise.
func checkLinearizability(r *Report, h history) {
	for _, op := range h.scheduleOps {
		r.Counts.ScheduleOps++
		if op.outcome == outcomeUnknown {
			r.Counts.ScheduleUnknown++
		}
	}
	illegal, undecided := false, false
	for _, kind := range []struct {
		name    string
		verdict linearizabilityVerdict
	}{
		{"saga", checkSagasLinearizable(h, linearizabilityBudget)},
		{"schedule", checkSchedulesLinearizable(h, linearizabilityBudget)},
	} {
		v := kind.verdict
		r.Violations = append(r.Violations, v.illegal...)
		r.Problems = append(r.Problems, v.undecided...)
		r.Linearizability = append(r.Linearizability, HistoriesChecked{Kind: kind.name, Histories: v.histories, Operations: v.operations,
			Illegal: len(v.illegal), Undecided: len(v.undecided)})
		illegal = illegal || len(v.illegal) > 0
		undecided = undecided || len(v.undecided) > 0
	}
	if illegal || !undecided {
		linearizable := !illegal
		r.Counts.Linearizable = &linearizable
	}
}

// awaitFlowing waits until an occurrence of every partition has been delivered.
func awaitFlowing(ctx context.Context, w *workload, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		seen := map[int]bool{}
		for _, d := range w.log.snapshot() {
			if d.origin == client.OriginOccurrence {
				seen[d.partition] = true
			}
		}
		if len(seen) == w.partitions {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("occurrences delivered from %d of %d partitions within %v", len(seen), w.partitions, within)
		}
		if !sleep(ctx, 250*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// checkConsistency runs a consistency check of every partition through a serving silo (POST
// /v1/partitions/check) and returns a description of each partition whose replicas' checksums
// differ. A check that could not conclude (a leader changed under it, a replica that did not
// report) is run again, up to three times in all; the error says it never concluded.
func checkConsistency(ctx context.Context, cl *Cluster) (inconsistent []string, err error) {
	var unsettled []string
	for range 3 {
		serving := cl.Serving()
		if len(serving) == 0 {
			return nil, errors.New("consistency check: no serving silo")
		}
		callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		table, err := CheckPartitions(callCtx, cl.Silos[serving[0]].AdminAddress())
		cancel()
		if err != nil {
			unsettled = []string{err.Error()}
			continue
		}
		inconsistent, unsettled = nil, nil
		for _, p := range table.Partitions {
			switch c := p.Check; {
			case p.Error != nil:
				unsettled = append(unsettled, fmt.Sprintf("partition %d: %s", p.Partition, *p.Error))
			case c == nil:
				unsettled = append(unsettled, fmt.Sprintf("partition %d: no check", p.Partition))
			case len(c.Divergent) > 0 || !c.Consistent && len(c.Missing) == 0:
				inconsistent = append(inconsistent, fmt.Sprintf("partition %d at index %d: replicas diverge: divergent %v, checksums %v", p.Partition, c.Index, c.Divergent, c.Checksums))
			case len(c.Missing) > 0:
				unsettled = append(unsettled, fmt.Sprintf("partition %d at index %d: no checksum from %v", p.Partition, c.Index, c.Missing))
			}
		}
		if len(unsettled) == 0 {
			return inconsistent, nil
		}
		if !sleep(ctx, 2*time.Second) {
			return inconsistent, ctx.Err()
		}
	}
	return inconsistent, fmt.Errorf("consistency check did not conclude: %s", strings.Join(unsettled, "; "))
}
