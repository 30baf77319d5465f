// Package grains holds no code. Most of its subpackages are Orrery's deterministic core (docs/design.md
// §2, layers 1 and 2): the schedule, saga, queue, grant and audit state machines, their listing,
// the batch applier, the partition engine, the due index and their key layout and view. Three
// are not: grains/partition (the partition grain and the silo's Raft host), grains/duecoordinator
// and grains/duebackoff run goroutines and do I/O by design. The test in this directory is the
// lint that keeps the core pure and keeps it from importing those three.
package grains
