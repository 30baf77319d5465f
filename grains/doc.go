// Package grains holds no code. Its subpackages are Orrery's deterministic core (docs/design.md
// §2, layers 1 and 2): the schedule, saga, queue, grant and audit state machines, their listing,
// the batch applier, the partition engine, the due index and their key layout and view — with
// one exception, the folder grains/duecoordinator (a silo's due coordinator and its backoff),
// which runs goroutines and reads the clock by design. The test in this directory is the lint
// that keeps every other package under grains/ pure and keeps the core from importing that
// folder. The partition grain and the silo's Raft host, which drive the engine, stand outside
// grains/, in package partition.
package grains
