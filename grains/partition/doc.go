// Package partition owns the partition grain: the virtual actor partition/<n> that opens
// partition n's Badger store on activation (the directory lock is the single-writer fence),
// group-commits the commands that arrive while a group applies (one logged time and one
// transaction per group; a group applies over the groups still syncing, one sync makes all
// of them durable, and receipts go out only after it; a SyncPacer spaces one partition's syncs
// while the process is short of CPU), parks long-poll receives until a
// message is visible (see below), emits its own due refs (Config.OwnEmission) or tells the silo's due
// coordinator when a commit writes a due entry earlier than it knows of, answers due scans and
// inspection reads with budgets, and stops the activation after a failed commit so the next
// one recovers from disk.
//
// With OwnEmission (the silo's default) the partition is its own due coordinator: every group
// it applies starts with an own batch of the EmitOccurrences and ExpireSaga mutations, with
// their CAS tokens, of the refs due at that moment (at most 256, and 512 occurrences), and a
// timer at its due head's next instant starts a group when none is applying. The batch is
// journalled with JournalEntry.own and applied by batch.Applier.ApplyOwn: no inbox entry or
// receipt (nobody replays it; the next one is made from the index again) and each mutation
// stands alone. Refs that fail for a lasting reason go on backoff (duebackoff). Against a
// coordinator's round this saves the ScanDue and Command requests, a command inbox entry per
// round, and the wait for the sync before the next round, and enqueues at the due instant
// plus one group's apply.
//
// Due scans are answered from the partition's due head (due.Head): the front of its due index
// in memory, loaded from the store when a scan reaches past it (about every 4 s under steady
// load) and kept exact by applying each applied group's due-index writes. A scan it answers
// needs no store transaction and sees the state as of the last applied group; one that
// reaches past its bound (a backlog of more than 4,096 entries due) reads the store.
//
// # Long polls
//
// A long-poll receive (a CommandRequest with wait_micros > 0 whose batch is one Receive) never
// applies, so it never leases a message its caller is no longer there to take: the partition
// cannot tell that a caller went away. It is checked (envelope and receive, as an apply would)
// and then answered without a receipt: visible at once when a message of its queue is
// visible, otherwise parked (at most Config.MaxWaiters, for at most Config.MaxWait) and
// answered visible after the first applied group that makes one visible, or when its queue's
// next message becomes visible, or not visible when its wait ends. None of this writes. The
// caller then sends the same batch without waiting, which applies and leases like any
// command. A long-poll receive whose command id already has a receipt is replayed at once.
//
// It is DESIGN §2 layer 3: it runs goroutines and does I/O, unlike the pure state machines it
// applies (grains/batch).
//
// # Failpoints
//
// ORRERY_FAILPOINT=<name>[:<n>] arms a crash boundary in a real silo process: at the n-th hit
// (default 1) of the named point the process kills itself with SIGKILL. Names:
//
//	batch-applied    the group is applied in the transaction, not committed
//	batch-committed  a sync made the groups before it durable, no receipt has been sent
//	receipt-sent     the receipts of those groups have been sent
package partition
