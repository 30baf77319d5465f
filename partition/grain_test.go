package partition

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/duecoordinator"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/route"
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

// harness is an actor system with one partition grain on a host of four partitions on a temp
// data root.
type harness struct {
	t       testing.TB
	system  *actor.ActorSystem
	hostCfg HostConfig
	cfg     Config
	pid     *actor.PID
	// base is the partition's applied index when the harness started (the entries Raft
	// wrote for itself), which appliedIndex counts from.
	base uint64
	mu   sync.Mutex
	due  []*orreryv1.NextDueNotice
	// notify, once set, receives the next-due notices too (a due coordinator's Notify).
	notify atomic.Pointer[*duecoordinator.Coordinator]
}

func newHarness(t testing.TB, mutate func(*Config)) *harness {
	return newHostHarness(t, nil, mutate)
}

// newHostHarness is newHarness with the host's configuration changed by mutateHost.
func newHostHarness(t testing.TB, mutateHost func(*HostConfig), mutate func(*Config)) *harness {
	h := &harness{t: t, system: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))}
	h.hostCfg = HostConfig{DataRoot: t.TempDir(), Partitions: 4, Logger: quiet}
	if mutateHost != nil {
		mutateHost(&h.hostCfg)
	}
	h.cfg = Config{Logger: quiet, OnNextDue: func(n *orreryv1.NextDueNotice) {
		if coord := h.notify.Load(); coord != nil {
			(*coord).Notify(n)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.due = append(h.due, n)
	}}
	if mutate != nil {
		mutate(&h.cfg)
	}
	h.openHost()
	h.pid = h.spawn()
	h.grantAll("alice")
	h.base = h.status().GetAppliedIndex()
	t.Cleanup(func() {
		h.system.Root.StopFuture(h.pid).Wait()
		h.system.Shutdown()
		_ = h.cfg.Host.Close()
	})
	return h
}

// grantAll gives principal every capability on every namespace in the harness's partition.
func (h *harness) grantAll(principal string) {
	h.t.Helper()
	grantAll(h.t, h.system, h.pid, principal)
}

// grantAll gives principal every capability on every namespace in the partition of the grain
// pid, through a PutGrant from an Orrery principal.
func grantAll(t testing.TB, system *actor.ActorSystem, pid *actor.PID, principal string) {
	t.Helper()
	req := &orreryv1.CommandRequest{Principal: input.SystemPrincipalPrefix + "test", Batch: &orreryv1.Batch{CommandId: "grant-" + principal,
		Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_PutGrant{PutGrant: grants.Everything(principal)}}}}}
	reply := request[*orreryv1.CommandReply](t, system, pid, req)
	if reply.GetError() != nil {
		t.Fatalf("grant %s: %v", principal, reply.GetError())
	}
}

// openHost opens the host on the harness's data root.
func (h *harness) openHost() {
	h.t.Helper()
	h.cfg.Host = openFounder(h.t, h.hostCfg)
}

// testClusterID is the cluster id the tests' founding hosts mint.
const testClusterID = 0x0ce1e57a1

// openFounder opens a host and, on a store that belongs to no cluster yet, founds one: the
// host is every group's only voter and leads them all when it returns.
func openFounder(t testing.TB, cfg HostConfig) *Host {
	t.Helper()
	host, err := OpenHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if host.ClusterID() == 0 {
		if err := host.JoinCluster(testClusterID, true); err != nil {
			_ = host.Close()
			t.Fatal(err)
		}
	}
	return host
}

// restartHost stops the grain and the host and starts both again on the same data root, as
// a silo restart does.
func (h *harness) restartHost() {
	h.t.Helper()
	h.system.Root.StopFuture(h.pid).Wait()
	if err := h.cfg.Host.Close(); err != nil {
		h.t.Fatal(err)
	}
	h.openHost()
	h.pid = h.spawn()
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

// command is a request of the mutations from alice; one holding due mutations (emit, expire)
// is a due command of the due coordinators' principal, their only path, and one holding a
// housekeep is from an Orrery principal, which alone may send it.
func command(id string, wait time.Duration, mutations ...*orreryv1.Mutation) *orreryv1.CommandRequest {
	req := &orreryv1.CommandRequest{Principal: "alice", Batch: &orreryv1.Batch{CommandId: id, Mutations: mutations}, WaitMicros: wait.Microseconds()}
	for _, m := range mutations {
		switch {
		case m.GetEmitOccurrences() != nil || m.GetExpireSaga() != nil:
			req.Principal, req.Due = input.CoordinatorPrincipal, true
		case m.GetHousekeep() != nil:
			req.Principal = input.SystemPrincipalPrefix + "test"
		}
	}
	return req
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
	if !rc.GetResults()[0].GetEnqueue().GetCreated() || first.GetActivationEpoch() == 0 {
		t.Fatalf("receipt %v term %d", rc, first.GetActivationEpoch())
	}
	again := h.do(command("c1", 0, enqueue("m1")))
	if !bytes.Equal(again.GetReceipt(), first.GetReceipt()) {
		t.Fatal("replay is not byte-identical")
	}
	conflict := h.do(command("c1", 0, enqueue("m2")))
	if !errors.Is(orrery.FromProto(conflict.GetError()), orrery.ErrIdempotencyConflict) {
		t.Fatalf("conflict: %v", conflict)
	}
	if got := h.appliedIndex(); got != 3 { // the replay and the refused conflict are entries too
		t.Fatalf("%d entries applied for a command, its replay and a conflicting reuse", got)
	}
	if lanePage := h.lane(); len(lanePage) != 1 {
		t.Fatalf("%d messages after a command and its replay, want 1", len(lanePage))
	}
}

// lane returns the harness lane's messages.
func (h *harness) lane() []*orreryv1.QueueMessage {
	reply := request[*orreryv1.InspectReply](h.t, h.system, h.pid, &orreryv1.InspectRequest{Principal: "alice", Target: &orreryv1.InspectRequest_Lane{Lane: &orreryv1.InspectLane{Lane: lane, MaxMessages: 1000}}})
	return reply.GetMessages()
}

// TestConcurrentCommandsAllApply: commands sent at once are each applied and answered.
func TestConcurrentCommandsAllApply(t *testing.T) {
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
	if got := h.appliedIndex(); got != n {
		t.Fatalf("%d entries applied for %d commands", got, n)
	}
	if msgs := h.lane(); len(msgs) != n {
		t.Fatalf("%d messages, want %d", len(msgs), n)
	}
}

// TestReactivationKeepsTheTermAndReplays: a grain stopped and activated again on the same
// host keeps the partition's term and state; a retried command gets its receipt.
func TestReactivationKeepsTheTermAndReplays(t *testing.T) {
	h := newHarness(t, nil)
	first := h.do(command("c1", 0, enqueue("m1")))
	h.system.Root.StopFuture(h.pid).Wait()
	h.pid = h.spawn()
	again := h.do(command("c1", 0, enqueue("m1")))
	if again.GetActivationEpoch() != first.GetActivationEpoch() || !bytes.Equal(again.GetReceipt(), first.GetReceipt()) {
		t.Fatalf("after reactivation: term %d then %d, identical receipt %v", first.GetActivationEpoch(), again.GetActivationEpoch(), bytes.Equal(again.GetReceipt(), first.GetReceipt()))
	}
}

// TestHostRestartStartsANewTermAndKeepsState: a host closed and opened again on its data root
// leads a new term, keeps every applied command (the message, the receipt) and the applied
// index, and goes on after it.
func TestHostRestartStartsANewTermAndKeepsState(t *testing.T) {
	h := newHarness(t, nil)
	first := h.do(command("c1", 0, enqueue("m1")))
	before := h.status()
	h.restartHost()
	again := h.do(command("c1", 0, enqueue("m1")))
	if again.GetActivationEpoch() <= first.GetActivationEpoch() || !bytes.Equal(again.GetReceipt(), first.GetReceipt()) {
		t.Fatalf("after a restart: term %d then %d, identical receipt %v", first.GetActivationEpoch(), again.GetActivationEpoch(), bytes.Equal(again.GetReceipt(), first.GetReceipt()))
	}
	after := h.status()
	if after.GetAppliedIndex() <= before.GetAppliedIndex() || after.GetLoggedTimeUnixMicros() <= before.GetLoggedTimeUnixMicros() {
		t.Fatalf("applied index %d → %d, logged time %d → %d across a restart", before.GetAppliedIndex(), after.GetAppliedIndex(),
			before.GetLoggedTimeUnixMicros(), after.GetLoggedTimeUnixMicros())
	}
	receipt(t, h.do(command("c2", 0, enqueue("m2"))))
	if msgs := h.lane(); len(msgs) != 2 {
		t.Fatalf("%d messages after the restart, want 2", len(msgs))
	}
}

// TestLongPollLeasesInItsOwnEntry: a waiting receive parked on an empty queue is proposed as
// soon as an enqueue makes a message visible, and answered with its receipt: the message,
// delivered once, in one entry of its own (the applied index moves for the enqueue and the
// receive). A retry of it gets the same receipt.
func TestLongPollLeasesInItsOwnEntry(t *testing.T) {
	h := newHarness(t, nil)
	waiting := command("r1", 20*time.Second, receive(5))
	answer := h.send(waiting)
	h.waitParked(1)
	receipt(t, h.do(command("c1", 0, enqueue("m1"))))
	woke := replyOf(t, answer)
	msgs := receipt(t, woke).GetResults()[0].GetReceive().GetMessages()
	if len(msgs) != 1 || msgs[0].GetId() != "m1" || msgs[0].GetDeliveryCount() != 1 {
		t.Fatalf("woken receive leased %v, want m1 delivered once", msgs)
	}
	if got := h.appliedIndex(); got != 2 {
		t.Fatalf("applied index %d after one enqueue and a woken receive, want 2", got)
	}
	if again := h.do(waiting); !bytes.Equal(again.GetReceipt(), woke.GetReceipt()) {
		t.Fatalf("a retry of the woken receive answered %v, want its receipt", again)
	}
}

// TestLongPollTimesOutWithoutWriting: a waiting receive whose wait ends with nothing visible
// is answered with neither receipt nor error, and writes nothing.
func TestLongPollTimesOutWithoutWriting(t *testing.T) {
	h := newHarness(t, nil)
	receipt(t, h.do(command("c1", 0, enqueue("m1"))))
	receipt(t, h.do(command("r0", 0, receive(5)))) // leases m1: nothing visible remains
	start := time.Now()
	empty := h.do(command("r1", 300*time.Millisecond, receive(5)))
	if empty.GetError() != nil || len(empty.GetReceipt()) != 0 || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("timed-out receive answered %v after %v, want nothing after the wait", empty, time.Since(start))
	}
	if got := h.appliedIndex(); got != 2 {
		t.Fatalf("applied index %d after an enqueue, a receive and a timed-out long poll, want 2", got)
	}
}

// TestLongPollOfAnAnsweredCommandIsReplayed: a waiting receive whose command id already has a
// receipt (a retry) gets that receipt at once, byte for byte, and writes nothing.
func TestLongPollOfAnAnsweredCommandIsReplayed(t *testing.T) {
	h := newHarness(t, nil)
	receipt(t, h.do(command("c1", 0, enqueue("m1"))))
	first := h.do(command("r1", 0, receive(5)))
	if n := len(receipt(t, first).GetResults()[0].GetReceive().GetMessages()); n != 1 {
		t.Fatalf("receive got %d messages, want 1", n)
	}
	start := time.Now()
	replayed := h.do(command("r1", 20*time.Second, receive(5)))
	if !bytes.Equal(replayed.GetReceipt(), first.GetReceipt()) || time.Since(start) > 10*time.Second {
		t.Fatalf("waiting retry answered %v after %v, want the receipt at once", replayed, time.Since(start))
	}
	if got := h.appliedIndex(); got != 3 { // the replay is an entry, which writes only its mark
		t.Fatalf("%d entries applied for a command, a receive and its replay", got)
	}
	if m := h.message("m1"); m.GetDeliveryCount() != 1 {
		t.Fatalf("after the replay the message was delivered %d times, want 1", m.GetDeliveryCount())
	}
}

// TestLongPollRefusalsAreAnsweredAtOnce: an invalid waiting receive gets its Validation error
// at once (naming the field in the batch), and one beyond MaxWaiters gets Unavailable; neither
// writes.
func TestLongPollRefusalsAreAnsweredAtOnce(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxWaiters = 1 })
	bad := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: "acme", Queue: "jobs", LeaseDurationMicros: 1}}}
	reply := h.do(command("bad", 20*time.Second, bad))
	if e := orrery.AsError(orrery.FromProto(reply.GetError())); !errors.Is(e, orrery.ErrValidation) || e.Field != "mutations[0].receive.lease_duration_micros" {
		t.Fatalf("invalid waiting receive answered %v, want Validation of mutations[0].receive.lease_duration_micros", reply)
	}
	parked := h.send(command("r1", 20*time.Second, receive(1)))
	h.waitParked(1)
	over := h.do(command("r2", 20*time.Second, receive(1)))
	if !errors.Is(orrery.FromProto(over.GetError()), orrery.ErrUnavailable) {
		t.Fatalf("waiting receive beyond MaxWaiters answered %v, want Unavailable", over)
	}
	if got := h.appliedIndex(); got != 0 {
		t.Fatalf("applied index %d, want 0", got)
	}
	receipt(t, h.do(command("c1", 0, enqueue("m1"))))
	if msgs := receipt(t, replyOf(t, parked)).GetResults()[0].GetReceive().GetMessages(); len(msgs) != 1 {
		t.Fatalf("the parked receive leased %v, want m1", msgs)
	}
}

func TestLongPollWakesWhenADelayedMessageBecomesVisible(t *testing.T) {
	h := newHarness(t, nil)
	delayed := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: lane, Id: "later", PayloadJson: `{}`, DelayMicros: (300 * time.Millisecond).Microseconds()}}}
	receipt(t, h.do(command("c1", 0, delayed)))
	start := time.Now()
	got := h.do(command("r1", 20*time.Second, receive(1)))
	if msgs := receipt(t, got).GetResults()[0].GetReceive().GetMessages(); len(msgs) != 1 || time.Since(start) < 200*time.Millisecond || time.Since(start) > 10*time.Second {
		t.Fatalf("leased %v after %v, want the message once the delay passed", msgs, time.Since(start))
	}
}

// longPoll receives as a client does: a waiting request, answered with what it leased, or
// with nothing when its wait ends.
func (h *harness) longPoll(id string, wait time.Duration, m *orreryv1.Mutation) []*orreryv1.QueueMessage {
	h.t.Helper()
	reply := h.do(command(id, wait, m))
	if reply.GetError() != nil {
		h.t.Fatalf("waiting receive answered %v", reply)
	}
	if len(reply.GetReceipt()) == 0 {
		return nil
	}
	return receipt(h.t, reply).GetResults()[0].GetReceive().GetMessages()
}

// waitParked polls until n commands are pending or parked.
func (h *harness) waitParked(n uint32) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.status().GetPendingCommands() != n {
		if time.Now().After(deadline) {
			h.t.Fatalf("pending commands %d, want %d", h.status().GetPendingCommands(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) status() *orreryv1.PartitionStatus {
	return request[*orreryv1.InspectReply](h.t, h.system, h.pid, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Partition{Partition: &orreryv1.InspectPartition{}}}).GetPartition()
}

// appliedIndex is how many log entries the partition applied since the harness started.
func (h *harness) appliedIndex() uint64 { return h.status().GetAppliedIndex() - h.base }

// message reads a message of lane by id through the lane page.
func (h *harness) message(id string) *orreryv1.QueueMessage {
	h.t.Helper()
	page := request[*orreryv1.InspectReply](h.t, h.system, h.pid, &orreryv1.InspectRequest{Principal: "alice", Target: &orreryv1.InspectRequest_Lane{Lane: &orreryv1.InspectLane{Lane: lane, MaxMessages: 100}}})
	for _, m := range page.GetMessages() {
		if m.GetId() == id {
			return m
		}
	}
	h.t.Fatalf("message %s not in the lane page %v", id, page)
	return nil
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
	names := []string{FailpointEntryAppended, FailpointEntryCommitted, FailpointEntryApplied, FailpointReplySent}
	for _, name := range names {
		fp, err := NewFailpoints(name+":2", record)
		if err != nil {
			t.Fatal(err)
		}
		h := newHostHarness(t, func(c *HostConfig) { c.Failpoints = fp }, func(c *Config) { c.Failpoints = fp })
		receipt(t, h.do(command("c1", 0, enqueue("m1"))))
		receipt(t, h.do(command("c2", 0, enqueue("m2"))))
		receipt(t, h.do(command("c3", 0, enqueue("m3"))))
	}
	want := fmt.Sprint(names)
	if fmt.Sprint(hits) != want {
		t.Fatalf("hits %v, want each once (at the second command): %s", hits, want)
	}
	if _, err := NewFailpoints("nope", record); err == nil {
		t.Fatal("an unknown failpoint was accepted")
	}
}

// TestProcessFailpointsCountFromBegin: a silo process's failpoint ignores the hits before the
// silo is ready (its own bootstrap commands), so its n-th hit is the n-th after Begin.
func TestProcessFailpointsCountFromBegin(t *testing.T) {
	fp, err := ProcessFailpoints(FailpointEntryApplied + ":3")
	if err != nil {
		t.Fatal(err)
	}
	fp.Hit(FailpointEntryApplied)
	fp.Hit(FailpointEntryApplied)
	if n := fp.hits.Load(); n != 0 {
		t.Fatalf("%d hits counted before Begin", n)
	}
	fp.Begin()
	fp.Hit(FailpointEntryApplied)
	fp.Hit(FailpointEntryApplied)
	if n := fp.hits.Load(); n != 2 {
		t.Fatalf("%d hits counted after Begin, want 2", n)
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
	h := newHostHarness(t, func(c *HostConfig) {
		c.Limits = input.DefaultLimits()
		c.Limits.ReceiptRetentionMicros = (200 * time.Millisecond).Microseconds()
	}, func(c *Config) { c.HousekeepEvery = 50 * time.Millisecond })
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
	h := newHarness(t, nil)
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
// messages at once) of a lane of near-maximal messages succeeds, leasing what fits, instead of
// failing for good as one transaction too large.
func TestReceiveOfLargeMessagesStaysWithinTheTransactionLimit(t *testing.T) {
	h := newHarness(t, nil)
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
