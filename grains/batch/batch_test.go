package batch

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
	"github.com/orreryhq/orrery/grains/route"
	"github.com/orreryhq/orrery/grains/schedule"
)

const (
	scheduleID       = "0f8fad5b-d9cb-469f-a165-70867728950e"
	sec              = input.Second
	hour             = input.Hour
	t0         int64 = 1767225600 * sec // 2026-01-01T00:00:00Z
)

var lane = &orreryv1.Lane{Namespace: "acme", Queue: "reports", Key: "k1"}

func applier() Applier { return Applier{Limits: input.DefaultLimits()} }

func everySpec(first, interval int64) *orreryv1.ScheduleSpec {
	return &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{FirstDueAtUnixMicros: first, IntervalMicros: interval}}}
}

func configureMutation(spec *orreryv1.ScheduleSpec, expected uint64) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
		Definition:       &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: scheduleID, Spec: spec, Template: &orreryv1.MessageTemplate{PayloadJson: `{"n":1}`}},
		ExpectedRevision: expected,
	}}}
}

func emitMutation(generation uint64) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: scheduleID, ExpectedGeneration: generation, Max: 32}}}
}

func enqueueMutation(id string) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: lane, Id: id, PayloadJson: `"x"`}}}
}

func mustApply(t *testing.T, v kv.View, b *orreryv1.Batch, now int64) *Outcome {
	t.Helper()
	out, err := applier().ApplyBatch(v, sender(b), b, now)
	if err != nil {
		t.Fatalf("apply %s: %v", b.GetCommandId(), err)
	}
	return out
}

func resultErr(r *orreryv1.MutationResult) error { return orrery.FromProto(r.GetError()) }

// TestScheduleReplacementFixture is the fixture, as one test.
func TestScheduleReplacementFixture(t *testing.T) {
	v := granted(t)
	now := t0
	// Generation 1: first due instant in the future; its watermark is 0.
	create := &orreryv1.Batch{CommandId: "create-1", Mutations: []*orreryv1.Mutation{configureMutation(everySpec(now+24*hour, hour), 0)}}
	created := mustApply(t, v, create, now)
	if r := created.Receipt.GetResults()[0].GetSchedule(); r.GetGeneration() != 1 || r.GetNextOrdinal() != 0 {
		t.Fatalf("generation 1: %v", created.Receipt)
	}
	if res := mustApply(t, v, &orreryv1.Batch{CommandId: "emit-1", Mutations: []*orreryv1.Mutation{emitMutation(1)}}, now); len(res.Receipt.GetResults()[0].GetSchedule().GetEnqueuedIds()) != 0 {
		t.Fatalf("generation 1 emitted before its first due instant: %v", res.Receipt)
	}
	rec, _, _ := schedule.Load(v, lane, scheduleID)
	if rec.GetNextOrdinal() != 0 {
		t.Fatalf("generation 1 watermark %d, want 0", rec.GetNextOrdinal())
	}
	// Generation 2: exactly two due instants in the past, one hour apart, and a third in the future.
	first := now - 90*60*sec
	replace := &orreryv1.Batch{CommandId: "replace-2", Mutations: []*orreryv1.Mutation{configureMutation(everySpec(first, hour), rec.GetRevision())}}
	replaced := mustApply(t, v, replace, now)
	if r := replaced.Receipt.GetResults()[0]; r.GetError() != nil || r.GetSchedule().GetGeneration() != 2 {
		t.Fatalf("replace: %v", replaced.Receipt)
	}
	emitted := mustApply(t, v, &orreryv1.Batch{CommandId: "emit-2", Mutations: []*orreryv1.Mutation{emitMutation(2)}}, now)
	if r := emitted.Receipt.GetResults()[0]; r.GetError() != nil || len(r.GetSchedule().GetEnqueuedIds()) != 2 {
		t.Fatalf("emit generation 2: %v", emitted.Receipt)
	}
	rec, _, _ = schedule.Load(v, lane, scheduleID)
	if rec.GetNextOrdinal() != 2 {
		t.Fatalf("generation 2 watermark %d, want exactly 2", rec.GetNextOrdinal())
	}
	msgs, _, err := queue.ListLane(v, lane, "", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*orreryv1.QueueMessage{}
	for _, m := range msgs {
		byID[m.GetId()] = m
	}
	for ordinal, due := range []int64{first, first + hour} {
		id := schedule.OccurrenceID(scheduleID, 2, uint64(ordinal))
		m := byID[id]
		if m == nil || m.GetOccurrence().GetNominalDueAtUnixMicros() != due {
			t.Fatalf("occurrence %s due %d: got %v", id, due, m)
		}
	}
	if third := schedule.OccurrenceID(scheduleID, 2, 2); byID[third] != nil {
		t.Fatalf("the future occurrence %s was enqueued", third)
	}
	if len(msgs) != 2 {
		t.Fatalf("%d messages in the queue, want 2", len(msgs))
	}
	// Replaying the original command id returns the byte-identical receipt and writes nothing.
	before := v.Clone()
	replayed := mustApply(t, v, create, now+5*hour)
	if !replayed.Replayed || !bytes.Equal(replayed.ReceiptBytes, created.ReceiptBytes) {
		t.Fatalf("replay differs:\n%x\n%x", replayed.ReceiptBytes, created.ReceiptBytes)
	}
	if !v.Equal(before) {
		t.Fatal("a replay wrote")
	}
}

func TestSameCommandIDDifferentRequestIsIdempotencyConflict(t *testing.T) {
	v := granted(t)
	mustApply(t, v, &orreryv1.Batch{CommandId: "c1", Mutations: []*orreryv1.Mutation{enqueueMutation("m1")}}, t0)
	before := v.Clone()
	_, err := applier().ApplyBatch(v, "alice", &orreryv1.Batch{CommandId: "c1", Mutations: []*orreryv1.Mutation{enqueueMutation("m2")}}, t0)
	if !errors.Is(err, orrery.ErrIdempotencyConflict) || orrery.AsError(err).Field != "command_id" {
		t.Fatalf("got %v, want IdempotencyConflict on command_id", err)
	}
	if !v.Equal(before) {
		t.Fatal("a conflicting command wrote")
	}
	// The inbox is per principal: another principal may use the same id.
	out, err := applier().ApplyBatch(v, "bob", &orreryv1.Batch{CommandId: "c1", Mutations: []*orreryv1.Mutation{enqueueMutation("m2")}}, t0)
	if err != nil || out.Replayed {
		t.Fatalf("bob's c1: %v %v", out, err)
	}
}

func TestFailingMutationLeavesNoWritesOthersApply(t *testing.T) {
	v := granted(t)
	b := &orreryv1.Batch{CommandId: "c1", Mutations: []*orreryv1.Mutation{
		enqueueMutation("m1"),
		configureMutation(everySpec(t0, hour), 7), // no such schedule: NotFound
		{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: lane, Id: "m2", PayloadJson: "{bad"}}},
		enqueueMutation("m3"),
	}}
	out := mustApply(t, v, b, t0)
	rs := out.Receipt.GetResults()
	if len(rs) != 4 || out.Receipt.GetError() != nil {
		t.Fatalf("receipt %v", out.Receipt)
	}
	if !errors.Is(resultErr(rs[1]), orrery.ErrNotFound) || rs[1].GetError().GetField() != "mutations[1].configure_schedule.definition.schedule_id" {
		t.Fatalf("result 1: %v", rs[1])
	}
	if !errors.Is(resultErr(rs[2]), orrery.ErrValidation) || rs[2].GetError().GetField() != "mutations[2].enqueue.payload_json" {
		t.Fatalf("result 2: %v", rs[2])
	}
	msgs, _, _ := queue.ListLane(v, lane, "", 10, 0)
	if len(msgs) != 2 || msgs[0].GetId() != "m1" || msgs[1].GetId() != "m3" {
		t.Fatalf("messages %v", msgs)
	}
	if _, found, _ := schedule.Load(v, lane, scheduleID); found {
		t.Fatal("failed configure left a record")
	}
}

func TestQuotaFailureRollsBackWholeBatch(t *testing.T) {
	lim := input.DefaultLimits()
	lim.MaxLaneMessages = 2
	a := Applier{Limits: lim}
	v := granted(t)
	b := &orreryv1.Batch{CommandId: "c1", Mutations: []*orreryv1.Mutation{
		configureMutation(everySpec(t0, hour), 0), enqueueMutation("m1"), enqueueMutation("m2"), enqueueMutation("m3"),
	}}
	out, err := a.ApplyBatch(v, "alice", b, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(orrery.FromProto(out.Receipt.GetError()), orrery.ErrQuotaExceeded) || out.Receipt.GetError().GetField() != "mutations[3].enqueue.lane" || len(out.Receipt.GetResults()) != 0 {
		t.Fatalf("receipt %v", out.Receipt)
	}
	// Only the inbox entry was written: replay returns the same failure.
	if msgs, _, _ := queue.ListLane(v, lane, "", 10, 0); len(msgs) != 0 {
		t.Fatalf("rolled-back batch left messages %v", msgs)
	}
	if _, found, _ := schedule.Load(v, lane, scheduleID); found {
		t.Fatal("rolled-back batch left a schedule")
	}
	if written(v) != 3 {
		t.Fatalf("%d keys after rollback, want only the inbox entry, its expiry index and the receipt count", written(v))
	}
	again, err := a.ApplyBatch(v, "alice", b, t0+sec)
	if err != nil || !again.Replayed || !bytes.Equal(again.ReceiptBytes, out.ReceiptBytes) {
		t.Fatalf("replay of a rolled-back batch: %v %v", again, err)
	}
}

func TestAllOrNothingRollsBackOnAnyFailure(t *testing.T) {
	v := granted(t)
	b := &orreryv1.Batch{CommandId: "c1", AllOrNothing: true, Mutations: []*orreryv1.Mutation{
		enqueueMutation("m1"), configureMutation(everySpec(t0, hour), 4),
	}}
	out := mustApply(t, v, b, t0)
	if !errors.Is(orrery.FromProto(out.Receipt.GetError()), orrery.ErrNotFound) || out.Receipt.GetError().GetField() != "mutations[1].configure_schedule.definition.schedule_id" {
		t.Fatalf("receipt %v", out.Receipt)
	}
	if msgs, _, _ := queue.ListLane(v, lane, "", 10, 0); len(msgs) != 0 {
		t.Fatalf("all-or-nothing left messages %v", msgs)
	}
}

func TestBadEnvelopeIsValidationAndStoresNothing(t *testing.T) {
	cases := []struct {
		name      string
		principal string
		batch     *orreryv1.Batch
		now       int64
		field     string
	}{
		{"no command id", "alice", &orreryv1.Batch{Mutations: []*orreryv1.Mutation{enqueueMutation("m")}}, t0, "command_id"},
		{"no principal", "", &orreryv1.Batch{CommandId: "c", Mutations: []*orreryv1.Mutation{enqueueMutation("m")}}, t0, "principal"},
		{"bad logged time", "alice", &orreryv1.Batch{CommandId: "c", Mutations: []*orreryv1.Mutation{enqueueMutation("m")}}, -1, "logged_time"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := granted(t)
			_, err := applier().ApplyBatch(v, c.principal, c.batch, c.now)
			if !errors.Is(err, orrery.ErrValidation) || orrery.AsError(err).Field != c.field {
				t.Fatalf("got %v, want Validation on %s", err, c.field)
			}
			if written(v) != 0 {
				t.Fatal("wrote")
			}
		})
	}
	// An empty mutation list is a stored failure (the command id is usable).
	v := granted(t)
	out := mustApply(t, v, &orreryv1.Batch{CommandId: "c"}, t0)
	if !errors.Is(orrery.FromProto(out.Receipt.GetError()), orrery.ErrValidation) || out.Receipt.GetError().GetField() != "mutations" {
		t.Fatalf("empty batch receipt %v", out.Receipt)
	}
	// A mutation with no kind fails alone.
	out = mustApply(t, v, &orreryv1.Batch{CommandId: "d", Mutations: []*orreryv1.Mutation{{}}}, t0)
	if !errors.Is(resultErr(out.Receipt.GetResults()[0]), orrery.ErrValidation) || out.Receipt.GetResults()[0].GetError().GetField() != "mutations[0]" {
		t.Fatalf("kindless mutation receipt %v", out.Receipt)
	}
}

// failingView fails every write after the first n.
type failingView struct {
	*kv.Memory
	writesLeft int
}

var errDisk = errors.New("disk on fire")

func (f *failingView) Set(key, value []byte) error {
	if f.writesLeft == 0 {
		return errDisk
	}
	f.writesLeft--
	return f.Memory.Set(key, value)
}

func TestPlatformFailureAbortsApply(t *testing.T) {
	v := &failingView{Memory: granted(t), writesLeft: 0}
	_, err := applier().ApplyBatch(v, "alice", &orreryv1.Batch{CommandId: "c", Mutations: []*orreryv1.Mutation{enqueueMutation("m")}}, t0)
	if !errors.Is(err, errDisk) {
		t.Fatalf("got %v, want the disk error", err)
	}
}

func TestPartitionRecordLimitRollsBackBatch(t *testing.T) {
	lim := input.DefaultLimits()
	lim.MaxPartitionRecords = 1
	a := Applier{Limits: lim}
	v := granted(t)
	mustApplyWith := func(id string, m *orreryv1.Mutation) *orreryv1.Receipt {
		out, err := a.ApplyBatch(v, "alice", &orreryv1.Batch{CommandId: id, Mutations: []*orreryv1.Mutation{enqueueMutation("m-" + id), m}}, t0)
		if err != nil {
			t.Fatal(err)
		}
		return out.Receipt
	}
	if r := mustApplyWith("c1", configureMutation(everySpec(t0, hour), 0)); r.GetError() != nil {
		t.Fatalf("first schedule: %v", r)
	}
	saga := &orreryv1.Mutation{Kind: &orreryv1.Mutation_CompareExchangeSaga{CompareExchangeSaga: &orreryv1.CompareExchangeSaga{
		Lane: lane, SagaId: "16fd2706-8baf-433b-82eb-8c7fada847da", Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING}}}
	r := mustApplyWith("c2", saga)
	if !errors.Is(orrery.FromProto(r.GetError()), orrery.ErrQuotaExceeded) || r.GetError().GetField() != "mutations[1].compare_exchange_saga.partition" {
		t.Fatalf("second record: %v", r)
	}
	if msgs, _, _ := queue.ListLane(v, lane, "", 10, 0); len(msgs) != 1 {
		t.Fatalf("the rolled-back batch's enqueue stayed: %v", msgs)
	}
}

func TestMisroutedLaneIsRefused(t *testing.T) {
	v := granted(t)
	home := route.Partition(lane, 8)
	a := Applier{Limits: input.DefaultLimits(), Partitions: 8, Partition: (home + 1) % 8}
	out, err := a.ApplyBatch(v, "alice", &orreryv1.Batch{CommandId: "c", Mutations: []*orreryv1.Mutation{enqueueMutation("m"), configureMutation(everySpec(t0, hour), 0)}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	for i, field := range []string{"mutations[0].enqueue.lane", "mutations[1].configure_schedule.definition.lane"} {
		r := out.Receipt.GetResults()[i]
		if !errors.Is(resultErr(r), orrery.ErrValidation) || r.GetError().GetField() != field {
			t.Fatalf("result %d: %v, want Validation on %s", i, r, field)
		}
	}
	if msgs, _, _ := queue.ListLane(v, lane, "", 10, 0); len(msgs) != 0 {
		t.Fatal("a misrouted enqueue was written")
	}
	a.Partition = home
	if rc := mustApplyWith(t, a, v, "d", enqueueMutation("m")); rc.GetResults()[0].GetError() != nil {
		t.Fatalf("home partition refused its own lane: %v", rc)
	}
}

func mustApplyWith(t *testing.T, a Applier, v kv.View, id string, m ...*orreryv1.Mutation) *orreryv1.Receipt {
	t.Helper()
	b := &orreryv1.Batch{CommandId: id, Mutations: m}
	out, err := a.ApplyBatch(v, sender(b), b, t0)
	if err != nil {
		t.Fatal(err)
	}
	return out.Receipt
}

func TestEmitBytesPerBatchAreBounded(t *testing.T) {
	lim := input.DefaultLimits()
	lim.MaxEmitBytesPerBatch = 100 << 10
	a := Applier{Limits: lim}
	v := granted(t)
	payload := `"` + strings.Repeat("p", 30<<10) + `"` // ~30 KiB per occurrence
	var emits []*orreryv1.Mutation
	for i := range 3 {
		l := &orreryv1.Lane{Namespace: "acme", Queue: "big", Key: fmt.Sprint("k", i)}
		id := fmt.Sprintf("00000000-0000-4000-8000-%012x", i)
		def := &orreryv1.ScheduleDefinition{Lane: l, ScheduleId: id, Spec: everySpec(t0-hour, sec), Template: &orreryv1.MessageTemplate{PayloadJson: payload}}
		mustApplyWith(t, a, v, fmt.Sprint("c", i), &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{Definition: def}}})
		emits = append(emits, &orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{Lane: l, ScheduleId: id, ExpectedGeneration: 1, Max: 32}}})
	}
	rc := mustApplyWith(t, a, v, "emit", emits...)
	var counts []int
	for _, r := range rc.GetResults() {
		if r.GetError() != nil {
			t.Fatal(orrery.FromProto(r.GetError()))
		}
		counts = append(counts, len(r.GetSchedule().GetEnqueuedIds()))
	}
	// 100 KiB admits four 30 KiB occurrences (the fourth starts below the limit); the other
	// schedules' backlogs stay due for the next command.
	if fmt.Sprint(counts) != "[4 0 0]" {
		t.Fatalf("enqueued per emit %v, want [4 0 0]", counts)
	}
	// Alone, a command with one emit still makes progress even if one occurrence exceeds it.
	lim.MaxEmitBytesPerBatch = 1
	if rc := mustApplyWith(t, Applier{Limits: lim}, v, "emit-small", emits[1]); len(rc.GetResults()[0].GetSchedule().GetEnqueuedIds()) != 1 {
		t.Fatalf("a budget smaller than one occurrence must still emit one: %v", rc)
	}
}

// TestRefusedEnvelopeWritesNothing: an envelope ApplyBatch refuses (Validation) leaves the view
// untouched, which is what lets a partition apply commands straight onto its transaction.
func TestRefusedEnvelopeWritesNothing(t *testing.T) {
	v := granted(t)
	mustApply(t, v, &orreryv1.Batch{CommandId: "c1", Mutations: []*orreryv1.Mutation{enqueueMutation("m1")}}, t0)
	before := v.Clone()
	for name, apply := range map[string]func() error{
		"no principal": func() error {
			_, err := applier().ApplyBatch(v, "", &orreryv1.Batch{CommandId: "c2", Mutations: []*orreryv1.Mutation{enqueueMutation("m2")}}, t0)
			return err
		},
		"no command id": func() error {
			_, err := applier().ApplyBatch(v, "alice", &orreryv1.Batch{Mutations: []*orreryv1.Mutation{enqueueMutation("m2")}}, t0)
			return err
		},
		"no logged time": func() error {
			_, err := applier().ApplyBatch(v, "alice", &orreryv1.Batch{CommandId: "c3", Mutations: []*orreryv1.Mutation{enqueueMutation("m2")}}, 0)
			return err
		},
	} {
		if err := apply(); !errors.Is(err, orrery.ErrValidation) {
			t.Fatalf("%s: got %v, want Validation", name, err)
		}
		if !v.Equal(before) {
			t.Fatalf("%s: a refused envelope wrote", name)
		}
	}
}
