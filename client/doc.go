// Package client owns the public Go client of Orrery: typed calls for every mutation and
// inspection of the partition grains, with routing, retries and error decoding, lists of a
// namespace's schedules and sagas merged across all partitions, and Worker, a consumer of a
// whole queue across all partitions.
//
// # Routing
//
// Every call addresses one partition. A call about a lane goes to
// route.Partition(lane, Transport.Partitions()): the namespace and the key decide, the queue
// name does not, so a schedule, its saga and the queues of its namespace with the same key are
// reached together. Receive and PartitionStatus name their partition explicitly, since a queue
// spans every partition. ListSchedules and ListSagas ask every partition at once, each for a
// whole page after its own position, and merge the answers in (queue, key, id) order; the
// continuation records each partition's position (the last of its records the page kept, or
// done), so no page repeats or skips a record.
//
// # Commands, retries and receipts
//
// A mutation call builds one Batch with a fresh command id (Options.CommandIDs, or
// WithCommandID for a caller that replays its own id) and sends it until it gets an answer.
// Only failures Orrery calls retriable are retried — Unavailable, and DeadlineExceeded of a
// single attempt; transport errors that are not Orrery errors count as Unavailable — with
// exponential backoff and jitter (Options.Retry) until the call's context ends. Every retry
// reuses the same command id, so a retry after a lost reply returns the original receipt,
// byte for byte, instead of applying twice. Business outcomes (Validation, RevisionConflict,
// NotFound, QuotaExceeded, ...) are never retried.
//
// # Errors
//
// Every failure is an *orrery.Error, matched with errors.Is against the orrery sentinels
// (orrery.ErrRevisionConflict and friends). A per-mutation error or a batch-level error in the
// receipt becomes the call's error. A call whose context ends returns DeadlineExceeded
// (deadline) or Unavailable (cancellation: the outcome is unknown, and retrying with the same
// command id is safe); both also match the context's own error with errors.Is.
//
// # Schedules by name
//
// Schedules (c.Schedules(namespace)) is the Go-typed path for schedules: Create and Upsert by
// name with ScheduleOptions, a ScheduleHandle per schedule (Describe into a
// ScheduleDescription of time.Time and time.Duration values, Pause, Resume, Trigger, Update by
// compare-and-set retried inside, Cancel, Delete), and List as an iterator over every page.
// Sagas (c.Sagas(namespace)) is the same for sagas: Start by name (the id is SagaID's
// UUIDv5 of the namespace and the name), a SagaHandle that remembers the revision it last read
// or wrote and changes the saga by compare-and-set on it (Wait, Complete, Cancel), Describe
// into a SagaDescription, and List. Queue (c.Queue(namespace, queue)) with the generic
// Enqueue marshals a Go value into a message, and JSONHandler decodes one into a Job[T] for a
// Worker. They are built on the wire calls above.
//
// # Worker
//
// Worker consumes one queue across all partitions: one waiting (long-poll) receive per
// partition while idle (asking for the partition's share of Concurrency + Prefetch), at most Concurrency handlers at once shared fairly by the partitions,
// ack on success, release on error, lease extension at half the lease duration while a handler
// runs, and a clean stop when Run's context ends. Given a prometheus.Registerer
// (WorkerConfig.Metrics) it records each handler's start lateness and outcome.
//
// # Long polls
//
// A receive with a wait is one request that waits on the partition and leases there as soon as
// a message is visible. A receive whose caller goes away while it waits is abandoned: the same
// command id with abandon set, which drops it from the partition, or, when it had leased
// already, returns its receipt, whose messages are released.
//
// The package clienttest holds the in-memory twin of Transport for tests: the partition
// engine itself over in-memory partitions, with an apply loop in place of Raft and
// Transport.EmitDue in place of the due coordinators, which alone send the EmitOccurrences and
// ExpireSaga mutations (the client has no call for them).
package client
