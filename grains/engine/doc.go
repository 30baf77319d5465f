// Package engine owns the partition engine (docs/design.md §2 layer 2): the logic of one partition
// grain as a pure state machine in the style of etcd raft's RawNode. It holds the commands
// proposed and not yet applied, the parked long-poll receives, the due head and due floor, what
// the due coordinator was told of the partition's next due instant, the visibility floors of
// its own reads, the housekeeping and consistency-check schedules, the partition's limits
// (it proposes its silo's when the partition's differ, on Open) and the refresh of its zone
// rules (it proposes its binary's where the partition's are older, on Open). Every event enters
// through Step, with the time it happens at, as one of the Event types (a sealed interface); what
// the engine wants done comes back as a Ready: entries to propose, replies to send, next-due
// notices, timers to arm, the answer to a due scan. Reads that change nothing (Inspect) are
// methods of their own. It reads the partition's replica state only through
// State, starts no goroutine, reads no clock and takes no lock; a thin driver (the partition
// grain, partition) performs its Ready and feeds back what happened.
//
// # Commands
//
// A Command is answered at once when the engine is stopped, when MaxPending commands are in
// flight and parked, or when it is a due command (CommandRequest.due) that is not a due
// coordinator's; a long-poll receive is parked (below); anything else comes back in
// Ready.Propose as a PartitionCommand. The driver proposes it and steps Proposed with the
// outcome: a refusal is answered at once, an accepted proposal waits for the Applied event
// that holds its index and term, whose reply it gets. Lost answers proposals that lost their
// term Unavailable, HostFailed everything in flight; the caller retries with the same command
// id, and the command inbox answers the receipt if the entry did apply.
//
// # Long polls
//
// A long-poll receive (wait_micros > 0, one Receive) is checked as an apply would check it,
// then proposed at once when a message of its queue is visible at the read time, otherwise
// parked (at most MaxWaiters, for at most MaxWait) and proposed after the Applied event that
// makes one visible or when the wait timer finds one: it leases in its own entry and its
// receipt answers it. From apply version 23 a command whose entry may feed a parked receive's
// queue (fedQueues) carries it (carry, at most MaxWaitingPerEntry): the entry applies it after
// its batch (ApplyEntry), leasing when its queue then has a visible message, and that answers
// it; one that leased nothing is parked again. A wait that ends first is answered with nothing, and writes nothing. The
// wait timer is armed at the earliest of the waiters' deadlines and their queues' next visible
// instants. Those instants are hints kept per waited queue: read from the visibility index when
// a queue is first waited on or its hinted instant passes, and lowered by the visibility
// entries each Applied event reports (Recorder.Visible), so that an apply reads nothing for a
// waiter whose queue it did not make visible. A caller that stops waiting abandons its receive (CommandRequest.abandon): a parked
// one is dropped, a late copy is not parked, and one already proposed answers the abandon with
// its receipt, whose leases the caller releases.
//
// # Due work
//
// The engine keeps the front of the due index in memory (due.Head), kept exact by each
// Applied event's due-index writes, and answers the ScanDue event from it (Ready.Scanned). It tells the due coordinator
// (Ready.Notices) the partition's earliest due instant on Open and after a snapshot, and after
// an Applied event that wrote an earlier one than the coordinator wakes for.
//
// # Time
//
// Every instant the engine judges by is the now passed to Step; the read time of dueness and
// visibility is the logged time the next entry would get, max(now, last applied + 1 µs).
package engine
