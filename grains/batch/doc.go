// Package batch owns applying one command: ApplyBatch runs a batch's mutations in order, each
// on its own write buffer merged only on success, rolls the whole batch back on a quota
// failure (or any failure when the batch asks for all-or-nothing), and keeps the command inbox
// — the stored, byte-identical receipt under (principal, command id) that makes every retry of
// a command safe — and ApplyDue, a due coordinator's command: independent mutations and no
// inbox entry. Both write the command's audit records (package audit: grant changes applied,
// mutations denied Unauthorized) outside the buffers a rollback discards. It is pure, like the
// state machines it dispatches to.
package batch
