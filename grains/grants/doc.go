// Package grants owns the grant records of a partition (keys.GrantKey: one GrantRecord per
// principal), the capability bits they hold, the checks every apply and inspection read makes
// against them, and the PutGrant and DeleteGrant mutations that change them (DESIGN §8).
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
// emission and a saga's timeout carry on the creator's behalf. read is stored but not
// enforced: redaction of inspection and receive is not built yet.
package grants
