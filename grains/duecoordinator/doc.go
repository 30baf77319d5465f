// Package duecoordinator owns the due coordinator of one silo (docs/design.md §5), the only path by
// which due work is emitted: the worker pool that keeps one timer per partition the silo leads
// at that partition's next due instant, serves due partitions round-robin with a per-partition
// budget, turns each bounded ScanDue into due commands (CommandRequest.due) of EmitOccurrences
// and ExpireSaga mutations carrying CAS tokens, and reads their receipts back. It does not wait
// for one command's commit before the next round's scan: up to two commands per partition are
// in flight, and the rounds meanwhile pass by their refs.
//
// It holds nothing that is not rebuilt from the partitions: on SetOwned it scans every newly
// owned partition, and a slow safety rescan catches whatever a lost hint or timer missed. The
// partition alone decides dueness with its own logged time; the coordinator only decides when
// to ask. A due command keeps no inbox entry (its tokens make it idempotent), and each of its
// mutations stands alone. Stale tokens are the expected outcome of races and are ignored; refs
// that keep failing for a lasting reason (a full lane, a creator without its grant: the ref
// stays due until that changes) are remembered with a backoff and paged past, so they neither
// hot-loop a partition nor starve the refs behind them. Its watchdog reports the records that
// are late (seen due longer ago than Config.LateAfter by the partition's logged time) or
// failing (on backoff), logging each change of state once (Coordinator.Liveness, Stats).
//
// With a TracerProvider, each occurrence a receipt reports enqueued gets an emission span
// (package tracing) whose ids derive from the occurrence's message id.
//
// Time comes only from an injected clock.Clock, so tests drive it with clock.Fake. The package
// starts goroutines and takes locks, so it is one of the grains/ packages the purity lint of the
// deterministic core leaves out (grains/purity_test.go), and the core may not import it.
package duecoordinator
