package clienttest

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/engine"
	"github.com/orreryhq/orrery/grains/kv"
)

// term is the Raft term of every twin partition: one leader, which never changes.
const term = 1

// partition is one partition of the twin: the partition engine over a kv.Memory, driven as
// the partition grain drives it (partition/grain.go), with an apply loop in place of Raft and
// of the state machine (partition/machine.go). It is the engine's State.
type partition struct {
	n       int
	clock   func() time.Time
	applier batch.Applier // routes to this partition; Limits and ZoneRules are set per entry
	timers  *sync.WaitGroup

	// mu serialises the engine's steps, which are not safe for concurrent use, and guards
	// everything below.
	mu           sync.Mutex
	engine       *engine.Engine
	store        *kv.Memory
	appliedIndex uint64
	loggedMicros int64
	armed        map[engine.TimerKind]*armedTimer
	// closing is set by stop: nothing is stepped or armed after it, and no reply sent.
	closing bool
}

// armedTimer is one engine timer armed on real time, to step at at.
type armedTimer struct {
	timer *time.Timer
	at    time.Time
}

// openPartition returns partition n of partitions over store, its engine open.
func openPartition(t *Transport, n, partitions int, store *kv.Memory) *partition {
	p := &partition{
		n: n, clock: t.clock, store: store, timers: &t.timers,
		applier: batch.Applier{Limits: t.limits, Partitions: partitions, Partition: n,
			// One replica, of this binary: it applies under the newest apply version it knows,
			// unless the twin stands for an older one (WithApplyVersion).
			ApplyVersion: cmp.Or(t.applyVersion, batch.KnownApplyVersion)},
		armed: map[engine.TimerKind]*armedTimer{},
	}
	p.engine = engine.New(engine.Config{
		Partition: n, Partitions: partitions, Applier: p.applier, Limits: t.limits,
		MaxPending: DefaultMaxPending, MaxWaiters: DefaultMaxWaiters, MaxWait: t.maxWait,
		HousekeepEvery: DefaultHousekeepEvery, Logger: slog.New(slog.DiscardHandler),
	}, p)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.step(p.clock(), engine.Open{})
	return p
}

// View implements engine.State.
func (p *partition) View(fn func(kv.Reader) error) error { return fn(p.store) }

// Applied implements engine.State.
func (p *partition) Applied() (uint64, int64) { return p.appliedIndex, p.loggedMicros }

// Term implements engine.State.
func (p *partition) Term() uint64 { return term }

// command steps the engine with req and waits for its reply, the caller's context or the
// twin's Close.
func (p *partition) command(ctx context.Context, closed <-chan struct{}, req *orreryv1.CommandRequest) (*orreryv1.CommandReply, error) {
	answer := make(chan *orreryv1.CommandReply, 1)
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return nil, errClosed()
	}
	p.step(p.clock(), engine.Command{Request: req, From: answer})
	p.mu.Unlock()
	select {
	case r := <-answer: // answered in the step: anything but a parked receive
		return r, nil
	default:
	}
	select {
	case r := <-answer:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-closed:
		return nil, errClosed()
	}
}

// inspect answers req from the engine, with what the partition grain adds to a status.
func (p *partition) inspect(req *orreryv1.InspectRequest) *orreryv1.InspectReply {
	p.mu.Lock()
	defer p.mu.Unlock()
	reply := p.engine.Inspect(p.clock(), req)
	if status := reply.GetPartition(); status != nil {
		status.Silo = Silo
		if lim, err := batch.LoadLimits(p.store); err == nil {
			status.CommandLimits = lim.CommandLimits()
		}
	}
	return reply
}

// step steps the engine with ev at now and performs its Ready. The caller holds p.mu.
func (p *partition) step(now time.Time, ev engine.Event) engine.Ready {
	rd := p.engine.Step(now, ev)
	p.perform(now, rd)
	return rd
}

// perform does what a Ready asks, in its order: replies (to the reply channel each command
// came with), timers, then proposals, each accepted at the next log index and applied at once,
// its Proposed and Applied events stepped back. Next-due notices are dropped: the twin has no
// due coordinator to tell (EmitDue scans instead). The caller holds p.mu.
func (p *partition) perform(now time.Time, rd engine.Ready) {
	for _, r := range rd.Replies {
		if to, ok := r.To.(chan *orreryv1.CommandReply); ok && !p.closing {
			select {
			case to <- r.Reply:
			default: // one reply per command: never taken
			}
		}
	}
	for _, tm := range rd.Timers {
		p.arm(tm)
	}
	for _, proposal := range rd.Propose {
		index := p.appliedIndex + 1
		p.step(now, engine.Proposed{Ref: proposal.Ref, Index: index, Term: term})
		p.step(now, p.apply(index, proposal))
	}
}

// apply applies the entry of proposal at index as the partition's state machine applies a
// committed entry (machine.applyEntry), at the next logged time, max(clock, last + 1 µs), in
// one atomic write of the store, and returns the Applied event of its round. An error of the
// apply is the entry's reply, and it writes nothing. The event carries no visibility floors:
// a kv.Memory keeps no tombstones for a scan to step over. The caller holds p.mu.
func (p *partition) apply(index uint64, proposal engine.Propose) engine.Applied {
	logged := max(p.clock().UnixMicro(), p.loggedMicros+1)
	writes := kv.NewBuffer(p.store)
	due := &engine.Recorder{View: writes}
	out, err := p.applyEntry(due, proposal, logged)
	if err == nil {
		err = writes.Commit()
	}
	applied := engine.Applied{}
	if err != nil {
		out = engine.EntryApplied{Reply: engine.ErrorReply(err)}
	} else {
		applied.MinDueWritten, applied.DueWrites, applied.Visible = due.MinDue, due.Writes, due.Visible
	}
	p.appliedIndex, p.loggedMicros = index, logged
	applied.Results = []engine.Result{{Index: index, Term: term, Reply: out.Reply, Waiting: out.Waiting}}
	return applied
}

// applyEntry applies one entry's command onto v as the partition's state machine does
// (engine.ApplyEntry), under the partition's limits: a SetLimits entry changes them. An error
// is the entry's reply, and it writes nothing.
func (p *partition) applyEntry(v kv.View, proposal engine.Propose, logged int64) (engine.EntryApplied, error) {
	applier := p.applier
	lim, err := batch.LoadLimits(v)
	if err != nil {
		return engine.EntryApplied{}, err
	}
	applier.Limits = lim
	out, err := engine.ApplyEntry(applier, v, proposal.Principal, proposal.Command, logged)
	if err != nil {
		return engine.EntryApplied{}, orrery.Wrap(orrery.CodeOf(err), err, "clienttest: partition %d", p.n)
	}
	return out, nil
}

// arm sets the engine's timer tm.Kind on real time, for what is left of tm.At on the clock (a
// zero At only stops it). The caller holds p.mu.
func (p *partition) arm(tm engine.Timer) {
	if old := p.armed[tm.Kind]; old != nil {
		delete(p.armed, tm.Kind)
		if old.timer.Stop() {
			p.timers.Done()
		}
	}
	if tm.At.IsZero() || p.closing {
		return
	}
	kind, armed := tm.Kind, &armedTimer{at: tm.At}
	p.timers.Add(1)
	armed.timer = time.AfterFunc(max(tm.At.Sub(p.clock()), 0), func() {
		defer p.timers.Done()
		p.fire(kind, armed)
	})
	p.armed[kind] = armed
}

// fire steps the event of timer kind, unless it was re-armed or stopped meanwhile, at the
// instant it was armed for or the clock's time, whichever is later.
func (p *partition) fire(kind engine.TimerKind, armed *armedTimer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing || p.armed[kind] != armed {
		return
	}
	delete(p.armed, kind)
	now := p.clock()
	if now.Before(armed.at) {
		now = armed.at
	}
	if ev := kind.Fired(); ev != nil {
		p.step(now, ev)
	}
}

// stop steps the engine's Stop, dropping its replies (the callers waiting see the twin closed),
// and stops the timers.
func (p *partition) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closing = true
	p.step(p.clock(), engine.Stop{})
	for kind := range p.armed {
		p.arm(engine.Timer{Kind: kind})
	}
}
