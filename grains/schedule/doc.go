// Package schedule owns schedule records in a partition: validating and configuring
// definitions (At, After, Every), computing due instants with checked arithmetic, emitting the
// contiguous due occurrences into the schedule's queue under stable ids, and the lifecycle
// (cancel, delete, pause, resume, trigger). It is pure: it reads and writes only through the
// kv.View it is given and takes the logged time as input.
//
// The watermark (NextOrdinal, NextDueAt) is written in the same view as every message it
// emits, so no retry, lost response or reopen can emit an ordinal twice. The due index entry
// (kind schedule, token = generation) always sits at NextDueAt while the schedule can emit.
package schedule
