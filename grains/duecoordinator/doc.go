// Package duecoordinator owns the due coordinator of one silo (DESIGN §5): the worker pool that
// keeps one timer per owned partition at that partition's next due instant, serves due
// partitions round-robin with a per-partition budget, turns each bounded ScanDue into one batch
// of EmitOccurrences and ExpireSaga commands carrying CAS tokens and fresh command ids, and
// reads the receipts back.
//
// It holds nothing that is not rebuilt from the partitions: on SetOwned it scans every newly
// owned partition, and a slow safety rescan catches whatever a lost hint or timer missed. The
// partition alone decides dueness with its own logged time; the coordinator only decides when
// to ask. Stale tokens are the expected outcome of races and are ignored; refs that keep
// failing for a lasting reason (an occurrence whose time to live has passed stays due by
// design) are remembered with a backoff and paged past, so they neither hot-loop a partition
// nor starve the refs behind them.
//
// With Config.Backstop (the silo's default, where partitions emit their own due refs) the
// coordinator keeps only its activating and safety roles: it scans each partition when it
// takes it and every SafetyRescan after, ignores next-due hints, and sends whatever such a scan
// finds due (a race with the partition's own emit costs a stale or empty result, never a
// second occurrence: the schedule's watermark and the saga's revision decide).
//
// Time comes only from an injected clock.Clock, so tests drive it with clock.Fake. The package
// lives outside grains/ because it starts goroutines and takes locks, which the purity lint of
// the deterministic core forbids there.
package duecoordinator
