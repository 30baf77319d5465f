package engine

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/route"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// t0 is where every test's time starts.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// memState is a State over an in-memory partition, counting its reads.
type memState struct {
	mem    *kv.Memory
	index  uint64
	logged int64
	term   uint64
	views  int
}

func (s *memState) View(fn func(kv.Reader) error) error {
	s.views++
	return fn(s.mem)
}

func (s *memState) Applied() (uint64, int64) { return s.index, s.logged }
func (s *memState) Term() uint64             { return s.term }

// harness drives an Engine as the partition grain does, with a log and an apply of its own in
// place of Raft: proposals are accepted in order (unless refuse is set) and applied when the
// test calls commit. Time moves only when the test sets now.
type harness struct {
	t       rapid.TB // a *testing.T, or a property's *rapid.T
	e       *Engine
	state   *memState
	applier batch.Applier
	now     time.Time
	// refuse, when set, is the error every proposal gets.
	refuse error
	// log holds the accepted entries not yet applied, in order.
	log []entry
	// replies are the replies sent so far, by sender; notices the next-due notices; timers
	// each timer's armed instant (zero: disarmed); answeredApplied counts Readies that
	// answered applied entries.
	replies         map[string][]*orreryv1.CommandReply
	notices         []*orreryv1.NextDueNotice
	timers          map[TimerKind]time.Time
	answeredApplied int
	// stages are the Ready.Stages of every step, in order.
	stages []StageTiming
	// writes, when set, counts what the applies write.
	writes *writeCount
}

// writeCount is a kv.View that counts the keys set and deleted through it and their bytes.
type writeCount struct {
	kv.View
	sets, deletes, bytes int
}

func (w *writeCount) Set(key, value []byte) error {
	w.sets++
	w.bytes += len(key) + len(value)
	return w.View.Set(key, value)
}

func (w *writeCount) Delete(key []byte) error {
	w.deletes++
	w.bytes += len(key)
	return w.View.Delete(key)
}

// entry is an accepted proposal.
type entry struct {
	index, term uint64
	principal   string
	cmd         *orreryv1.PartitionCommand // decoded, for the tests' checks
	command     []byte                     // as proposed, for ApplyEntry
}

func newHarness(t rapid.TB, mutate func(*Config)) *harness {
	lim := input.DefaultLimits()
	h := &harness{
		t: t, now: t0, state: &memState{mem: kv.NewMemory(), term: 3},
		applier: batch.Applier{Limits: lim, Partitions: 1, Partition: 0},
		replies: map[string][]*orreryv1.CommandReply{}, timers: map[TimerKind]time.Time{},
	}
	if err := grants.ApplyPut(h.state.mem, HousekeepingPrincipal, grants.Everything("alice")); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Partition: 0, Partitions: 1, Applier: h.applier, MaxPending: 100, MaxWaiters: 10,
		MaxWait: 30 * time.Second, HousekeepEvery: 10 * time.Second, Logger: quiet}
	if mutate != nil {
		mutate(&cfg)
	}
	h.e = New(cfg, h.state)
	h.step(Open{})
	return h
}

// step steps the engine at h.now and performs its Ready as the grain does; it returns the Ready.
func (h *harness) step(event Event) Ready {
	h.t.Helper()
	rd := h.e.Step(h.now, event)
	for _, r := range rd.Replies {
		to := r.To.(string)
		h.replies[to] = append(h.replies[to], r.Reply)
	}
	if rd.AnsweredApplied {
		h.answeredApplied++
	}
	h.notices = append(h.notices, rd.Notices...)
	h.stages = append(h.stages, rd.Stages...)
	for _, tm := range rd.Timers {
		h.timers[tm.Kind] = tm.At
	}
	for _, p := range rd.Propose {
		if h.refuse != nil {
			h.step(Proposed{Ref: p.Ref, Err: h.refuse})
			continue
		}
		cmd := &orreryv1.PartitionCommand{}
		if err := proto.Unmarshal(p.Command, cmd); err != nil {
			h.t.Fatal(err)
		}
		index := h.state.index + uint64(len(h.log)) + 1
		h.log = append(h.log, entry{index: index, term: h.state.term, principal: p.Principal, cmd: cmd, command: p.Command})
		h.step(Proposed{Ref: p.Ref, Index: index, Term: h.state.term})
	}
	return rd
}

// commit applies every accepted entry, each at its own logged time, as the state machine does,
// and steps the engine with the round.
func (h *harness) commit() {
	h.t.Helper()
	applied := Applied{}
	for _, e := range h.log {
		var view kv.View = h.state.mem
		if h.writes != nil {
			h.writes.View = view
			view = h.writes
		}
		rec := &Recorder{View: view}
		logged := max(h.now.UnixMicro(), h.state.logged+1)
		out, err := ApplyEntry(h.applier, rec, e.principal, e.command, logged)
		if err != nil {
			h.t.Fatal(err)
		}
		reply := out.Reply
		h.state.index, h.state.logged = e.index, logged
		applied.Results = append(applied.Results, Result{Index: e.index, Term: e.term, Reply: reply, Waiting: out.Waiting})
		applied.DueWrites = append(applied.DueWrites, rec.Writes...)
		applied.Visible = append(applied.Visible, rec.Visible...)
		if rec.MinDue > 0 && (applied.MinDueWritten == 0 || rec.MinDue < applied.MinDueWritten) {
			applied.MinDueWritten = rec.MinDue
		}
	}
	h.log = nil
	h.step(applied)
}

// scan steps a ScanDue event and returns its answer.
func (h *harness) scan(req *orreryv1.ScanDueRequest) *orreryv1.ScanDueReply {
	h.t.Helper()
	rd := h.step(ScanDue{Request: req})
	if rd.Scanned == nil {
		h.t.Fatal("a ScanDue event left Ready.Scanned nil")
	}
	return rd.Scanned
}

// command steps a Command from sender.
func (h *harness) command(from string, req *orreryv1.CommandRequest) {
	h.step(Command{Request: req, From: from})
}

// answers returns the replies sent to from.
func (h *harness) answers(from string) []*orreryv1.CommandReply { return h.replies[from] }

// fire advances the time to timer kind's instant and steps its event.
func (h *harness) fire(kind TimerKind) {
	h.t.Helper()
	at := h.timers[kind]
	if at.IsZero() {
		h.t.Fatalf("timer %d is not armed", kind)
	}
	h.now = at
	h.timers[kind] = time.Time{}
	switch kind {
	case WaitTimer:
		h.step(WaitTimerFired{})
	case HousekeepTimer:
		h.step(HousekeepTimerFired{})
	case CheckTimer:
		h.step(CheckTimerFired{})
	}
}

var lane = func() *orreryv1.Lane {
	for i := 0; ; i++ {
		l := &orreryv1.Lane{Namespace: "acme", Queue: "jobs", Key: "k" + string(rune('a'+i))}
		if route.Partition(l, 1) == 0 {
			return l
		}
	}
}()

func batchOf(id string, muts ...*orreryv1.Mutation) *orreryv1.Batch {
	return &orreryv1.Batch{CommandId: id, Mutations: muts}
}

func request(id string, muts ...*orreryv1.Mutation) *orreryv1.CommandRequest {
	return &orreryv1.CommandRequest{Principal: "alice", Batch: batchOf(id, muts...)}
}

func enqueue(id string, delay time.Duration) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: lane, Id: id, PayloadJson: `{}`, DelayMicros: delay.Microseconds()}}}
}

func receive() *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: "acme", Queue: "jobs", Max: 10}}}
}

// longPoll is a waiting receive of wait.
func longPoll(id string, wait time.Duration) *orreryv1.CommandRequest {
	req := request(id, receive())
	req.WaitMicros = wait.Microseconds()
	return req
}

// abandon is the abandon of longPoll(id, ...).
func abandon(id string) *orreryv1.CommandRequest {
	req := request(id, receive())
	req.Abandon = true
	return req
}

func configure(id string, first time.Time) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
		Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: id, Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{
			Every: &orreryv1.EverySpec{IntervalMicros: 3600 * input.Second, FirstDueAtUnixMicros: first.UnixMicro()}}}}}}}
}

func scheduleID(i int) string { return "00000000-0000-4000-8000-00000000000" + string(rune('0'+i)) }

// receiptOf decodes a reply's receipt, failing on an error reply.
func receiptOf(t testing.TB, r *orreryv1.CommandReply) *orreryv1.Receipt {
	t.Helper()
	if err := orrery.FromProto(r.GetError()); err != nil {
		t.Fatalf("reply error: %v", err)
	}
	rc := &orreryv1.Receipt{}
	if err := proto.Unmarshal(r.GetReceipt(), rc); err != nil {
		t.Fatal(err)
	}
	return rc
}
