// Package saga owns saga records in a partition: the CompareExchangeSaga and ExpireSaga
// mutations, the phase transition table they obey, the saga's entries in the due index and
// in the listing index, and the derived id of the timeout message (docs/design.md §4 "Sagas").
//
// # Purity
//
// The package is a pure state machine (STYLE A): it reads and writes only through the kv.View
// it is given, takes the partition's logged time as an argument, reads no clock, draws no
// random numbers and starts no goroutines. The same mutation on the same state at the same
// logged time always produces the same writes and the same result.
//
// # Contract with the caller
//
// Each Apply function validates its whole input and checks every precondition before its first
// write, so a Validation, NotFound, RevisionConflict or Expired error leaves the view exactly as
// it was. ApplyExpire may fail after it asked the queue to enqueue (QuotaExceeded from
// queue.Put); the caller applies each mutation on its own kv.Buffer and discards the buffer on
// any error, so the saga stays Waiting and nothing is enqueued. Errors are *orrery.Error whose
// Field is relative to the mutation ("saga_id", "timeout.template.payload_json"); the caller
// prefixes it with the mutation's path.
//
// # Stored state
//
// A saga lives under keys.SagaKey(lane, saga id) as an orreryv1.SagaRecord. Invariants:
//
//   - the revision starts at 1 and every successful mutation increments it by exactly 1;
//   - the creator is the principal of the creating CompareExchangeSaga and never changes;
//   - a deadline and a timeout are both set or both unset, and only a Waiting saga gets new
//     ones; a TimedOut saga keeps the deadline and timeout that fired, plus the timeout
//     message id;
//   - the due index holds exactly one entry for a saga that is Waiting with a deadline
//     (kind DUE_KIND_SAGA, due at the deadline, token = the Waiting revision), and none
//     otherwise;
//   - the listing index holds exactly one entry for every saga, under its phase (IndexKey),
//     moved in the view of every write that changes the phase;
//   - Completed, Cancelled and TimedOut are terminal: the record never changes again.
//
// # Timeouts
//
// When the due coordinator finds a Waiting saga's deadline passed, it sends ExpireSaga with the
// revision it saw. ApplyExpire enqueues the timeout message in lane {saga namespace, timeout
// queue, saga key} — the saga's own partition — under TimeoutMessageID(saga id, revision), and
// writes TimedOut in the same view. The id is derived, so at most one timeout message exists
// per Waiting revision however often the command is retried.
package saga
