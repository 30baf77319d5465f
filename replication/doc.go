// Package replication owns a silo's Raft groups, one per partition it hosts (DESIGN §3): the
// pure multi-group engine (Groups) over go.etcd.io/raft/v3 RawNodes, the logged time its
// leaders stamp on PartitionEntry, the driver loop that performs an engine's rounds (Driver),
// and Network, an in-memory transport that connects several engines in one test process.
//
// # The engine
//
// Groups does no I/O of its own beyond reading each group's raft.Storage, starts no goroutine
// and reads no clock: time enters as Tick (one Raft tick for every group) and as the now passed
// to Propose. A round is
//
//	round, err := groups.Ready()             // every group with work
//	log.Persist(round.Writes)                // 1. ONE synced write for all of them
//	for _, out := range round.Messages {     // 2. only after Persist returned
//		transport.Send(out.To, out.Messages)
//	}
//	for _, c := range round.Committed {      // 3. each group's entries, in log order
//		apply(c)
//	}
//	resolve(round.Outcomes)                  //    answer or fail the proposals they settle
//	groups.Advance(round)                    // 4.
//
// which is the order of the etcd raft README. Advance applies conf-change entries
// (ApplyConfChange is always called) and records the applied index, term and logged time.
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
// # Not yet
//
// Snapshots (sending, installing, catching a follower up by snapshot) and log compaction are a
// later step, and so are membership changes beyond applying conf-change entries as they
// commit: a group starts from the peers Bootstrap writes and keeps them.
package replication
