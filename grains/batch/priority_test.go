package batch

import (
	"errors"
	"fmt"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/record"
)

// TestPriorityStepIsALimitFromApplyVersion20: a partition's limits written without a priority
// step (by a leader below apply version 20, or a release before it) are stored without one, as
// an older release stores them, and apply the default step; from version 20 a step of 0
// (strict) to a day is taken, and one outside is refused naming the field, writing nothing.
func TestPriorityStepIsALimitFromApplyVersion20(t *testing.T) {
	v := granted(t)
	calls := 0
	set := func(version uint32, limits *orreryv1.PartitionLimits) error {
		calls++
		b := &orreryv1.Batch{CommandId: fmt.Sprintf("set-%d", calls), Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_SetLimits{SetLimits: &orreryv1.SetLimits{Limits: limits}}}}}
		a := applier()
		a.ApplyVersion = version
		out, err := a.ApplyBatch(v, systemTest, b, t0)
		if err != nil {
			t.Fatal(err)
		}
		return resultErr(out.Receipt.GetResults()[0])
	}
	older := input.DefaultLimits()
	older.MaxPayloadBytes = 1 << 20
	stepless := older.Proto()
	stepless.PriorityStepMicros = nil
	if err := set(ApplyVersionPriority-1, stepless); err != nil {
		t.Fatalf("limits without a step below version 20: %v", err)
	}
	held := &orreryv1.PartitionLimits{}
	if _, err := record.Load(v, keys.PartitionLimits, held); err != nil || held.PriorityStepMicros != nil {
		t.Fatalf("stored limits: %v, %v; want no priority step stored", held, err)
	}
	if lim, err := LoadLimits(v); err != nil || lim != older || lim.PriorityStepMicros != input.Minute {
		t.Fatalf("limits: %+v, %v; want %+v with the default step", lim, err, older)
	}
	for _, bad := range []int64{-1, input.Day + 1} {
		var e *orrery.Error
		err := set(ApplyVersionPriority, withStep(older.Proto(), bad))
		if !errors.As(err, &e) || e.Code != orrery.CodeValidation || e.Field != "mutations[0].set_limits.limits.priority_step_micros" {
			t.Fatalf("step %d: %v, want Validation on mutations[0].set_limits.limits.priority_step_micros", bad, err)
		}
		if lim, _ := LoadLimits(v); lim != older {
			t.Fatalf("a refused step wrote %+v", lim)
		}
	}
	for _, step := range []int64{0, input.Day} {
		if err := set(ApplyVersionPriority, withStep(older.Proto(), step)); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if lim, err := LoadLimits(v); err != nil || lim.PriorityStepMicros != step {
			t.Fatalf("step after setting %d: %+v, %v", step, lim, err)
		}
	}
}

// TestPriorityIsValidatedAndStored: an enqueue's priority above 9 or below 0 is refused naming
// the field and writes nothing; a schedule template's priority reaches its occurrences.
func TestPriorityIsValidatedAndStored(t *testing.T) {
	v := granted(t)
	a := applier()
	a.ApplyVersion = ApplyVersionPriority
	for i, bad := range []int32{-1, 10} {
		b := &orreryv1.Batch{CommandId: fmt.Sprintf("bad-%d", i), Mutations: []*orreryv1.Mutation{withPriority(enqueueMutation("m1"), bad)}}
		out, err := a.ApplyBatch(v, "alice", b, t0)
		if err != nil {
			t.Fatal(err)
		}
		var e *orrery.Error
		if !errors.As(resultErr(out.Receipt.GetResults()[0]), &e) || e.Code != orrery.CodeValidation || e.Field != "mutations[0].enqueue.priority" {
			t.Fatalf("priority %d: %v, want Validation on mutations[0].enqueue.priority", bad, resultErr(out.Receipt.GetResults()[0]))
		}
		if _, found, _ := v.Get(keys.MessageKey(lane, "m1")); found {
			t.Fatalf("priority %d stored the message", bad)
		}
	}
	b := &orreryv1.Batch{CommandId: "good", Mutations: []*orreryv1.Mutation{withPriority(enqueueMutation("m1"), 9)}}
	if out, err := a.ApplyBatch(v, "alice", b, t0); err != nil || out.Receipt.GetResults()[0].GetError() != nil {
		t.Fatalf("priority 9: %v %v", err, out.Receipt.GetResults()[0].GetError())
	}
	msg := &orreryv1.QueueMessage{}
	if found, err := record.Load(v, keys.MessageKey(lane, "m1"), msg); err != nil || !found || msg.GetPriority() != 9 {
		t.Fatalf("stored message: %v, %v, %v; want priority 9", msg, found, err)
	}
	bad := &orreryv1.Batch{CommandId: "bad-template", Mutations: []*orreryv1.Mutation{withTemplatePriority(configureMutation(everySpec(t0+sec, hour), 0), 10)}}
	out, err := a.ApplyBatch(v, "alice", bad, t0)
	if err != nil {
		t.Fatal(err)
	}
	var e *orrery.Error
	if !errors.As(resultErr(out.Receipt.GetResults()[0]), &e) || e.Code != orrery.CodeValidation || e.Field != "mutations[0].configure_schedule.definition.template.priority" {
		t.Fatalf("template priority 10: %v, want Validation on mutations[0].configure_schedule.definition.template.priority", resultErr(out.Receipt.GetResults()[0]))
	}
	configure := &orreryv1.Batch{CommandId: "configure", Mutations: []*orreryv1.Mutation{withTemplatePriority(configureMutation(everySpec(t0-90*60*sec, hour), 0), 7)}}
	if out, err := a.ApplyBatch(v, "alice", configure, t0); err != nil || out.Receipt.GetResults()[0].GetError() != nil {
		t.Fatalf("configure: %v %v", err, out.Receipt)
	}
	emit := &orreryv1.Batch{CommandId: "emit", Mutations: []*orreryv1.Mutation{emitMutation(1)}}
	emitted, err := a.ApplyBatch(v, systemTest, emit, t0)
	if err != nil {
		t.Fatal(err)
	}
	ids := emitted.Receipt.GetResults()[0].GetSchedule().GetEnqueuedIds()
	if len(ids) == 0 {
		t.Fatalf("emit enqueued nothing: %v", emitted.Receipt)
	}
	for _, id := range ids {
		occurrence := &orreryv1.QueueMessage{}
		if found, err := record.Load(v, keys.MessageKey(lane, id), occurrence); err != nil || !found || occurrence.GetPriority() != 7 {
			t.Fatalf("occurrence %s: %v, %v, %v; want the template's priority 7", id, occurrence, found, err)
		}
	}
}
