// Package coordinatortest owns Twin, the in-memory twin of the due coordinator's Partitions
// seam: partitions that are kv.Memory stores applying commands with the deterministic batch
// applier and answering ScanDue from the due index, at logged times read from a clock, with
// hooks to inject failures and races and a log of every call.
package coordinatortest

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// Hooks inject behaviour into a Twin's calls. Each runs without the twin's locks held, so it
// may use the twin (Apply a racing command, say).
type Hooks struct {
	// BeforeScan runs before a ScanDue is answered; a non-nil error is returned instead.
	BeforeScan func(ctx context.Context, partition int, req *orreryv1.ScanDueRequest) error
	// BeforeCommand runs before a command is applied; a non-nil error is returned instead and
	// nothing is applied.
	BeforeCommand func(ctx context.Context, partition int, req *orreryv1.CommandRequest) error
	// AfterCommand runs after a command was applied; a non-nil error is returned instead of
	// the reply, as if the reply had been lost.
	AfterCommand func(partition int, req *orreryv1.CommandRequest, reply *orreryv1.CommandReply) error
}

// Call is one ScanDue or Command the twin received, in arrival order.
type Call struct {
	// Kind is "scan" or "command".
	Kind string
	// Partition is the partition called.
	Partition int
	// CommandID and Mutations describe a command's batch.
	CommandID string
	Mutations []*orreryv1.Mutation
	// After is a scan's continuation.
	After []byte
	// LoggedTimeMicros is the partition's logged time for the call.
	LoggedTimeMicros int64
}

// Twin is a set of in-memory partitions. It is safe for concurrent use; each partition
// serializes its own calls, as the partition grain does.
type Twin struct {
	clock   clock.Clock
	applier batch.Applier
	parts   []*part

	mu     sync.Mutex
	hooks  Hooks
	notify func(*orreryv1.NextDueNotice)
	calls  []Call
}

// part is one partition: its store and last logged time.
type part struct {
	mu           sync.Mutex
	store        *kv.Memory
	loggedMicros int64
}

// New returns a twin of partitions 0..partitions-1, empty, applying under limits, taking
// logged time from c.
func New(c clock.Clock, limits input.Limits, partitions int) *Twin {
	// One replica, of this binary: it applies under the newest apply version it knows.
	t := &Twin{clock: c, applier: batch.Applier{Limits: limits, ApplyVersion: batch.KnownApplyVersion}}
	for range partitions {
		t.parts = append(t.parts, &part{store: kv.NewMemory()})
	}
	return t
}

// Grant puts a grant on every partition, as a PutGrant fanned out by an Orrery principal
// would, without a call, a logged time or a hint.
func (t *Twin) Grant(put *orreryv1.PutGrant) error {
	for n, p := range t.parts {
		p.mu.Lock()
		err := grants.ApplyPut(p.store, input.SystemPrincipalPrefix+"coordinatortest", put)
		p.mu.Unlock()
		if err != nil {
			return fmt.Errorf("partition %d: %w", n, err)
		}
	}
	return nil
}

// SetHooks replaces the hooks.
func (t *Twin) SetHooks(h Hooks) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hooks = h
}

// SetNotify sets the function told each partition's earliest due instant after every applied
// command, as a partition grain tells its silo's coordinator (nil: no hints).
func (t *Twin) SetNotify(f func(*orreryv1.NextDueNotice)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.notify = f
}

// Calls returns the calls received so far.
func (t *Twin) Calls() []Call {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Call(nil), t.calls...)
}

// ScanDue implements the coordinator's Partitions.
func (t *Twin) ScanDue(ctx context.Context, partition int, req *orreryv1.ScanDueRequest) (*orreryv1.ScanDueReply, error) {
	p, err := t.part(partition)
	if err != nil {
		return nil, err
	}
	if h := t.currentHooks().BeforeScan; h != nil {
		if err := h(ctx, partition, req); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	logged := max(t.clock.Now().UnixMicro(), p.loggedMicros)
	res, err := due.ScanDue(p.store, logged, due.Budget{MaxRefs: int(req.GetMaxRefs()), After: req.GetAfter()})
	p.mu.Unlock()
	t.record(Call{Kind: "scan", Partition: partition, After: req.GetAfter(), LoggedTimeMicros: logged})
	if err != nil {
		return &orreryv1.ScanDueReply{Error: orrery.AsError(err).Proto(), LoggedTimeUnixMicros: logged}, nil
	}
	return &orreryv1.ScanDueReply{
		Refs: res.Refs, More: res.More, Continuation: res.Continuation,
		NextDueAtUnixMicros: res.NextDueAtMicros, LoggedTimeUnixMicros: logged,
	}, nil
}

// Command implements the coordinator's Partitions.
func (t *Twin) Command(ctx context.Context, partition int, req *orreryv1.CommandRequest) (*orreryv1.CommandReply, error) {
	if _, err := t.part(partition); err != nil {
		return nil, err
	}
	hooks := t.currentHooks()
	if hooks.BeforeCommand != nil {
		if err := hooks.BeforeCommand(ctx, partition, req); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	reply, logged := t.apply(partition, req.GetPrincipal(), req.GetBatch(), req.GetDue())
	t.record(Call{Kind: "command", Partition: partition, CommandID: req.GetBatch().GetCommandId(), Mutations: req.GetBatch().GetMutations(), LoggedTimeMicros: logged})
	if hooks.AfterCommand != nil {
		if err := hooks.AfterCommand(partition, req, reply); err != nil {
			return nil, err
		}
	}
	return reply, nil
}

// Apply applies a batch as principal outside the seam (no hooks, no call log), for test
// setup and racing writers, and returns its receipt or the envelope error.
func (t *Twin) Apply(partition int, principal string, b *orreryv1.Batch) (*orreryv1.Receipt, error) {
	if _, err := t.part(partition); err != nil {
		return nil, err
	}
	reply, _ := t.apply(partition, principal, b, false)
	if err := orrery.FromProto(reply.GetError()); err != nil {
		return nil, err
	}
	return batchReceipt(reply)
}

// View runs fn on partition's store with the partition locked: to read it, or to write
// directly (bulk setup bypassing the command path).
func (t *Twin) View(partition int, fn func(v kv.View) error) error {
	p, err := t.part(partition)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return fn(p.store)
}

// apply runs one batch (a due command when due, as a partition applies it: batch.ApplyDue) at
// the partition's next logged time and then tells the notify function the partition's earliest
// due instant.
func (t *Twin) apply(partition int, principal string, b *orreryv1.Batch, due bool) (*orreryv1.CommandReply, int64) {
	p := t.parts[partition]
	p.mu.Lock()
	logged := max(t.clock.Now().UnixMicro(), p.loggedMicros+1)
	p.loggedMicros = logged
	writes := kv.NewBuffer(p.store)
	var encoded []byte
	var err error
	if due {
		var receipt *orreryv1.Receipt
		if receipt, err = t.applier.ApplyDue(writes, principal, b, logged); err == nil {
			encoded, err = record.Marshal(receipt)
		}
	} else {
		var out *batch.Outcome
		if out, err = t.applier.AsLeader(b).ApplyBatch(writes, principal, b, logged); err == nil {
			encoded = out.ReceiptBytes
		}
	}
	if err == nil {
		err = writes.Commit()
	}
	var reply *orreryv1.CommandReply
	if err != nil {
		reply = &orreryv1.CommandReply{Error: orrery.AsError(err).Proto()}
	} else {
		reply = &orreryv1.CommandReply{Receipt: encoded}
	}
	earliest, scanErr := earliestDue(p.store)
	p.mu.Unlock()
	t.mu.Lock()
	notify := t.notify
	t.mu.Unlock()
	if notify != nil && scanErr == nil && earliest != 0 {
		notify(&orreryv1.NextDueNotice{Partition: int32(partition), NextDueAtUnixMicros: earliest})
	}
	return reply, logged
}

// earliestDue is the first instant of the due index (zero if it is empty).
func earliestDue(v kv.Reader) (int64, error) {
	res, err := due.ScanDue(v, input.MaxInstantMicros, due.Budget{MaxRefs: 1})
	if err != nil {
		return 0, err
	}
	if len(res.Refs) > 0 {
		return res.Refs[0].GetDueAtUnixMicros(), nil
	}
	return res.NextDueAtMicros, nil
}

func (t *Twin) part(partition int) (*part, error) {
	if partition < 0 || partition >= len(t.parts) {
		return nil, orrery.Errorf(orrery.CodeUnavailable, "no partition %d", partition)
	}
	return t.parts[partition], nil
}

func (t *Twin) currentHooks() Hooks {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.hooks
}

func (t *Twin) record(c Call) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls = append(t.calls, c)
}

// batchReceipt decodes a reply's receipt.
func batchReceipt(reply *orreryv1.CommandReply) (*orreryv1.Receipt, error) {
	r := &orreryv1.Receipt{}
	if err := proto.Unmarshal(reply.GetReceipt(), r); err != nil {
		return nil, fmt.Errorf("decode receipt: %w", err)
	}
	return r, nil
}
