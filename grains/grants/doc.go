// Package grants owns the grant records of a partition (keys.GrantKey: one GrantRecord per
// principal), the capability bits they hold, the checks every apply and inspection read makes
// against them, and the PutGrant and DeleteGrant mutations that change them (docs/design.md §8).
//
// A grant is a list of rules, each giving a capability mask in one namespace ("*": every
// namespace) or in one queue of it, with field policies on JSON paths. A check asks whether
// a principal holds one capability for one namespace and queue: some rule of its grant must
// cover both (a namespace rule "*" or equal, a queue rule empty, equal, or the queue whose
// dead-letter queue is asked for) and hold the bit. Capabilities never imply each other:
// PolicyAdmin gives no scheduler, saga or queue capability. A principal with no grant holds
// nothing.
//
// Grants are partition state like any other record: a grant change is a command the client
// sends to every partition with one command id, applied in each partition's own order, so a
// check reads the grant of its own partition in its own transaction — deterministic on every
// replica. Orrery's own principals (input.SystemPrincipalPrefix) are not granted: the
// internal commands (EmitOccurrences, ExpireSaga, Housekeep) are theirs alone and they may
// change grants; every other check treats them like any principal.
//
// Field policies refine a capability on JSON paths of a message's payload and headers (under
// QueuePublish) and a saga's state (under SagaManage), see CheckFields: write bounds what a
// caller (and, for a replacement or a saga update, the record's creator) sets; use bounds what
// emission and a saga's timeout carry on the creator's behalf; read bounds what a caller is
// shown (Redact).
//
// Redaction: every reply that carries a document passes the caller's current read policies,
// read in the same view as the records — under QueueInspect for inspection (ProjectInspect:
// a schedule's template, a saga's state and its timeout's template, lane pages, list pages)
// and under QueueConsume for receive (ProjectMessage, applied in the receive's transaction
// and again to a replayed receipt). Removed paths are listed in the record's or message's
// redacted_paths. A receive without read permission keeps the message's id, lease and
// delivery count, with empty payload and headers. A saga's timeout template is shown only to
// a caller holding QueueInspect on the timeout's queue. A record's creator is shown only to
// the creator itself or to a principal holding PolicyAdmin on the record's namespace and
// queue (ReadsCreator); to anyone else it is blank and redacted_paths lists "creator".
// Ledger records, queue counts and denials carry no document or creator.
package grants
