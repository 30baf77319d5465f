// Package audit owns a partition's audit log (keys.Audit): one AuditRecord for every grant
// change (PutGrant, DeleteGrant applied) and every mutation denied Unauthorized, written by
// batch.Applier in the transaction of the command, so the log is replicated and deterministic
// like any partition state. A record says who (the caller), what (the mutation's kind and
// index, its namespace and queue, the grant's target and its rules before and after, or the
// denial's message) and when (the command's logged time), never a payload, header or state
// value. A denial inside a batch that rolls back is still recorded; a grant change that rolls
// back is not, since it never happened.
//
// Read pages the log oldest first for a PolicyAdmin on "*" (grants.AuthorizeInspect); Prune
// removes records past input.Limits.AuditRetentionMicros in the partition's housekeeping.
// Bounded (batch.ApplyVersionAuditBound), the log counts a denial repeated within
// DenialWindowMicros on its first record (indexed under keys.AuditDenial) and keeps at most
// MaxRecords records (counted under keys.AuditCount), removing the oldest past it.
//
// Denials outside apply — an inspection refused Unauthorized and the admin endpoint's 401 and
// 403 — cannot write partition state: the silo records those as structured log lines on its
// "audit" logger (attribute audit=true) and counts them on /metrics
// (orrery_audit_denials_total). Two refusals inside apply write nothing either, since they are
// the command's error and no state of theirs is kept: a long-poll receive refused before it
// waits (batch.Applier.CheckWaiting) and the replay of a stored receipt to a caller no longer
// authorized; the caller gets Unauthorized, and the first denial of the same command, when
// there was one, is in the log.
package audit
