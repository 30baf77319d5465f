// Package replication owns a silo's Raft groups, one per partition it hosts (docs/design.md §3): the
// pure multi-group Raft core (Groups) over go.etcd.io/raft/v3 RawNodes, the logged time its
// leaders stamp on PartitionEntry, log compaction and state snapshots, membership changes one
// replica at a time, the driver loop that performs the rounds of Groups (Driver) against a
// StateMachine, and Network, an in-memory transport that connects several replicas in one test
// process.
//
// # Groups
//
// Groups does no I/O of its own beyond reading each group's raft.Storage, starts no goroutine
// and reads no clock: time enters as Tick (one Raft tick for every group) and as the now passed
// to Propose. A round is
//
//	round, err := groups.Ready(busy)         // every group with work, but the busy ones
//	install(round.Restores)                  // 0. accepted snapshots' states (below)
//	durable, appended := round.splitDurable()
//	apply(durable)                           // 1. committed entries a previous round persisted
//	log.Persist(round.Writes)                // 2. ONE synced write for all of them
//	for _, out := range round.Messages {     // 3. only after Persist returned
//		transport.Send(out.To, out.Messages)
//	}
//	apply(appended)                          // 4. committed entries this round appended
//	resolve(round.Outcomes)                  //    answer or fail the proposals they settle
//	groups.Advance(round)                    // 5.
//	sendSnapshots(round.Snapshots)           // 6. state snapshots Raft asked for (below)
//	log.Compact(round.Compactions...)        // 7.
//	answerOnceApplied(round.Reads)           //    confirmed reads (below)
//
// which is the order of the etcd raft README but for step 1: an entry committed in this round
// that an earlier round persisted is durable already (on a quorum, and in this replica's log),
// so it applies while this round's new entries persist, and its command waits for one sync,
// not two. Each group's entries still apply in log order: the durable ones are those before
// the first entry this round's Writes append to the group (a follower can be told of a commit
// index together with the entries it covers); those wait for the persist. An apply that runs
// ahead of the persisted commit index (a crash before step 2) is safe for the same reason as a
// snapshot installed before its round persists (see Snapshots, Crashes): the entries are
// committed and in the log, and Open does not hand them out again. Advance applies conf-change
// entries (ApplyConfChange is always called) and records the applied index, term and logged
// time.
//
// The barrier is per group. The StateMachine applies asynchronously and reports each
// hand-over applied; a group with entries still applying is busy, and the driver leaves it out
// of its rounds (Ready's skip), with any snapshot stepped in or rebuild for it, until they
// have applied. So a group's next round, Advance, compactions and snapshots come after its own
// applies, as in the etcd raft order, while the other groups' rounds go on: one group's long
// apply delays only that group's next commit. A snapshot a round asks for while its group is
// busy is sent by the first round after the group's applies end.
//
// # Logged time and proposals
//
// Propose stamps max(now in µs, last stamped + 1, last applied + 1) on the entry, so logged
// time never goes backward along the log. Only a leader that has applied an entry of its own
// term stamps: a new leader refuses (ErrNotCaughtUp, code Unavailable) until its empty entry of
// the new term has applied, and with it every entry of earlier terms. A follower refuses with
// ErrNotLeader; proposals are never forwarded. Each accepted proposal is settled by exactly one
// Outcome: Committed when the entry at its index applies with its term, lost otherwise — when
// another entry applies at that index, or when this replica stops leading the term it was
// proposed in. A lost proposal may still have been committed by a later leader; the client
// retries with the same command id and the command inbox answers the original receipt.
//
// The stamp is only as good as the leader's wall clock: one behind stamps last + 1 µs per
// entry until its clock reaches the log's logged time, and one ahead leaves the log's logged
// time ahead after it is gone (logged time never goes back). So a replica whose silo judged
// its clock beyond the bound from most of its peers' (Groups.SetClockUnfit, driven by the
// silo's cluster/clockoffset.Monitor) leads no group a fit voter can lead: it drops the
// pre-votes granted to it until its group has had no leader for a few election timeouts, drops
// a leadership transfer's MsgTimeoutNow, and refuses Propose (ErrClockUnfit) in a group with
// another voter while the silo hands its leaderships over. A replica whose silo has not judged
// its clock yet (Groups.SetClockUnjudged: it just started, or cannot tell) wins no election
// either, but takes a transfer and stamps where it leads.
//
// # Reads
//
// A leader answers a read from its applied state only after confirming it still leads (Raft's
// ReadIndex, ReadOnlySafe): a leader cut off from the others may already have been replaced,
// and its state miss what the new leader committed. Groups.ReadIndex records the leader's
// commit index C with the request's context and rides on a heartbeat; when a quorum
// acknowledged it, a round's Reads carry ReadState{group, C, context}, and the read may be
// answered once the state has applied through C. It refuses like Propose: a follower
// (ErrNotLeader, reads are not forwarded) and a leader that has not applied an entry of its
// own term (ErrNotCaughtUp; Raft would keep such a leader's requests, even past losing the
// leadership, until it commits in a term it leads). A request gets no ReadState when this
// replica stops leading its term first: Raft forgets pending reads at every term change.
//
// Driver.Read is the blocking form. Calls queue in the driver; before collecting a round it
// makes one ReadIndex request per group for the calls queued there, with a context unique to
// the driver, and at most one per group is in flight (calls that come meanwhile wait for the
// next, since the index of the one in flight was taken before they were made). A request
// whose term this replica no longer leads fails its calls with ErrNotLeader, so neither Raft
// nor the driver holds more than one unconfirmed request per group. A confirmed request waits
// for the state: the StateMachine applies asynchronously, so "applied" is not Groups'
// applied index, which Advance moves as soon as the entries are handed to Apply, but that
// index once the group is no longer busy (every hand-over up to it reported applied). The
// driver answers confirmed requests in every round it runs, and the end of an apply wakes
// it. A call whose ctx ends first fails with
// DeadlineExceeded (or Unavailable when canceled) and leaves its request to settle alone.
//
// # Log compaction
//
// Once a group's log holds more than Config.MaxLogEntries entries, a round compacts it up to
// the applied index: on a follower (and a single replica) all of it, on a leader no further
// than the lowest Match of the followers within MaxLogEntries of the log's end. So a follower
// that keeps up is served from the log, while one far behind (cut off, down for long, new)
// does not keep the log growing: it is caught up by a snapshot. RaftLog.Compact records the
// snapshot at the truncation point (metadata and the conf state there, no state), so Raft's
// Storage.Snapshot is never empty once entries were compacted, as Raft requires.
//
// # Snapshots
//
// Raft's snapshot carries no state here: its Data is the logged time, and the state travels
// beside it as chunks of at most MaxSnapshotChunkBytes, as CockroachDB does.
//
// Sending. When Raft, leading a group, finds a follower's next entry compacted, it puts the
// follower's progress in StateSnapshot (pending at the log's truncation point T) and emits a
// MsgSnap whose snapshot is the compaction record. Groups takes that message out of the
// round (Round.Snapshots). After Advance, when the state machine has applied exactly the
// applied index A of Groups, the driver takes a consistent state read (StateMachine.Snapshot)
// and replaces the message's snapshot with A, the term of A, the conf state and logged time
// as of A (Groups.SnapshotMessage); the transport streams the chunks and the message, and
// reports back once (Driver.ReportSnapshot → RawNode.ReportSnapshot): installed, or failed —
// a lost chunk, a broken stream, a refusal — after which Raft probes the follower again and
// sends a new snapshot if it still needs one. A ≥ T always, as logs are compacted only
// behind the applied index, and A is committed, so the snapshot is one Raft could have sent.
//
// Installing. The receiving driver steps the MsgSnap into Raft (Groups.StepSnapshot) at the
// start of its next round. If Raft takes it (its index is past this replica's commit and not
// already in its log), that round's Restores name it, and before anything of the round is
// persisted the driver installs the state (StateMachine.Install), then persists the round —
// the snapshot record makes the log start after A — and only then sends Raft's answer
// (MsgAppResp at A), which moves the leader's progress past the snapshot. If Raft does not
// take it, the snapshot is refused and its state never touched. If the chunks fail, the
// state machine keeps its old state, Groups drops the group from the round and reopens
// it from its persisted log (Groups.Discard: nothing it held only in memory was sent), and the
// sender is told the snapshot failed.
//
// Crashes. Install is atomic across crashes (see StateMachine): a crash during it leaves the
// old state and the old log, so the replica reopens where it was and the leader, still unable
// to reach it from its log, sends a snapshot again. A crash after Install returned and before
// the round was persisted leaves the new state at A ahead of the log's commit: Open starts
// Raft at that commit and hands out none of the committed entries up to A again (Raft's
// leader completeness keeps this replica from leading before its log reaches A). A crash
// after the persist leaves both at A.
//
// # Rebuilds
//
// A replica whose state diverged from the others' although its log is the same (a
// nondeterministic apply, a write behind the state machine's back; the partition's
// consistency checker finds it) is repaired by a rebuild: a replica holding the majority's
// state streams a consistent read of it, at its applied index I and logged time, to the
// divergent one (OutboundSnapshot.Rebuild, headed by RebuildMessage). Raft is not involved:
// only the state machine's state was wrong, and the replica's log, vote and place in the
// group stay, so it never stops counting in quorums and is never left with an empty log. At
// the start of its next round the receiving driver refuses the rebuild while it leads or
// campaigns (ErrRebuildLeader: a divergent leader hands its leadership over first) or when
// its log starts after I+1 (ErrRebuildTooOld: the entries between could not be applied onto
// it); otherwise it installs the state (StateMachine.Install, atomic across crashes as for a
// snapshot) and reopens the group from its persisted Raft state with I as the state's applied
// index (Groups.rebuilt): the committed entries after I are handed out again, whether I is
// behind or ahead of what it had applied, and those up to I are not. What Raft held in memory
// and had not persisted is lost as in a crash; nothing of it was sent. The sender hears the
// outcome through the stream's Done.
//
// # Membership
//
// A group's configuration (voters and learners) changes one replica at a time. Bootstrap
// writes the first (on a cluster's founding silo: itself as the only voter); a replica that
// joins opens the group with nothing persisted and waits, never campaigning, for a leader to
// reach it. On the leader, AddLearner adds it as a learner: the leader's log no longer reaches
// back to the group's start, so it is caught up by a snapshot of the state, then from the log.
// Once the leader sees it caught up (its Match within CaughtUpLag of the commit index, and
// replicated to from the log rather than probed or sent a snapshot), PromoteLearner makes it a
// voter. RemoveReplica removes a voter or a learner; TransferLeadership hands the leadership
// to another voter, as the leader cannot remove itself (ErrRemoveLeader).
//
// Each change is one ConfChangeV2 holding one change, so the group never enters a joint
// configuration: with one voter added or removed, any quorum of the old configuration meets
// any quorum of the new. It takes effect when it applies (Advance calls ApplyConfChange). The
// leader proposes one at a time and refuses the next while its last is unapplied
// (ErrConfChangePending; Raft, which has the same rule, would silently make an empty entry of
// it). It refuses a removal or promotion after which fewer voters of the new configuration
// than its quorum are live (ErrNoLiveQuorum), live meaning the leader itself and the replicas
// Raft counts as recently active (heard from since the last quorum check, which CheckQuorum
// makes once every election timeout; right after a check, live replicas count as inactive
// until they next answer, so a refused change may be retried). Removing a learner is always
// allowed. A removed replica keeps the group open; it gets no more traffic.
//
// Restarts. Raft's Storage.InitialState returns the conf state of the log's snapshot record
// (written by Bootstrap, a compaction or an installed snapshot), not of the changes applied
// after it. Open therefore starts Raft at the record, and the first rounds hand it the
// committed entries after the record again: Advance applies their conf changes once more, as
// etcd's server does when it replays its WAL, while their PartitionEntries up to the state
// machine's applied index are not handed out (the skipThrough of a state installed ahead of
// the log does the same). The alternative, persisting the conf state with each round, would
// have to write it atomically with the state machine's applied index, which the state machine
// moves on its own and asynchronously; replaying keeps the log the only record of the
// configuration. The cost is reading, on each open, the committed entries since the last
// compaction (at most about MaxLogEntries), and a configuration that is the record's until the
// first rounds ran (before Raft could campaign, which takes an election timeout of ticks). As
// replay applies every change after the record again, the record must name the configuration
// at its own index: Groups remembers the conf states since the record, and a compaction
// (which on a leader may stop behind the applied index) records the one current at its index;
// a state snapshot records the one at the applied index it was read at.
package replication
