package engine

import (
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
	"github.com/orreryhq/orrery/grains/record"
)

// EntryApplied is what ApplyEntry did with one committed entry's command.
type EntryApplied struct {
	// Command is the entry's command, decoded.
	Command *orreryv1.PartitionCommand
	// Reply answers the command's sender: its receipt, or the error of a refused command.
	Reply *orreryv1.CommandReply
	// DueReceipt is a due command's receipt (nil for any other command), for the driver's
	// observers.
	DueReceipt *orreryv1.Receipt
	// Waiting answers the command's waiting receives (PartitionCommand.waiting), in order: the
	// reply of each one that applied (its receipt, or its refusal), nil for one that wrote
	// nothing and stays parked.
	Waiting []*orreryv1.CommandReply
}

// ApplyEntry applies one committed entry's command (an encoded PartitionCommand, as
// Ready.Propose hands it out) onto v at the entry's logged time, as every replica applies it:
// a due command with ApplyDue (its receipt answers the due coordinator and is not stored), any
// other with ApplyBatch under the zone rules the leader carried in the entry. applier.Limits
// must be the partition's own (batch.LoadLimits), never a silo's flags. A command the applier
// refuses before it writes (Validation, IdempotencyConflict, Unauthorized) is answered with its
// error; any other error is a platform failure, returned, and must end the transaction.
//
// The partition's state machine and every twin of it apply through this one function.
func ApplyEntry(applier batch.Applier, v kv.View, principal string, command []byte, loggedMicros int64) (EntryApplied, error) {
	cmd := &orreryv1.PartitionCommand{}
	if err := proto.Unmarshal(command, cmd); err != nil {
		return EntryApplied{}, orrery.Wrap(orrery.CodeInternal, err, "decode the entry's command")
	}
	out := EntryApplied{Command: cmd}
	var err error
	if cmd.GetDue() {
		out.DueReceipt, err = applier.ApplyDue(v, principal, cmd.GetBatch(), loggedMicros)
		if err == nil {
			var encoded []byte
			if encoded, err = record.Marshal(out.DueReceipt); err == nil {
				out.Reply = &orreryv1.CommandReply{Receipt: encoded}
			}
		}
	} else {
		applier.ZoneRules = cmd.GetZoneRules()
		var outcome *batch.Outcome
		if outcome, err = applier.ApplyBatch(v, principal, cmd.GetBatch(), loggedMicros); err == nil {
			out.Reply = &orreryv1.CommandReply{Receipt: outcome.ReceiptBytes}
		}
	}
	if err != nil {
		if platform(err) {
			return out, err
		}
		out.DueReceipt, out.Reply = nil, ErrorReply(err)
	}
	if len(cmd.GetWaiting()) > 0 && applier.TakesWaitingInEntry() {
		applier.ZoneRules = nil
		out.Waiting = make([]*orreryv1.CommandReply, len(cmd.GetWaiting()))
		for i, w := range cmd.GetWaiting() {
			if out.Waiting[i], err = applyWaiting(applier, v, w, loggedMicros); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// applyWaiting applies a waiting receive an entry carries after the entry's batch: as its own
// command (ApplyBatch, its receipt stored under its command id) when its command id already
// has a receipt (a retry: replayed) or its queue has a message visible at loggedMicros
// (queue.VisibleAt, the test a parked receive is proposed on), else not at all (nil: nothing
// written, the receive stays parked). A refused receive (Validation, Unauthorized) is answered
// with its error; a platform failure is returned.
func applyWaiting(applier batch.Applier, v kv.View, w *orreryv1.WaitingReceive, loggedMicros int64) (*orreryv1.CommandReply, error) {
	muts := w.GetBatch().GetMutations()
	if len(muts) != 1 || muts[0].GetReceive() == nil {
		return ErrorReply(orrery.Invalid("waiting", "a waiting command holds exactly one receive")), nil
	}
	_, receipted, err := v.Get(keys.InboxKey(w.GetPrincipal(), w.GetBatch().GetCommandId()))
	if err != nil {
		return nil, err
	}
	if !receipted {
		recv := muts[0].GetReceive()
		visible, err := queue.VisibleAt(v, recv.GetNamespace(), recv.GetQueue(), loggedMicros)
		if err != nil || !visible {
			return nil, err
		}
	}
	outcome, err := applier.ApplyBatch(v, w.GetPrincipal(), w.GetBatch(), loggedMicros)
	if err != nil {
		if platform(err) {
			return nil, err
		}
		return ErrorReply(err), nil
	}
	return &orreryv1.CommandReply{Receipt: outcome.ReceiptBytes}, nil
}

// platform reports whether an apply error is a platform failure (it ends the transaction)
// rather than a refused command (it gets an error reply).
func platform(err error) bool {
	switch orrery.CodeOf(err) {
	case orrery.CodeValidation, orrery.CodeIdempotencyConflict, orrery.CodeUnauthorized:
		return false
	}
	return true
}
