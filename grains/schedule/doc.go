// Package schedule owns schedule records in a partition: validating and configuring
// definitions (At, After, Every, Cron), computing nominal instants, emitting the due ones
// into the schedule's queue under stable ids by the misfire and overlap policies, the
// lifecycle (cancel, delete, pause, resume, trigger), the occurrence ledger and inspection.
// It is pure: it reads and writes only through the kv.View it is given and takes the logged
// time as input.
//
// # Watermark
//
// A generation's ordinals count the nominal instants it passes, enqueued or not. The
// watermark (NextOrdinal, NextNominal and, for cron, the cursor: the next instant is
// cron.Next strictly after it) is written in the same view as every message and ledger
// record it accounts for, so no retry, lost response or reopen can pass an ordinal twice.
// The due index entry (kind schedule, token = generation) sits at NextDueAt while the
// schedule can emit: the next nominal instant, or earlier for a buffered occurrence that
// can go (see refreshNextDue).
//
// # Listing index
//
// Every schedule has one entry in the listing index under its state (StateOf, IndexKey),
// moved by the write of the record that changes the state (save) and removed with it by
// delete, in the same view.
//
// # Emit
//
// Each due ordinal, oldest first: older than the catch-up window → MISSED_CATCHUP_WINDOW;
// else the misfire policy — CATCH_UP fires it, SKIP fires it only if no later instant is
// also due (SKIPPED_MISFIRE otherwise), COALESCE fires the last due instant carrying the
// count and first/last instants of those it stands for (COALESCED_INTO). What fires then
// meets the overlap policy — ALLOW_ALL enqueues; SKIP enqueues only while no earlier
// occurrence holds the slot (SKIPPED_OVERLAP otherwise); BUFFER_ONE buffers one occurrence
// while the slot is held (later ones SKIPPED_OVERLAP) and enqueues it once the slot frees.
// One emit enqueues at most EmitOccurrences.max messages and passes at most
// Limits.MaxPassedPerEmit ordinals without one; the rest stay due (a COALESCE backlog longer
// than that becomes one occurrence per chunk).
//
// The overlap slot is held by the last occurrence enqueued under SKIP or BUFFER_ONE. The ack
// that removes it frees the slot in the same transaction (ReleaseSlot, called by the batch
// dispatcher) and a buffered occurrence becomes due at once; a holder that expired or was
// dead-lettered frees it too, noticed at the next emit (due at the holder's expiry while an
// occurrence is buffered). Manual triggers neither wait for nor take the slot.
//
// # Pause
//
// Pause and resume, like cancel and delete, take the exact revision or any_revision. Emission
// stops while paused (no due entry). Resume sets the paused floor (its logged time minus the
// catch-up window) and passes the ordinals before it PAUSED, one ledger record each and no
// message, at most Limits.MaxPassedPerEmit per command: the resume first, then emits that
// pass only those (without the clock anomaly guard: they enqueue nothing). The series goes on
// from the first ordinal at or after the floor. Pausing a paused schedule, resuming one that
// is not paused, and either on a cancelled one are refused: Suspended, naming the record's state
// field that refuses them (paused, cancelled, suspended; schedule_id for a resume of a running
// schedule), with what to do in the message (refused).
//
// # Zone rules and the evaluator
//
// Apply reads nothing but the entry and the state, so every replica computes the same
// instants. A cron schedule's zone is evaluated with the rules its partition holds
// (keys.ZoneRulesKey, one ZoneRules per zone), never with a silo's zone database: the leader
// carries its binary's rules (package zonerules, ZoneRulesFor) in every entry that configures a
// cron schedule in a zone, and the configure keeps them when the partition holds none of the
// zone or an older tzdata release (an older binary leading never takes a zone back). Every
// schedule of the zone follows the newest rules from its next instant on. A cron generation
// pins the partition's evaluator version (the first, until a cluster-wide step exists); a
// binary that does not know a generation's version stops applying (an Internal error) rather
// than compute other instants.
//
// # Suspension
//
// An emit (or resume) of a cron schedule whose partition holds no rules of its zone (one
// configured before the rules were kept), or an emit whose logged time trips the definition's
// clock anomaly window, suspends the schedule instead of reinterpreting or flooding: reason in
// the record, a SUSPENDED ledger record, no due entry. Only a new ConfigureSchedule releases it.
//
// # Names
//
// A deleted schedule's id stays terminal (its tombstone is never removed), but its name does
// not: a name's n-th schedule in a lane has the id input.ScheduleIDFromNameIncarnation(n), and
// ResolveName finds the name's first incarnation whose id is not deleted, reading tombstones
// only. No index is written, so configure and delete write what they always did and apply is
// the same for replicas of any version; the resolution is a read (an inspection by name), and
// the client configures the id it answers, which apply accepts once (a tombstoned id is
// refused, an existing one is a revision conflict).
//
// # Ledger
//
// Every ordinal passed (PAUSED ones included), and every manual trigger, leaves one
// LedgerRecord (keys.Ledger), read newest first by ReadLedger with a bound and a
// continuation, and pruned by PruneLedger once older than Limits.LedgerRetentionMicros.
package schedule
