// Command peers runs the same three workloads against Orrery and against River
// (github.com/riverqueue/river on PostgreSQL, through pgx and River's riverpgxv5 driver), several
// runs each, and prints one markdown table of medians with min..max, the ratio Orrery/River per
// row and the server memory of each (`make bench-peers`, or `go run . -runs 2` in this folder).
// Asynq is not measured: its module on this machine's module proxy is not an approved release.
//
// # The servers
//
// Orrery is one silo, a separate process built from this repository (`go build ./cmd/silo`) and
// started on its defaults, with a fresh temporary --data dir, --insecure-dev and free loopback
// ports; the harness waits for its admin /readyz and joins it with client.Dial. River is a
// client library: its server is PostgreSQL, a private cluster made for the run (initdb in a
// temporary dir, listening on 127.0.0.1 only on a free port, its socket in that dir, run as the
// postgres OS user when the harness runs as root), on its defaults, synchronous_commit=on and
// fsync=on included, with River's schema migrated by rivermigrate. When no
// /usr/lib/postgresql/*/bin/initdb exists the harness installs Debian's postgresql package with
// apt-get (through sudo when not root). Each workload of each run gets a fresh server, and only
// one server runs at a time; the two sides take turns, Orrery first in odd runs and River first
// in even ones. Every server is stopped and its dir removed at the end of its workload run, on
// a failure and on SIGINT or SIGTERM (the silo is killed, its data being thrown away;
// PostgreSQL gets a fast shutdown). With -cpu-profile DIR each Orrery run's silo writes a CPU
// profile of its whole run to DIR/orrery-<workload>-<run>.pprof (the silo's --cpu-profile) and
// is stopped by SIGTERM instead, so that it writes the profile out; the harness's own process
// (the Orrery client and the workload) is profiled into DIR/orrery-<workload>-<run>-clients.pprof. After each Orrery run the
// harness reads the silo's /metrics and prints, under the run's line, p50/p99 (estimated in
// the histograms' buckets) of each stage of an occurrence's life the silo times: due →
// enqueued (orrery_occurrence_enqueue_lateness_seconds), the due command, the long poll's lease,
// other commands, the Raft apply stage, rounds and persists (orrery_partition_stage_seconds,
// orrery_raft_round_seconds, orrery_raft_persist_seconds), and the keys and bytes the silo
// store wrote per occurrence, its partitions' states and its Raft log apart
// (orrery_store_written_keys_total, orrery_store_written_bytes_total): in A from before the
// timers are created to the end, per timer; in B over the run, per handled message; in C from
// after the schedules are created to the end, per expected occurrence. -sides orrery runs Orrery alone (no
// PostgreSQL is needed then, and the table has no ratios): for iterating on a change, never for
// a figure beside River.
//
// Both clients run in this process with 100 handlers (-handlers): an Orrery worker of
// Concurrency 100 on each queue, and River's default queue with MaxWorkers 100, FetchPollInterval
// 20 ms and FetchCooldown 5 ms (River validates that the cooldown is at most the poll interval;
// its default, 100 ms, is not). River's pgx pool has 40 connections. Handlers return nil at
// once: Orrery's worker then acks the message (batched Ack commands, durable once the silo
// store has synced the partition's Raft log entry to disk), River's completer marks the job
// completed (batched UPDATEs, committed with synchronous_commit=on).
//
// # Definitions
//
// Lateness: handler start − the occurrence's nominal instant, where handler start is time.Now()
// taken as the first statement of the handler in this process, and the nominal instant is, for
// a timer (A), the due instant it was created with, and for a recurring occurrence (C), the
// whole second it stands for (Orrery: the message's OccurrenceOrigin.NominalDueAt; River: the
// job's ScheduledAt, which the periodic enqueuer sets to the run time it computed). The
// servers and the harness share one clock. Only each occurrence's first delivery counts; p50,
// p99 and max are nearest-rank percentiles over those.
//
// Early: occurrences whose handler started before their nominal instant. Missing: expected
// occurrences never handled before the run's grace period ended. Duplicate: occurrences handled
// more than once. All three are counted and reported, never asserted.
//
// Completion: a handler return for a message of B, counted in the handler. Its ack (Orrery) or
// completion update (River) becomes durable shortly after, in a batch: Orrery's worker holds at
// most 2 × Concurrency returned messages whose ack is not yet durable; River's completer
// writes the completions gathered every 50 ms in one UPDATE (up to 5,000 a statement; handlers
// wait once 10,000 are pending). So the count at each edge of the window runs ahead of the
// durable count by at most that. After the run the harness checks that every counted
// completion did become durable (Orrery: the lanes hold exactly the messages enqueued and never
// handled; River, once its client has stopped: the completed rows equal the jobs handled) and
// says so, or names the shortfall, on stderr. completions/s is the completions in the window
// divided by its length.
//
// Memory: the peak, over samples every 250 ms, of the server's proportional set size (Pss in
// /proc/PID/smaps_rollup): the silo process for Orrery; the postmaster plus all its child
// processes, summed, for PostgreSQL (PSS shares each shared page, shared_buffers included, among
// the processes mapping it, so the sum counts it once). River's own work (fetching, completing,
// the job scheduler and the periodic enqueuer) runs in its client, in this process, and is not
// in the figure; Orrery's due coordinator runs in the silo and is.
//
// # The workloads
//
// A, one-shot timers: 10,000 timers (-timers) due at instants spread evenly over 20 s
// (-spread), the first 6 s (-lead) after their creation starts. On both sides the consumers
// already run when the timers are created: Orrery's worker; River's client, started 5 s before
// (its leader starts its maintenance services one after another, each after a random stagger
// of up to 1 s: the job scheduler is the third). Orrery: At schedules, each in a lane of its own
// spread evenly over the partitions, configured 200 per command with one goroutine per
// partition, whose occurrences land in the queue the worker consumes. River: jobs inserted with
// InsertOpts.ScheduledAt, 1,000 per InsertManyFast, which River's job scheduler moves from
// scheduled to available every 5 s, taking those due within the next 5 s; -lead is above that,
// so that no timer waits for a later pass because it was created after the pass that should
// have moved it. Reports lateness p50/p99/max, early, missing and duplicate, waiting at most
// 15 s (-grace) after the last due instant.
//
// B, already-due messages in a closed loop: producers keep the backlog (messages enqueued and
// not yet completed) at most 5,000 (-backlog), topping it up as completions arrive, 100
// messages per call: Orrery, Batch commands of 100 Enqueue mutations over 4 lanes of a partition,
// one producer per partition; River, InsertManyFast of 100 jobs, 8 producers. After a 5 s
// warm-up (-warmup) it counts completions over a 20 s window (-window) and reports
// completions/s and the server's peak memory (PSS) over warm-up and window.
//
// C, a burst of recurring schedules: 1,000 schedules (-schedules) every 1 s, all first due on
// the same whole second, 5 to 6 s (-lead, truncated to the second) after their creation starts,
// measured over 10 s (-seconds) of occurrences; the consumers run before, as in A. Orrery:
// Every 1s schedules configured 200 per command. River: 1,000 periodic jobs (river.NewPeriodicJob)
// added to the running client with PeriodicJobs().AddManySafely; their schedule is not
// river.PeriodicInterval(time.Second) but alignedEvery, a river.PeriodicSchedule whose Next
// returns the next instant of first + k·1 s. PeriodicInterval's Next(t) is t + 1 s, and the
// periodic enqueuer computes a job's first run as Next(the instant it schedules the job: when
// it starts leading, or when the job is added), so its phase is that instant's, not one the
// caller chooses: the jobs would fire together, but on no chosen second, and neither the two
// sides' nominal instants nor their misses could be compared. After the first run alignedEvery
// gives what PeriodicInterval(time.Second) gives: the previous run time + 1 s. An occurrence is
// identified by its schedule and nominal instant; reports lateness p50/p99/max, missing and
// duplicate over the schedules × seconds expected.
//
// Output: one progress line per workload, side and run on stderr; then the markdown table on
// stdout, each row a figure, its columns Orrery and River (median, min..max over the runs) and
// Orrery/River (the ratio of the medians; "-" where the River median is 0).
package main
