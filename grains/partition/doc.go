// Package partition owns the partition grain: the virtual actor partition/<n> that opens
// partition n's Badger store on activation (the directory lock is the single-writer fence),
// group-commits the commands that arrive while a group applies (one logged time and one
// transaction per group; a group applies over the groups still syncing, one sync makes all
// of them durable, and receipts go out only after it; a SyncPacer spaces one partition's syncs
// while the process is short of CPU), parks long-poll receives until a
// message is visible, answers due scans and inspection reads with budgets, tells the silo's due
// coordinator when a commit writes a due entry earlier than it knows of, and stops the
// activation after a failed commit so the next one recovers from disk.
//
// Due scans are answered from the partition's due head (due.Head): the front of its due index
// in memory, loaded from the store when a scan reaches past it (about every 4 s under steady
// load) and kept exact by applying each applied group's due-index writes. A scan it answers
// needs no store transaction and sees the state as of the last applied group; one that
// reaches past its bound (a backlog of more than 4,096 entries due) reads the store. A parked
// long-poll receive whose queue gets a visible message from a group is applied in that group.
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
