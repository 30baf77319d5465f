// Package queue owns queue messages in a partition: idempotent enqueue by id, per-lane quotas,
// receive with a lease, ack with the lease token, release, lease extension, lease expiry judged
// by logged time, dead-lettering after the maximum number of deliveries, redriving dead
// letters back to their queue, retry policies (a failed attempt's backoff, and the dead-letter
// or drop of a message whose attempts are used up), message priorities, pausing a queue's
// consumption, cancelling a message by id, unique jobs (an enqueue skipped while its lane holds
// its unique key), a queue's share of a cluster-wide concurrency cap and rate limit, and the
// counts an operator reads of a queue. It is pure: it reads and writes only through the
// kv.View it is given and takes the logged time as input.
//
// A message lives under m/<lane>/<id>. While it is not leased or its lease has ended, a
// visibility-index entry mv/<namespace>/<queue>/<visibleAt>/<sequence> points at it, so a
// receive reads one queue's messages in this partition in visible-time, then FIFO, order; a
// message of priority p > 0 (apply version 20) has its entry in the queue's band p instead, and a
// receive merges the bands by visible time minus priority × Limits.PriorityStepMicros
// (priority.go). A
// leased message's index entry sits at its lease end, so an expired lease makes it visible
// again without any timer. A paused queue holds a pause record (qp/) that receives check
// first, and a queue with a retry policy a record (qr/) that receives and failed releases read
// when the message has no policy of its own. A capped queue holds a share record (qs/: the
// cluster-wide policy, this partition's share of it and a rate bucket refilled by logged time)
// followed by an entry per lease it counts, keyed by lease end, so a capped receive counts the
// leases that have not ended by reading the entries after the logged time — a lease that ends
// by time stops counting with no command — and the ack, release, extension or removal of a
// lease moves its entry. Acked, expired, cancelled and dead-lettered ids leave a tombstone (mt/) in
// their lane so a re-enqueue of the same id stays a no-op; from apply version 18 a
// re-enqueue under the id that differs in payload, headers, ordering key or origin is an
// IdempotencyConflict (Idempotency), and the tombstone keeps a digest of those to compare. Lane counters (lc/) count every
// live message, including dead-letter moves that bypass the quota. From apply version 21 an
// enqueue may carry a unique key (unique.go): the lane's record of it (mu/) names the message
// holding it, and another enqueue with the key is skipped as its duplicate while the record is
// in force.
package queue
