package batch

import (
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// projectReceive projects the messages a receive leased through the current read policies of
// principal under QueueConsume, read from v in the receive's own transaction
// (grants.ProjectMessage): the receipt, stored and sent, holds only what the caller may read,
// with the removed paths in each message's redacted_paths. Ids, leases and delivery counts
// are kept, so a caller without read permission acks by its token like any other.
func projectReceive(v kv.Reader, principal string, r *orreryv1.ReceiveResult) error {
	grant, err := grants.Load(v, principal)
	if err != nil {
		return err
	}
	for i, msg := range r.GetMessages() {
		r.Messages[i] = grants.ProjectMessage(grant, grants.QueueConsume, msg)
	}
	return nil
}

// reproject passes the receive results of a replayed receipt through the caller's current
// read policies again, like reauthorize re-checks its capabilities: a read revoked since the
// first answer removes those fields from the replay too. The stored receipt holds the first
// projection, so a replay never shows more than the first answer did; when the policies are
// unchanged its bytes equal the first answer's, and otherwise they differ only in the
// payload, headers and redacted_paths of its messages. The stored receipt is not rewritten.
func reproject(v kv.Reader, principal string, b *orreryv1.Batch, out *Outcome) error {
	results := out.Receipt.GetResults()
	changed := false
	for i, m := range b.GetMutations() {
		if m.GetReceive() == nil || i >= len(results) || len(results[i].GetReceive().GetMessages()) == 0 {
			continue
		}
		r := results[i].GetReceive()
		before := append([]*orreryv1.QueueMessage(nil), r.GetMessages()...)
		if err := projectReceive(v, principal, r); err != nil {
			return err
		}
		for j := range before {
			changed = changed || before[j] != r.Messages[j]
		}
	}
	if !changed {
		return nil
	}
	encoded, err := record.Marshal(out.Receipt)
	if err != nil {
		return err
	}
	out.ReceiptBytes = encoded
	return nil
}
