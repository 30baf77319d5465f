// Package chaos owns process-level testing of silos: building the silo binary, starting real
// silo processes on loopback with free ports and temp data directories, alone or as a cluster
// of several silos with their own data directories (StartCluster), reading their partition
// tables from the admin endpoint to find each partition's leader and Raft group, killing them
// with SIGKILL, stopping them with SIGTERM, pausing them with SIGSTOP and SIGCONT, cutting their
// Raft traffic through the faults file they follow (raftnet.FaultsFileEnv), isolating a silo at
// the network level (SiloSpec.Isolatable, SiloProcess.Isolate and Heal: the process runs in a
// cgroup v2 of its own, and an nftables table drops all of its traffic on loopback, actor,
// gossip and admin, both ways, until healed; this needs root, cgroup v2 and nft, see
// RequireNetcut), and making sure every process a test started is gone when the test ends,
// even on failure, and that no cgroup, mount or nftables rule outlives it.
//
// Run is make chaos (chaos/cmd/chaos): a cluster under a workload through the Go client
// (schedules paused, resumed and cancelled by compare-and-set, timers, probes, consumers,
// sagas raced against their deadlines, replayed command
// ids, Europe/Berlin cron schedules) and a seeded nemesis that injects one fault, or one
// combination, at a time (kill, pause, isolate, wipe, rolling restart, a crash failpoint armed
// at a boundary of every command or of the due coordinator's emission or saga expiry, a silo on
// a skewed clock, a silo with other zone rules, a 2/3 split of five silos (netsplit.go), two
// faults at once, and a full disk injected at the free-space check), then the checkers over the
// recorded history, each a pure function:
// checkHistory (duplicates, gaps, cron instants by the compiled zone rules, early and lost
// occurrences, lateness; receipts judged early only beyond the largest clock ahead), checkSagaTimeouts
// (double, early and lost saga timeouts, by the saga contract), checkSagasLinearizable
// (porcupine over each saga's compare-and-sets, reads and expiries, against stepSaga),
// checkSchedulesLinearizable (porcupine over each schedule's compare-and-sets at an expected
// revision and reads, against stepScheduleRevision, a revision register that also grows by
// commands no client sees) and
// checkReceipts (a replayed command gets the first receipt's bytes); over the partition tables
// a raftSampler reads from every live silo every 500 ms for the whole run,
// checkOneLeaderPerTerm (no two silos named leader of one partition in one term) and
// checkLoggedTimeNeverDecreases (a higher applied index of a partition never carries a lower
// logged time); the divergences the silos' periodic consistency checks logged during the run
// (loggedInconsistencies) and a consistency check after healing; and a Report. The functions
// that start processes take a TB, which *testing.T satisfies and the command implements.
//
// Its tests drive those processes through the Go client: restarts of one silo, crash
// boundaries, and (the TestCluster tests) killed and paused leaders, a network partition, a
// silo isolated and healed, a lost host, a silo removed from its groups, a rolling restart
// (also under compare-and-set load, each call within a deadline), every silo stopped and
// started again one at a time, cluster formation and leader balance, checking that no
// occurrence is enqueued twice
// and no schedule has a gap. They run short versions by default; ORRERY_CLUSTER_FULL=1
// (make cluster-test) runs them at full length.
package chaos
