// Package partition owns a silo's partitions: the Host (the silo store, one Raft group per
// partition driven by one replication.Driver, and each partition's state machine, which
// applies the group's committed entries) and the partition grain, the virtual actor
// partition/<n> that attaches to its partition's state machine on the silo it activates on and
// drives the partition's engine (grains/engine): it steps the engine with requests, the state
// machine's results and the engine's timers at the clock's time, and performs what the engine
// asks: replies, next-due notices to the silo's due coordinator, timers on the clock, and
// proposals to the Host. The engine decides everything else: when a command is proposed or
// answered, which long-poll receives are parked and when they are answered, what a due scan or
// an inspection read answers, when housekeeping runs.
//
// # Replicas
//
// The groups exist once the silo belongs to a cluster (Host.JoinCluster, or a store that
// already records its cluster id). The silo that creates the cluster creates every group with
// itself as its only voter, campaigns, and leads them all once each state machine has applied
// what the log holds; a silo that joins opens every group empty and receives its replicas from
// the leaders, which add it as a learner, catch it up by snapshot and promote it (the silo's
// placement loop decides when, package cluster/placement; Host.AddLearner, PromoteLearner,
// RemoveReplica, TransferLeadership perform it). Raft traffic goes through the Transport the
// silo sets (Host.SetTransport, cluster/raftnet between silos).
//
// A command's entry is stamped by the leader with its logged time and principal
// (replication.Groups.Propose), persisted with every other entry of its round in one synced
// write, committed once a quorum of the group has persisted it (a sole voter counts its own
// append once the round that wrote it is done) and applied by the partition's state machine:
// each round's entries of one partition in one transaction (split when it would exceed the
// store's limit), each at its own logged time, with the partition's applied mark. Partitions
// apply at the same time, each on its state machine's goroutine, while the next rounds
// persist; a partition whose entries are still applying sits out the Raft rounds until they
// have (the driver's barrier is per group), and the others' go on. The grain answers a command from its entry's apply
// result; a proposal that loses its term is answered Unavailable, and so is everything in
// flight when the host fails (a failed write or apply: the silo stops and the next start
// applies again from the log). A retry with the same command id is an entry too, and the
// command inbox answers it with the original receipt.
//
// The grain partition/<n> is activated only where its replica leads (cluster/lookup asks
// Host.Leads). A grain whose replica does not lead, or stops leading, answers each request
// Unavailable naming the silo it believes leads (orrery.Error.LeaderSilo), and stops itself;
// the caller retries there. An inspection read of a group with other voters is answered only
// once a quorum confirms this replica still leads (Host.confirmRead, ReadIndex); a sole voter
// answers at once.
//
// # Due commands
//
// Due work is emitted only by the silo's due coordinator (grains/duecoordinator), which the
// grain tells of the partition's earliest due instant (Config.OnNextDue, as the engine's
// notices ask) on activation and whenever an apply writes an earlier one. The coordinator's
// due commands (CommandRequest.due, from a system: principal) are entries like any other,
// applied by batch.Applier.ApplyDue: no inbox entry or receipt is stored (their CAS tokens
// make them idempotent) and each mutation stands alone; the reply carries the receipt.
//
// # Consistency checks
//
// A CheckConsistency entry ends its apply transaction; each replica hashes its state as of it
// (Host.checksumState) and hands the checksum to the group's leader (over the transport,
// ChecksumSender), whose Host compares the voters' and records a Verdict (Host.Consistency):
// a replica that differs from the majority is logged at ERROR and counted. The engine of the
// leader's grain proposes the checks (Config.CheckEvery). ORRERY_DIVERGE (Host.Diverge) makes
// a replica diverge on purpose, to test the checker.
//
// # Limits
//
// A partition applies under the limits its state holds (batch.LoadLimits), never the host's
// configured ones: those are what the engine of a leader proposes (SetLimits) when they
// differ. The state machine re-reads the partition's after an entry that set them.
//
// # Observing
//
// The silo's metrics read the Host: each group's Raft view (Status), the commands each grain
// holds (Queued), the store's size on disk (DiskBytes), and, through observers it sets, each
// Raft round's persist time (ObserveRounds) and each due occurrence's enqueue lateness on the
// partition's leader (ObserveEnqueueLateness).
//
// The Host, its state machines and the grain run goroutines and do I/O, unlike the pure state
// machines they apply (grains/batch) and the pure engine the grain drives: docs/design.md §2 layer 4.
//
// # Failpoints
//
// ORRERY_FAILPOINT=<name>[:<n>] arms a crash boundary in a real silo process: at the n-th hit
// (default 1) of the named point, counted from the moment the silo is ready, the process kills
// itself with SIGKILL. Names (docs/design.md §3):
//
//	entry-appended   a round that wrote command entries was persisted (synced), not yet known committed
//	entry-committed  committed command entries were handed to their state machines, not yet applied
//	entry-applied    a state machine applied command entries, their replies not yet sent
//	reply-sent       the grain sent the replies of applied entries
//
// entry-committed and entry-applied can be narrowed to a kind of command by a prefix: then only
// the hits of a round with an entry of that kind count.
//
//	due-entry-applied       (or due-entry-committed) a due coordinator's command that emits occurrences
//	expire-entry-applied    (or expire-entry-committed) a command that expires sagas
package partition
