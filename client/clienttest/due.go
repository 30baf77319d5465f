package clienttest

import (
	"context"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/duecoordinator"
	"github.com/orreryhq/orrery/grains/engine"
	"github.com/orreryhq/orrery/grains/input"
)

// maxDueRounds bounds the due commands one EmitDue sends to a partition: far more than any
// test's backlog, so that a schedule due again and again under a clock that keeps moving
// cannot hold it forever.
const maxDueRounds = 10_000

// EmitDue does what a silo's due coordinator does, once, at the twin's clock: for each
// partition in turn it scans the due index (the engine's ScanDue, answered from its due head,
// as a coordinator's round asks it), sends what is due as one due command, as the coordinator
// builds it (input.CoordinatorPrincipal, CommandRequest.due set, an EmitOccurrences of at most
// duecoordinator.DefaultEmitMax occurrences per schedule ref and an ExpireSaga per saga ref,
// each with its ref's CAS token: due.Mutations), which the partition applies with ApplyDue, and
// repeats until nothing is due. It returns how many occurrences were enqueued plus how many
// sagas expired.
//
// A ref whose mutation fails (its creator lost a grant, its lane is full) stays due, as under a
// coordinator, which would put it on backoff: EmitDue passes it over for the rest of the call,
// and the result says nothing of it (inspect the schedule to see why). A scan or a due command
// refused as a whole is EmitDue's error. EmitDue is not a Transport call: faults do not apply to
// it, and Calls does not record it. It is safe to call concurrently with anything else.
func (t *Transport) EmitDue(ctx context.Context) (int, error) {
	total := 0
	for _, p := range t.partitions {
		n, err := p.emitDue(ctx, t)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// emitDue runs due rounds on p until nothing it has not passed over is due.
func (p *partition) emitDue(ctx context.Context, t *Transport) (int, error) {
	total := 0
	// passed are the refs sent or passed over in this call, by kind, lane, id, token and due
	// instant: a ref sent whose record is still due (a backlog) comes back due later.
	passed := map[string]bool{}
	for range maxDueRounds {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		if t.Closed() {
			return total, errClosed()
		}
		n, done, err := p.dueRound(t, passed)
		total += n
		if err != nil || done {
			return total, err
		}
	}
	return total, orrery.Errorf(orrery.CodeInternal, "clienttest: partition %d still has refs due after %d due commands", p.n, maxDueRounds)
}

// dueRound scans p's due index, paging past the refs already passed, and sends the others as
// one due command. It reports how many occurrences and expiries the command made, and done
// when nothing was left to send.
func (p *partition) dueRound(t *Transport, passed map[string]bool) (n int, done bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return 0, false, errClosed()
	}
	lim, err := batch.LoadLimits(p.store)
	if err != nil {
		return 0, false, err
	}
	now := p.clock()
	// One round's refs go in one batch, as the coordinator's: at most the partition's batch.
	maxRefs := min(duecoordinator.DefaultRefsPerRound, lim.MaxMutationsPerBatch)
	var refs []*orreryv1.DueRef
	var after []byte
	for {
		scanned := p.step(now, engine.ScanDue{Request: &orreryv1.ScanDueRequest{MaxRefs: uint32(maxRefs), After: after}}).Scanned
		if err := orrery.FromProto(scanned.GetError()); err != nil {
			return 0, false, orrery.Wrap(orrery.CodeOf(err), err, "clienttest: scan the due index of partition %d", p.n)
		}
		for _, ref := range scanned.GetRefs() {
			if key := refKey(ref); !passed[key] {
				passed[key] = true
				refs = append(refs, ref)
			}
		}
		if len(refs) > 0 {
			break
		}
		if !scanned.GetMore() || len(scanned.GetRefs()) == 0 {
			return 0, true, nil
		}
		after = scanned.GetContinuation()
	}
	req := &orreryv1.CommandRequest{Principal: input.CoordinatorPrincipal, Due: true, Batch: &orreryv1.Batch{
		CommandId: "clienttest-due-" + strconv.FormatUint(t.dueCommands.Add(1), 10),
		Mutations: due.Mutations(refs, duecoordinator.DefaultEmitMax),
	}}
	answer := make(chan *orreryv1.CommandReply, 1)
	p.step(now, engine.Command{Request: req, From: answer})
	var reply *orreryv1.CommandReply
	select {
	case reply = <-answer: // a due command is applied, never parked: answered in the step
	default:
		return 0, false, orrery.Errorf(orrery.CodeInternal, "clienttest: partition %d did not answer due command %s", p.n, req.GetBatch().GetCommandId())
	}
	if err := orrery.FromProto(reply.GetError()); err != nil {
		return 0, false, orrery.Wrap(orrery.CodeOf(err), err, "clienttest: due command %s to partition %d", req.GetBatch().GetCommandId(), p.n)
	}
	receipt := &orreryv1.Receipt{}
	if err := proto.Unmarshal(reply.GetReceipt(), receipt); err != nil {
		return 0, false, orrery.Wrap(orrery.CodeInternal, err, "clienttest: decode the receipt of due command %s", req.GetBatch().GetCommandId())
	}
	if err := orrery.FromProto(receipt.GetError()); err != nil {
		return 0, false, orrery.Wrap(orrery.CodeOf(err), err, "clienttest: due command %s to partition %d", req.GetBatch().GetCommandId(), p.n)
	}
	for _, res := range receipt.GetResults() {
		if res.GetError() != nil {
			continue // the ref stays due; it was passed over
		}
		n += len(res.GetSchedule().GetEnqueuedIds())
		if res.GetSaga() != nil {
			n++
		}
	}
	return n, false, nil
}

// refKey names a due ref: its record (kind, lane, id), token and due instant.
func refKey(ref *orreryv1.DueRef) string {
	l := ref.GetLane()
	return ref.GetKind().String() + "\x00" + l.GetNamespace() + "\x00" + l.GetQueue() + "\x00" + l.GetKey() + "\x00" + ref.GetId() +
		"\x00" + strconv.FormatUint(ref.GetToken(), 10) + "\x00" + strconv.FormatInt(ref.GetDueAtUnixMicros(), 10)
}
