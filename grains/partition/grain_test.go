package partition

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/route"
	"github.com/orreryhq/orrery/persistence"
)

const scheduleID = "0f8fad5b-d9cb-469f-a165-70867728950e"

// lane routes to partition 1 of 4, the partition the harness runs.
var lane = laneOf(1, 4)

func laneOf(partition, partitions int) *orreryv1.Lane {
	for i := 0; ; i++ {
		l := &orreryv1.Lane{Namespace: "acme", Queue: "jobs", Key: fmt.Sprint("k", i)}
		if route.Partition(l, partitions) == partition {
			return l
		}
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// harness is an actor system with one partition grain on a temp data root.
type harness struct {
	t      testing.TB
	system *actor.ActorSystem
	cfg    Config
	pid    *actor.PID
	mu     sync.Mutex
	due    []*orreryv1.NextDueNotice
}

func newHarness(t testing.TB, mutate func(*Config)) *harness {
	h := &harness{t: t, system: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))}
	h.cfg = Config{DataRoot: t.TempDir(), Partitions: 4, Logger: quiet, OnNextDue: func(n *orreryv1.NextDueNotice) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.due = append(h.due, n)
	}}
	if mutate != nil {
		mutate(&h.cfg)
	}
	h.pid = h.spawn()
	t.Cleanup(func() { h.system.Root.StopFuture(h.pid).Wait(); h.system.Shutdown() })
	return h
}

func (h *harness) spawn() *actor.PID {
	pid, err := h.system.Root.SpawnNamed(Props(h.cfg, 1), fmt.Sprintf("partition-%d", time.Now().UnixNano()))
	if err != nil {
		h.t.Fatal(err)
	}
	return pid
}

// waitDue polls until the latest next-due notice reports the instant (the notice follows the
// reply), and fails after a generous bound.
func (h *harness) waitDue(nextDue int64) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.mu.Lock()
		var last *orreryv1.NextDueNotice
		if len(h.due) > 0 {
			last = h.due[len(h.due)-1]
		}
		h.mu.Unlock()
		if last != nil && last.GetNextDueAtUnixMicros() == nextDue && last.GetPartition() == 1 {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("latest next-due notice %v, want %d", last, nextDue)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func request[T proto.Message](t testing.TB, system *actor.ActorSystem, pid *actor.PID, msg proto.Message) T {
	t.Helper()
	res, err := system.Root.RequestFuture(pid, msg, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("request %T: %v", msg, err)
	}
	out, ok := res.(T)
	if !ok {
		t.Fatalf("reply %T", res)
	}
	return out
}

func command(id string, wait time.Duration, mutations ...*orreryv1.Mutation) *orreryv1.CommandRequest {
	return &orreryv1.CommandRequest{Principal: "alice", Batch: &orreryv1.Batch{CommandId: id, Mutations: mutations}, WaitMicros: wait.Microseconds()}
}

func enqueue(id string) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: lane, Id: id, PayloadJson: `{}`}}}
}

func receive(max uint32) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: "acme", Queue: "jobs", Max: max}}}
}

func receipt(t testing.TB, r *orreryv1.CommandReply) *orreryv1.Receipt {
	t.Helper()
	if r.GetError() != nil {
		t.Fatalf("command failed: %v", orrery.FromProto(r.GetError()))
	}
	rc := &orreryv1.Receipt{}
	if err := proto.Unmarshal(r.GetReceipt(), rc); err != nil {
		t.Fatal(err)
	}
	return rc
}

func (h *harness) do(req *orreryv1.CommandRequest) *orreryv1.CommandReply {
	return request[*orreryv1.CommandReply](h.t, h.system, h.pid, req)
}

func TestCommandCommitsAndReplaysByteIdentical(t *testing.T) {
	h := newHarness(t, nil)
	first := h.do(command("c1", 0, enqueue("m1")))
	rc := receipt(t, first)
	if !rc.GetResults()[0].GetEnqueue().GetCreated() || first.GetActivationEpoch() != 1 {
		t.Fatalf("receipt %v epoch %d", rc, first.GetActivationEpoch())
	}
	again := h.do(command("c1", 0, enqueue("m1")))
	if !bytes.Equal(again.GetReceipt(), first.GetReceipt()) {
		t.Fatal("replay is not byte-identical")
	}
	conflict := h.do(command("c1", 0, enqueue("m2")))
	if !errors.Is(orrery.FromProto(conflict.GetError()), orrery.ErrIdempotencyConflict) {
		t.Fatalf("conflict: %v", conflict)
	}
	status := request[*orreryv1.InspectReply](t, h.system, h.pid, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Partition{Partition: &orreryv1.InspectPartition{}}})
	if status.GetPartition().GetAppliedIndex() != 1 {
		t.Fatalf("applied index %d after one applied command and a replay", status.GetPartition().GetAppliedIndex())
	}
}

func TestConcurrentCommandsShareGroupCommits(t *testing.T) {
	h := newHarness(t, nil)
	const n = 300
	futures := make([]*actor.Future, n)
	for i := range n {
		futures[i] = h.system.Root.RequestFuture(h.pid, command(fmt.Sprint("c", i), 0, enqueue(fmt.Sprint("m", i))), 20*time.Second)
	}
	for i, f := range futures {
		res, err := f.Result()
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		receipt(t, res.(*orreryv1.CommandReply))
	}
	status := request[*orreryv1.InspectReply](t, h.system, h.pid, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Partition{Partition: &orreryv1.InspectPartition{}}})
	idx := status.GetPartition().GetAppliedIndex()
	if idx == 0 || idx >= n {
		t.Fatalf("%d commands took %d commits; group commit should share them", n, idx)
	}
	t.Logf("%d commands in %d group commits", n, idx)
	lanePage := request[*orreryv1.InspectReply](t, h.system, h.pid, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Lane{Lane: &orreryv1.InspectLane{Lane: lane, MaxMessages: 1000}}})
	if len(lanePage.GetMessages()) != n {
		t.Fatalf("%d messages, want %d", len(lanePage.GetMessages()), n)
	}
}

func TestReopenIncrementsEpochAndKeepsState(t *testing.T) {
	h := newHarness(t, nil)
	first := h.do(command("c1", 0, enqueue("m1")))
	h.system.Root.StopFuture(h.pid).Wait()
	h.pid = h.spawn()
	again := h.do(command("c1", 0, enqueue("m1")))
	if again.GetActivationEpoch() != 2 || !bytes.Equal(again.GetReceipt(), first.GetReceipt()) {
		t.Fatalf("after reopen: epoch %d, identical receipt %v", again.GetActivationEpoch(), bytes.Equal(again.GetReceipt(), first.GetReceipt()))
	}
}

func TestSecondActivationWaitsForTheFence(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.OpenRetryMax = 50 * time.Millisecond })
	receipt(t, h.do(command("c1", 0, enqueue("m1"))))
	second := h.spawn() // same data root and partition: the lock is held
	reply := request[*orreryv1.CommandReply](t, h.system, second, command("c2", 0, enqueue("m2")))
	if !errors.Is(orrery.FromProto(reply.GetError()), orrery.ErrUnavailable) {
		t.Fatalf("second activation answered %v, want Unavailable", reply)
	}
	h.system.Root.StopFuture(h.pid).Wait()
	h.pid = second
	deadline := time.Now().Add(10 * time.Second)
	for {
		reply = h.do(command("c2", 0, enqueue("m2")))
		if reply.GetError() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("second activation never opened: %v", reply)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if reply.GetActivationEpoch() != 2 {
		t.Fatalf("epoch %d, want 2", reply.GetActivationEpoch())
	}
}

func TestLongPollReceiveWakesOnEnqueueAndTimesOut(t *testing.T) {
	h := newHarness(t, nil)
	start := time.Now()
	waiting := h.system.Root.RequestFuture(h.pid, command("r1", 20*time.Second, receive(5)), 30*time.Second)
	time.Sleep(50 * time.Millisecond) // let it park
	receipt(t, h.do(command("c1", 0, enqueue("m1"))))
	res, err := waiting.Result()
	if err != nil {
		t.Fatal(err)
	}
	msgs := receipt(t, res.(*orreryv1.CommandReply)).GetResults()[0].GetReceive().GetMessages()
	if len(msgs) != 1 || msgs[0].GetId() != "m1" || time.Since(start) > 10*time.Second {
		t.Fatalf("woke with %v after %v", msgs, time.Since(start))
	}
	start = time.Now()
	empty := h.do(command("r2", 300*time.Millisecond, receive(5)))
	if n := len(receipt(t, empty).GetResults()[0].GetReceive().GetMessages()); n != 0 || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("timed-out receive: %d messages after %v", n, time.Since(start))
	}
}

func TestLongPollWakesWhenADelayedMessageBecomesVisible(t *testing.T) {
	h := newHarness(t, nil)
	delayed := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: lane, Id: "later", PayloadJson: `{}`, DelayMicros: (300 * time.Millisecond).Microseconds()}}}
	receipt(t, h.do(command("c1", 0, delayed)))
	start := time.Now()
	got := h.do(command("r1", 20*time.Second, receive(1)))
	msgs := receipt(t, got).GetResults()[0].GetReceive().GetMessages()
	if len(msgs) != 1 || time.Since(start) > 10*time.Second {
		t.Fatalf("got %v after %v", msgs, time.Since(start))
	}
}

func TestScanDueAndNextDueNotice(t *testing.T) {
	now := time.Now()
	h := newHarness(t, nil)
	spec := &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{IntervalMicros: input.Hour, FirstDueAtUnixMicros: now.Add(-time.Minute).UnixMicro()}}}
	configure := &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
		Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: scheduleID, Spec: spec}}}}
	receipt(t, h.do(command("c1", 0, configure)))
	h.waitDue(spec.GetEvery().GetFirstDueAtUnixMicros())
	scan := request[*orreryv1.ScanDueReply](t, h.system, h.pid, &orreryv1.ScanDueRequest{MaxRefs: 10})
	if len(scan.GetRefs()) != 1 || scan.GetRefs()[0].GetToken() != 1 || scan.GetNextDueAtUnixMicros() != 0 {
		t.Fatalf("scan %v", scan)
	}
	emit := &orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: scheduleID, ExpectedGeneration: 1, Max: 32}}}
	receipt(t, h.do(command("e1", 0, emit)))
	h.waitDue(spec.GetEvery().GetFirstDueAtUnixMicros() + input.Hour)
}

func TestPendingBoundAnswersUnavailable(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxPending = 1 })
	futures := make([]*actor.Future, 50)
	for i := range futures {
		futures[i] = h.system.Root.RequestFuture(h.pid, command(fmt.Sprint("c", i), 0, enqueue(fmt.Sprint("m", i))), 20*time.Second)
	}
	refused := 0
	for _, f := range futures {
		res, err := f.Result()
		if err != nil {
			t.Fatal(err)
		}
		if errors.Is(orrery.FromProto(res.(*orreryv1.CommandReply).GetError()), orrery.ErrUnavailable) {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("50 concurrent commands against a bound of 1 were all admitted")
	}
}

func TestFailpointsFireInOrder(t *testing.T) {
	var mu sync.Mutex
	var hits []string
	record := func(name string) { mu.Lock(); hits = append(hits, name); mu.Unlock() }
	for _, name := range []string{FailpointBatchApplied, FailpointBatchCommitted, FailpointReceiptSent} {
		fp, err := NewFailpoints(name+":2", record)
		if err != nil {
			t.Fatal(err)
		}
		h := newHarness(t, func(c *Config) { c.Failpoints = fp })
		receipt(t, h.do(command("c1", 0, enqueue("m1"))))
		receipt(t, h.do(command("c2", 0, enqueue("m2"))))
		receipt(t, h.do(command("c3", 0, enqueue("m3"))))
	}
	want := fmt.Sprint([]string{FailpointBatchApplied, FailpointBatchCommitted, FailpointReceiptSent})
	if fmt.Sprint(hits) != want {
		t.Fatalf("hits %v, want each once (at the second batch): %s", hits, want)
	}
	if _, err := NewFailpoints("nope", record); err == nil {
		t.Fatal("an unknown failpoint was accepted")
	}
}

func TestMisroutedLaneIsRefused(t *testing.T) {
	h := newHarness(t, nil)
	other := laneOf(2, 4)
	r := h.do(command("c1", 0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: other, Id: "m", PayloadJson: "1"}}}))
	if res := receipt(t, r).GetResults()[0]; !errors.Is(orrery.FromProto(res.GetError()), orrery.ErrValidation) {
		t.Fatalf("a lane of partition 2 was accepted by partition 1: %v", res)
	}
}

func TestHousekeepingRemovesExpiredReceipts(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Limits = input.DefaultLimits()
		c.Limits.ReceiptRetentionMicros = (200 * time.Millisecond).Microseconds()
		c.HousekeepEvery = 50 * time.Millisecond
	})
	receipt(t, h.do(command("c1", 0, enqueue("m1"))))
	// While the receipt is kept, reusing the id for another request is a conflict; once
	// housekeeping removed it, the id is new again.
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := h.do(command("c1", 0, enqueue("m2")))
		if r.GetError() == nil {
			break
		}
		if !errors.Is(orrery.FromProto(r.GetError()), orrery.ErrIdempotencyConflict) || time.Now().After(deadline) {
			t.Fatalf("receipt never expired: %v", orrery.FromProto(r.GetError()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hourly configures schedule id in the test lane, every hour from first.
func hourly(id string, first time.Time) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
		Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: id, Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{
			Every: &orreryv1.EverySpec{IntervalMicros: input.Hour, FirstDueAtUnixMicros: first.UnixMicro()}}}}}}}
}

// TestDueFloorNeverHidesAnEarlierEntry: after the partition's earliest due instant moved late,
// a newly written earlier entry is still reported and scanned.
func TestDueFloorNeverHidesAnEarlierEntry(t *testing.T) {
	now := time.Now()
	h := newHarness(t, nil)
	late := now.Add(time.Hour)
	receipt(t, h.do(command("c1", 0, hourly("00000000-0000-4000-8000-000000000001", late))))
	h.waitDue(late.UnixMicro())
	early := now.Add(-time.Minute)
	receipt(t, h.do(command("c2", 0, hourly("00000000-0000-4000-8000-000000000002", early))))
	h.waitDue(early.UnixMicro())
	scan := request[*orreryv1.ScanDueReply](t, h.system, h.pid, &orreryv1.ScanDueRequest{MaxRefs: 10})
	if len(scan.GetRefs()) != 1 || scan.GetRefs()[0].GetDueAtUnixMicros() != early.UnixMicro() {
		t.Fatalf("scan after an earlier entry was written: %v", scan)
	}
}

// TestLargePayloadBacklogEmitsWithinTheTransactionLimit: a schedule whose template is large
// (200 KiB) with a backlog is emitted by coordinator-shaped commands (16 emits of up to 32)
// without ever exceeding the partition's transaction limit: each command emits what fits and
// leaves the rest due, instead of failing for good.
func TestLargePayloadBacklogEmitsWithinTheTransactionLimit(t *testing.T) {
	// The smallest memtable a staggered partition has (persistence.Options.FlushStagger).
	h := newHarness(t, func(c *Config) { c.Store.MemTableBytes = persistence.DefaultMemTableBytes * 25 / 32 })
	payload := `"` + strings.Repeat("x", 200<<10) + `"`
	var emits []*orreryv1.Mutation
	for i := range 4 {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012x", i)
		receipt(t, h.do(command(fmt.Sprint("configure-", i), 0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
			Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: id, Template: &orreryv1.MessageTemplate{PayloadJson: payload},
				Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{IntervalMicros: input.Second,
					FirstDueAtUnixMicros: time.Now().Add(-10 * time.Second).UnixMicro()}}}}}}})))
		emits = append(emits, &orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: id, ExpectedGeneration: 1, Max: 32}}})
	}
	total := 0
	for round := 0; total < 4*10; round++ {
		if round > 100 {
			t.Fatalf("only %d occurrences after 100 rounds", total)
		}
		rc := receipt(t, h.do(command(fmt.Sprint("emit-", round), 0, emits...)))
		emitted := 0
		for _, r := range rc.GetResults() {
			if r.GetError() != nil {
				t.Fatalf("round %d: %v", round, orrery.FromProto(r.GetError()))
			}
			emitted += len(r.GetSchedule().GetEnqueuedIds())
		}
		if emitted == 0 {
			t.Fatalf("round %d emitted nothing with a backlog left", round)
		}
		total += emitted
	}
}

// TestReceiveOfLargeMessagesStaysWithinTheTransactionLimit: a worker-shaped receive (many
// messages at once) of a lane of near-maximal messages succeeds on the smallest staggered
// memtable, leasing what fits, instead of failing for good as one transaction too large.
func TestReceiveOfLargeMessagesStaysWithinTheTransactionLimit(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Store.MemTableBytes = persistence.DefaultMemTableBytes * 25 / 32 })
	payload := `"` + strings.Repeat("x", 250<<10) + `"`
	const count = 8
	for i := range count {
		m := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: lane, Id: fmt.Sprint("big-", i), PayloadJson: payload}}}
		receipt(t, h.do(command(fmt.Sprint("enqueue-", i), 0, m)))
	}
	received := 0
	for round := 0; received < count; round++ {
		if round > count {
			t.Fatalf("only %d of %d messages received after %d receives", received, count, round)
		}
		res := receipt(t, h.do(command(fmt.Sprint("receive-", round), 0, receive(count)))).GetResults()[0]
		if res.GetError() != nil {
			t.Fatalf("receive %d: %v", round, orrery.FromProto(res.GetError()))
		}
		if len(res.GetReceive().GetMessages()) == 0 {
			t.Fatalf("receive %d got nothing with %d messages visible", round, count-received)
		}
		received += len(res.GetReceive().GetMessages())
	}
}

// TestNextDueNoticeOnlyWhenEarlier: a commit that writes a due entry later than what the
// coordinator was last told sends no notice (the coordinator wakes earlier and scans); one
// earlier than that does, naming the entry.
func TestNextDueNoticeOnlyWhenEarlier(t *testing.T) {
	now := time.Now()
	h := newHarness(t, nil)
	notices := func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.due)
	}
	inAnHour := now.Add(time.Hour)
	receipt(t, h.do(command("c1", 0, hourly("00000000-0000-4000-8000-000000000001", inAnHour))))
	h.waitDue(inAnHour.UnixMicro())
	before := notices()
	receipt(t, h.do(command("c2", 0, hourly("00000000-0000-4000-8000-000000000002", now.Add(2*time.Hour)))))
	receipt(t, h.do(command("c3", 0, enqueue("m1")))) // the actor finished c2's commit before this reply
	if got := notices(); got != before {
		t.Fatalf("a later due entry sent %d notices, want none", got-before)
	}
	inAMinute := now.Add(time.Minute)
	receipt(t, h.do(command("c4", 0, hourly("00000000-0000-4000-8000-000000000003", inAMinute))))
	h.waitDue(inAMinute.UnixMicro())
}

// TestDueScansFollowEveryCommit: due scans are answered from the partition's in-memory due
// head, loaded once; every later commit that writes the due index (an emit moving an entry, a
// new earlier schedule, a delete) shows in the next scan without a reload.
func TestDueScansFollowEveryCommit(t *testing.T) {
	now := time.Now()
	h := newHarness(t, nil)
	scan := func() *orreryv1.ScanDueReply {
		t.Helper()
		return request[*orreryv1.ScanDueReply](t, h.system, h.pid, &orreryv1.ScanDueRequest{MaxRefs: 10})
	}
	a, b := "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"
	first := now.Add(-time.Minute)
	receipt(t, h.do(command("c1", 0, hourly(a, first))))
	if s := scan(); len(s.GetRefs()) != 1 || s.GetRefs()[0].GetId() != a {
		t.Fatalf("first scan %v", s)
	}
	emit := &orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: a, ExpectedGeneration: 1, Max: 32}}}
	receipt(t, h.do(command("e1", 0, emit)))
	if s := scan(); len(s.GetRefs()) != 0 || s.GetNextDueAtUnixMicros() != first.UnixMicro()+input.Hour {
		t.Fatalf("scan after the emit %v, want no refs and next due %d", s, first.UnixMicro()+input.Hour)
	}
	receipt(t, h.do(command("c2", 0, hourly(b, now.Add(-time.Second)))))
	s := scan()
	if len(s.GetRefs()) != 1 || s.GetRefs()[0].GetId() != b {
		t.Fatalf("scan after an earlier schedule %v", s)
	}
	del := &orreryv1.Mutation{Kind: &orreryv1.Mutation_DeleteSchedule{DeleteSchedule: &orreryv1.DeleteSchedule{Lane: lane, ScheduleId: b, ExpectedRevision: 1}}}
	if r := receipt(t, h.do(command("d1", 0, del))); r.GetError() != nil || r.GetResults()[0].GetError() != nil {
		t.Fatalf("delete: %v", r)
	}
	if s := scan(); len(s.GetRefs()) != 0 {
		t.Fatalf("scan after the delete %v", s)
	}
}

// TestParkedReceiveJoinsTheCommitThatMakesItReceivable: a long-poll receive parked on a queue
// is applied in the same group commit as the enqueue that gives it a message (one logged
// time, one sync), and a receive parked on another queue waits on and times out empty.
func TestParkedReceiveJoinsTheCommitThatMakesItReceivable(t *testing.T) {
	h := newHarness(t, nil)
	waiting := h.system.Root.RequestFuture(h.pid, command("r1", 20*time.Second, receive(5)), 30*time.Second)
	other := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: "acme", Queue: "other", Max: 1}}}
	idle := h.system.Root.RequestFuture(h.pid, command("r2", 2*time.Second, other), 30*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		status := request[*orreryv1.InspectReply](t, h.system, h.pid, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Partition{Partition: &orreryv1.InspectPartition{}}})
		if status.GetPartition().GetPendingCommands() == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receives did not park: %v", status)
		}
		time.Sleep(5 * time.Millisecond)
	}
	enqueued := receipt(t, h.do(command("c1", 0, enqueue("m1"))))
	res, err := waiting.Result()
	if err != nil {
		t.Fatal(err)
	}
	woke := receipt(t, res.(*orreryv1.CommandReply))
	if msgs := woke.GetResults()[0].GetReceive().GetMessages(); len(msgs) != 1 || msgs[0].GetId() != "m1" {
		t.Fatalf("woken receive got %v", msgs)
	}
	if woke.GetLoggedTimeUnixMicros() != enqueued.GetLoggedTimeUnixMicros() {
		t.Errorf("receive logged at %d, the enqueue at %d: not one group commit", woke.GetLoggedTimeUnixMicros(), enqueued.GetLoggedTimeUnixMicros())
	}
	res, err = idle.Result()
	if err != nil {
		t.Fatal(err)
	}
	if msgs := receipt(t, res.(*orreryv1.CommandReply)).GetResults()[0].GetReceive().GetMessages(); len(msgs) != 0 {
		t.Fatalf("receive on the other queue got %v", msgs)
	}
}

// TestParkedReceivesThatOverflowTheGroupWaitForTheirOwn: parked receives whose joining would
// take the group past the transaction limit stay out of it; the group commits without them
// and they are applied after, each getting its message.
func TestParkedReceivesThatOverflowTheGroupWaitForTheirOwn(t *testing.T) {
	h := newHarness(t, nil)
	payload := `"` + strings.Repeat("x", 150<<10) + `"`
	var waiting []*actor.Future
	var enqueues []*orreryv1.Mutation
	for i := range 3 {
		queue := fmt.Sprint("q", i)
		l := &orreryv1.Lane{Namespace: "acme", Queue: queue}
		for k := 0; ; k++ {
			if l.Key = fmt.Sprint("k", k); route.Partition(l, h.cfg.Partitions) == 1 {
				break
			}
		}
		recv := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: "acme", Queue: queue, Max: 1}}}
		waiting = append(waiting, h.system.Root.RequestFuture(h.pid, command(fmt.Sprint("r", i), 20*time.Second, recv), 30*time.Second))
		enqueues = append(enqueues, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: l, Id: fmt.Sprint("big-", i), PayloadJson: payload}}})
	}
	deadline := time.Now().Add(10 * time.Second)
	for request[*orreryv1.InspectReply](t, h.system, h.pid, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Partition{Partition: &orreryv1.InspectPartition{}}}).GetPartition().GetPendingCommands() != 3 {
		if time.Now().After(deadline) {
			t.Fatal("the receives did not park")
		}
		time.Sleep(5 * time.Millisecond)
	}
	enqueued := receipt(t, h.do(command("c1", 0, enqueues...)))
	for i, f := range waiting {
		res, err := f.Result()
		if err != nil {
			t.Fatal(err)
		}
		r := receipt(t, res.(*orreryv1.CommandReply))
		if msgs := r.GetResults()[0].GetReceive().GetMessages(); len(msgs) != 1 || msgs[0].GetId() != fmt.Sprint("big-", i) {
			t.Fatalf("receive %d got %v", i, msgs)
		}
		if r.GetLoggedTimeUnixMicros() <= enqueued.GetLoggedTimeUnixMicros() {
			t.Errorf("receive %d logged at %d, not after the enqueue at %d: it joined a group over the limit", i, r.GetLoggedTimeUnixMicros(), enqueued.GetLoggedTimeUnixMicros())
		}
	}
}
