package partition

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

const sagaID = "5f0c2b1e-7d4a-4c3b-9a8e-1f2d3c4b5a69"

// loggedCommand is one command entry of the partition's Raft log.
type loggedCommand struct {
	principal string
	cmd       *orreryv1.PartitionCommand
}

// logged reads every command entry of the harness partition's Raft log.
func (h *harness) logged() []loggedCommand {
	h.t.Helper()
	storage, err := h.cfg.Host.store.RaftLog().Storage(1)
	if err != nil {
		h.t.Fatal(err)
	}
	first, _ := storage.FirstIndex()
	last, _ := storage.LastIndex()
	ents, err := storage.Entries(first, last+1, math.MaxUint64)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []loggedCommand
	for _, e := range ents {
		if len(e.GetData()) == 0 {
			continue
		}
		pe := &orreryv1.PartitionEntry{}
		cmd := &orreryv1.PartitionCommand{}
		if err := proto.Unmarshal(e.GetData(), pe); err != nil {
			h.t.Fatal(err)
		}
		if err := proto.Unmarshal(pe.GetCommand(), cmd); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, loggedCommand{principal: pe.GetPrincipal(), cmd: cmd})
	}
	return out
}

// receiveAll long-polls the test queue until it has received want messages, failing after a
// generous bound.
func (h *harness) receiveAll(want int) []*orreryv1.QueueMessage {
	h.t.Helper()
	var got []*orreryv1.QueueMessage
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; len(got) < want; i++ {
		if time.Now().After(deadline) {
			h.t.Fatalf("received %d messages, want %d", len(got), want)
		}
		got = append(got, h.longPoll(fmt.Sprint("recv-", i), 2*time.Second, receive(10))...)
	}
	return got
}

// coordinatorPrincipal is the due coordinator's principal (input.CoordinatorPrincipal).
const coordinatorPrincipal = input.SystemPrincipalPrefix + "coordinator"

// dueCommand builds the due command a coordinator would send for what the grain's ScanDue
// answers now.
func (h *harness) dueCommand(id string) *orreryv1.CommandRequest {
	h.t.Helper()
	scan := request[*orreryv1.ScanDueReply](h.t, h.system, h.pid, &orreryv1.ScanDueRequest{MaxRefs: 16})
	if scan.GetError() != nil {
		h.t.Fatalf("scan: %v", scan.GetError())
	}
	return &orreryv1.CommandRequest{Principal: coordinatorPrincipal, Due: true, Batch: &orreryv1.Batch{CommandId: id, Mutations: due.Mutations(scan.GetRefs(), 32)}}
}

// TestDueCommandAppliesWithoutAnInboxEntry: a due command of the emits and expiries a due scan
// found is applied as a due entry (PartitionCommand.due), its reply carries its receipt, it
// stores no inbox entry, and a retry with the same command id applies again and enqueues
// nothing more (its tokens moved on).
func TestDueCommandAppliesWithoutAnInboxEntry(t *testing.T) {
	h, fake := newFakeClockHarness(t, nil)
	now := fake.Now()
	if r := receipt(t, h.do(command("configure", 0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
		Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: scheduleID, Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{
			Every: &orreryv1.EverySpec{IntervalMicros: 3600 * input.Second, FirstDueAtUnixMicros: now.Add(-time.Second).UnixMicro()}}}}}}}))); r.GetResults()[0].GetError() != nil {
		t.Fatalf("configure: %v", r)
	}
	if r := receipt(t, h.do(command("saga", 0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_CompareExchangeSaga{CompareExchangeSaga: &orreryv1.CompareExchangeSaga{
		Lane: lane, SagaId: sagaID, Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING, StateJson: `{}`, DeadlineUnixMicros: now.Add(time.Second).UnixMicro(),
		Timeout: &orreryv1.SagaTimeout{Queue: lane.GetQueue(), Template: &orreryv1.MessageTemplate{PayloadJson: `"late"`}},
	}}}))); r.GetResults()[0].GetError() != nil {
		t.Fatalf("saga: %v", r)
	}
	fake.Advance(time.Second + 20*time.Millisecond) // past the saga's deadline
	req := h.dueCommand("due-1")
	if n := len(req.GetBatch().GetMutations()); n != 2 {
		t.Fatalf("the due scan gave %d mutations, want the emit and the expiry", n)
	}
	rc := receipt(t, h.do(req))
	if len(rc.GetResults()) != 2 || rc.GetCommandId() != "due-1" {
		t.Fatalf("receipt %v: want one result per mutation", rc)
	}
	for i, res := range rc.GetResults() {
		if res.GetError() != nil {
			t.Fatalf("result %d: %v", i, orrery.FromProto(res.GetError()))
		}
	}
	if msgs := h.lane(); len(msgs) != 2 {
		t.Fatalf("%d messages after the due command, want the occurrence and the timeout", len(msgs))
	}
	retry := receipt(t, h.do(req))
	if msgs := h.lane(); len(msgs) != 2 {
		t.Fatalf("%d messages after the retry, want still 2", len(msgs))
	}
	for _, res := range retry.GetResults() {
		if len(res.GetSchedule().GetEnqueuedIds()) != 0 {
			t.Fatalf("the retry enqueued %v", retry)
		}
	}

	h.system.Root.StopFuture(h.pid).Wait()
	dueEntries := 0
	for _, e := range h.logged() {
		if e.cmd.GetDue() {
			if e.principal != coordinatorPrincipal {
				t.Errorf("due entry of principal %q", e.principal)
			}
			dueEntries++
		}
	}
	if dueEntries != 2 {
		t.Fatalf("%d due entries in the log, want the command and its retry", dueEntries)
	}
	if err := h.cfg.Host.machines[1].state.View(func(r kv.Reader) error {
		return kv.ScanPrefix(r, keys.InboxKey(coordinatorPrincipal, ""), func(key, _ []byte) (bool, error) {
			t.Errorf("inbox entry %q for a due command", key)
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
}

// TestDueCommandsAreOnlyTheCoordinators: a due command from a principal outside Orrery's own,
// or one asking to wait, is refused naming the field, and nothing is logged.
func TestDueCommandsAreOnlyTheCoordinators(t *testing.T) {
	h := newHarness(t, nil)
	emit := &orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: scheduleID, ExpectedGeneration: 1, Max: 32}}}
	before := len(h.logged())
	for _, tc := range []struct {
		req   *orreryv1.CommandRequest
		field string
	}{
		{&orreryv1.CommandRequest{Principal: "alice", Due: true, Batch: &orreryv1.Batch{CommandId: "d1", Mutations: []*orreryv1.Mutation{emit}}}, "due"},
		{&orreryv1.CommandRequest{Principal: coordinatorPrincipal, Due: true, WaitMicros: 1000, Batch: &orreryv1.Batch{CommandId: "d2", Mutations: []*orreryv1.Mutation{emit}}}, "wait_micros"},
	} {
		err := orrery.FromProto(h.do(tc.req).GetError())
		if orrery.CodeOf(err) != orrery.CodeValidation || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want Validation naming %s", tc.req.GetBatch().GetCommandId(), err, tc.field)
		}
	}
	if after := len(h.logged()); after != before {
		t.Fatalf("%d entries logged by refused due commands", after-before)
	}
}

// TestDueCommandsDrainALargePayloadBacklogWithinTheTransactionLimit: four schedules with
// 200 KiB templates and ten occurrences due each are emitted by due commands built from due
// scans, every occurrence once, without a command ever failing for exceeding the transaction
// limit (each emits what fits and leaves the rest due).
func TestDueCommandsDrainALargePayloadBacklogWithinTheTransactionLimit(t *testing.T) {
	h := newHarness(t, nil)
	payload := `"` + strings.Repeat("x", 200<<10) + `"`
	first := time.Now().Add(-9500 * time.Millisecond) // ten due now
	for i := range 4 {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012x", i)
		r := receipt(t, h.do(command(fmt.Sprint("configure-", i), 0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
			Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: id, Template: &orreryv1.MessageTemplate{PayloadJson: payload},
				Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{IntervalMicros: input.Second,
					FirstDueAtUnixMicros: first.UnixMicro()}}}}}}})))
		if r.GetResults()[0].GetError() != nil {
			t.Fatalf("configure %d: %v", i, r)
		}
	}
	seen := map[string]bool{}
	for round := 0; len(seen) < 4*10; round++ {
		if round > 100 {
			t.Fatalf("%d distinct occurrences after 100 due commands, want at least 40", len(seen))
		}
		for i, res := range receipt(t, h.do(h.dueCommand(fmt.Sprint("due-", round)))).GetResults() {
			if res.GetError() != nil {
				t.Fatalf("due command %d, result %d: %v", round, i, orrery.FromProto(res.GetError()))
			}
		}
		// Receive one at a time: a receive's reply carries its payloads.
		for {
			msgs := receipt(t, h.do(command(fmt.Sprint("recv-", round, "-", len(seen)), 0, receive(1)))).GetResults()[0].GetReceive().GetMessages()
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				if seen[m.GetId()] {
					t.Fatalf("occurrence %s received twice", m.GetId())
				}
				seen[m.GetId()] = true
			}
		}
	}
}
