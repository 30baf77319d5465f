// Package queue owns queue messages in a partition: idempotent enqueue by id, per-lane quotas,
// receive with a lease, ack with the lease token, release, lease extension, lease expiry judged
// by logged time, dead-lettering after the maximum number of deliveries, redriving dead
// letters back to their queue, pausing a queue's consumption, cancelling a message by id, a
// queue's share of a cluster-wide concurrency cap and rate limit, and the counts an operator
// reads of a queue. It is pure: it reads and writes only through the
// kv.View it is given and takes the logged time as input.
//
// A message lives under m/<lane>/<id>. While it is not leased or its lease has ended, a
// visibility-index entry mv/<namespace>/<queue>/<visibleAt>/<sequence> points at it, so a
// receive reads one queue's messages in this partition in visible-time, then FIFO, order. A
// leased message's index entry sits at its lease end, so an expired lease makes it visible
// again without any timer. A paused queue holds a pause record (qp/) that receives check
// first. A capped queue holds a share record (qs/: the cluster-wide policy, this partition's
// share of it and a rate bucket refilled by logged time) followed by an entry per lease it
// counts, keyed by lease end, so a capped receive counts the leases that have not ended by
// reading the entries after the logged time — a lease that ends by time stops counting with
// no command — and the ack, release, extension or removal of a lease moves its entry.
// Acked, expired, cancelled and dead-lettered ids leave a tombstone (mt/) in their lane so a re-enqueue of the same id stays a no-op; from apply version 18 a
// re-enqueue under the id that differs in payload, headers, ordering key or origin is an
// IdempotencyConflict (Idempotency), and the tombstone keeps a digest of those to compare. Lane counters (lc/) count every
// live message, including dead-letter moves that bypass the quota.
package queue
