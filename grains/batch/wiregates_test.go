package batch

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

// olderBatch decodes encoded as a release that did not know the given fields (by message) and
// enum values (by enum) decodes it: a message of the command wire's descriptors without them.
func olderBatch(t *testing.T, encoded []byte, fields, values map[string][]string) protoreflect.Message {
	t.Helper()
	fdp := protodesc.ToFileDescriptorProto(orreryv1.File_api_v1_orrery_proto)
	for _, m := range fdp.GetMessageType() {
		drop := fields[m.GetName()]
		m.Field = slices.DeleteFunc(m.Field, func(f *descriptorpb.FieldDescriptorProto) bool { return slices.Contains(drop, f.GetName()) })
		// A dropped proto3 optional field leaves its synthetic oneof, the last ones, empty.
		for n := len(m.OneofDecl); n > 0 && !slices.ContainsFunc(m.Field, func(f *descriptorpb.FieldDescriptorProto) bool {
			return f.OneofIndex != nil && f.GetOneofIndex() == int32(n-1)
		}); n-- {
			m.OneofDecl = m.OneofDecl[:n-1]
		}
	}
	for _, e := range fdp.GetEnumType() {
		drop := values[e.GetName()]
		e.Value = slices.DeleteFunc(e.Value, func(v *descriptorpb.EnumValueDescriptorProto) bool { return slices.Contains(drop, v.GetName()) })
	}
	file, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	batch := dynamicpb.NewMessage(file.Messages().ByName("Batch"))
	if err := proto.Unmarshal(encoded, batch); err != nil {
		t.Fatal(err)
	}
	return batch
}

// TestAnOlderReleaseRefusesWhatItDoesNotKnowAsANewerOneRefusesItsGate: a command carrying a
// field, a mutation kind or an enum value that the partition's apply version does not take is
// refused by a replica of the release that introduced it (the part is gated) and by one of an
// older release (the part is unknown to it: protobuf kept the field apart, or took the value as
// a bare number) with the same error, so that replicas of mixed releases stay alike.
func TestAnOlderReleaseRefusesWhatItDoesNotKnowAsANewerOneRefusesItsGate(t *testing.T) {
	labelled := configureMutation(everySpec(t0+sec, hour), 0)
	labelled.GetConfigureSchedule().GetDefinition().Labels = map[string]string{"team": "billing", "tier": "gold"}
	labelled.GetConfigureSchedule().GetDefinition().JitterMicros = 10 * sec // known to both
	cancelOther := configureMutation(everySpec(t0+sec, hour), 0)
	cancelOther.GetConfigureSchedule().GetDefinition().Overlap = orreryv1.OverlapPolicy_OVERLAP_POLICY_CANCEL_OTHER
	backfill := &orreryv1.Mutation{Kind: &orreryv1.Mutation_BackfillSchedule{BackfillSchedule: &orreryv1.BackfillSchedule{
		Lane: lane, ScheduleId: scheduleID, FromUnixMicros: t0, ToUnixMicros: t0 + hour}}}
	// What a release before retry policies lacks.
	retryParts := map[string][]string{"Mutation": {"set_queue_retry_policy"}, "Enqueue": {"retry"}, "MessageTemplate": {"retry"}, "Release": {"error", "backoff", "retry"}}
	retryingEnqueue := enqueueMutation("m1")
	retryingEnqueue.GetEnqueue().Retry = &orreryv1.RetryPolicy{MaxAttempts: 2, OnExhausted: orreryv1.RetryExhausted_RETRY_EXHAUSTED_DROP}
	failedRelease := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Release{Release: &orreryv1.Release{Lane: lane, Id: "m1", LeaseToken: "t", Error: "boom", Backoff: true}}}
	for _, c := range []struct {
		name      string
		version   uint32
		mutations []*orreryv1.Mutation
		// what the older release, which knows versions up to version, lacks
		fields, values map[string][]string
		want           string
	}{
		{"a definition's labels at version 9", 9, []*orreryv1.Mutation{labelled},
			map[string][]string{"ScheduleDefinition": {"labels", "catch_up_pace"}}, nil,
			"mutations[0]: carries field 17 of orrery.v1.ScheduleDefinition"},
		{"a mutation kind (backfill) at version 8", 8, []*orreryv1.Mutation{enqueueMutation("m1"), backfill},
			map[string][]string{"Mutation": {"backfill_schedule"}, "ScheduleDefinition": {"labels", "catch_up_pace"}}, nil,
			"mutations[1]: carries field 24 of orrery.v1.Mutation"},
		{"a mutation kind (cancel_message) at version 13", 13, []*orreryv1.Mutation{enqueueMutation("m1"),
			{Kind: &orreryv1.Mutation_CancelMessage{CancelMessage: &orreryv1.CancelMessage{Lane: lane, Id: "m1"}}}},
			map[string][]string{"Mutation": {"cancel_message"}}, nil,
			"mutations[1]: carries field 27 of orrery.v1.Mutation"},
		{"a mutation kind (put_calendar) at version 16", 16, []*orreryv1.Mutation{enqueueMutation("m1"),
			{Kind: &orreryv1.Mutation_PutCalendar{PutCalendar: &orreryv1.PutCalendar{Calendar: &orreryv1.Calendar{Namespace: lane.GetNamespace(), Name: "holidays"}}}}},
			map[string][]string{"Mutation": {"put_calendar", "delete_calendar"}, "ScheduleDefinition": {"calendars"}}, nil,
			"mutations[1]: carries field 28 of orrery.v1.Mutation"},
		{"a mutation kind (delete_calendar) at version 16", 16, []*orreryv1.Mutation{
			{Kind: &orreryv1.Mutation_DeleteCalendar{DeleteCalendar: &orreryv1.DeleteCalendar{Namespace: lane.GetNamespace(), Name: "holidays"}}}},
			map[string][]string{"Mutation": {"put_calendar", "delete_calendar"}, "ScheduleDefinition": {"calendars"}}, nil,
			"mutations[0]: carries field 29 of orrery.v1.Mutation"},
		{"a definition's calendars at version 16", 16, []*orreryv1.Mutation{withCalendars(configureMutation(everySpec(t0+sec, hour), 0), "holidays")},
			map[string][]string{"Mutation": {"put_calendar", "delete_calendar"}, "ScheduleDefinition": {"calendars"}}, nil,
			"mutations[0]: carries field 19 of orrery.v1.ScheduleDefinition"},
		{"a mutation kind (set_queue_retry_policy) at version 18", 18, []*orreryv1.Mutation{enqueueMutation("m1"),
			{Kind: &orreryv1.Mutation_SetQueueRetryPolicy{SetQueueRetryPolicy: &orreryv1.SetQueueRetryPolicy{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(),
				Policy: &orreryv1.RetryPolicy{MaxAttempts: 3}}}}},
			retryParts, nil, "mutations[1]: carries field 30 of orrery.v1.Mutation"},
		{"an enqueue's retry policy at version 18", 18, []*orreryv1.Mutation{retryingEnqueue},
			retryParts, nil, "mutations[0]: carries field 9 of orrery.v1.Enqueue"},
		{"a failed release at version 18", 18, []*orreryv1.Mutation{failedRelease},
			retryParts, nil, "mutations[0]: carries field 5 of orrery.v1.Release"},
		{"an enqueue's priority at version 19", 19, []*orreryv1.Mutation{enqueueMutation("m1"), withPriority(enqueueMutation("m2"), 3)},
			priorityFields, nil,
			"mutations[1]: carries field 10 of orrery.v1.Enqueue"},
		{"a template's priority at version 19", 19, []*orreryv1.Mutation{withTemplatePriority(configureMutation(everySpec(t0+sec, hour), 0), 9)},
			priorityFields, nil,
			"mutations[0]: carries field 7 of orrery.v1.MessageTemplate"},
		{"a priority step of 0 (strict) at version 19", 19, []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_SetLimits{SetLimits: &orreryv1.SetLimits{
			Limits: withStep(input.DefaultLimits().Proto(), 0)}}}},
			priorityFields, nil,
			"mutations[0]: carries field 25 of orrery.v1.PartitionLimits"},
		{"an enum value (CANCEL_OTHER) at version 4", 4, []*orreryv1.Mutation{cancelOther},
			map[string][]string{"ScheduleDefinition": {"jitter_micros", "jitter_allow_early", "expired", "labels", "catch_up_pace"}},
			map[string][]string{"OverlapPolicy": {"OVERLAP_POLICY_CANCEL_OTHER"}},
			"mutations[0]: carries value 5 of field 5 of orrery.v1.ScheduleDefinition"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &orreryv1.Batch{CommandId: "gated", Mutations: c.mutations}
			v := granted(t)
			before := v.Clone()
			newer := applier()
			newer.ApplyVersion = c.version
			_, newerErr := newer.ApplyBatch(v, sender(b), b, t0)
			if !errors.Is(newerErr, orrery.ErrValidation) || !strings.Contains(newerErr.Error(), c.want) || !v.Equal(before) {
				t.Fatalf("the release that gates it: %v (wrote: %v), want Validation %q and nothing written", newerErr, !v.Equal(before), c.want)
			}
			encoded, err := proto.Marshal(b)
			if err != nil {
				t.Fatal(err)
			}
			older := olderBatch(t, encoded, c.fields, c.values)
			olderErr := wireError(older, c.version)
			if olderErr == nil || olderErr.Error() != newerErr.Error() {
				t.Fatalf("an older release that does not know it:\n%v\nthe release that gates it:\n%v", olderErr, newerErr)
			}
			newer.ApplyVersion = KnownApplyVersion
			if err := wireError(b.ProtoReflect(), KnownApplyVersion); err != nil {
				t.Fatalf("at the newest version: %v", err)
			}
		})
	}
}

// priorityFields are the fields a release before apply version 20 does not know.
var priorityFields = map[string][]string{"Enqueue": {"priority"}, "MessageTemplate": {"priority"}, "PartitionLimits": {"priority_step_micros"}}

// withPriority sets the priority of m's enqueue.
func withPriority(m *orreryv1.Mutation, priority int32) *orreryv1.Mutation {
	m.GetEnqueue().Priority = priority
	return m
}

// withTemplatePriority sets the priority of m's definition's template.
func withTemplatePriority(m *orreryv1.Mutation, priority int32) *orreryv1.Mutation {
	m.GetConfigureSchedule().GetDefinition().GetTemplate().Priority = priority
	return m
}

// withStep sets a priority step in limits.
func withStep(limits *orreryv1.PartitionLimits, stepMicros int64) *orreryv1.PartitionLimits {
	limits.PriorityStepMicros = &stepMicros
	return limits
}

// withCalendars sets the calendars of m's definition.
func withCalendars(m *orreryv1.Mutation, names ...string) *orreryv1.Mutation {
	m.GetConfigureSchedule().GetDefinition().Calendars = names
	return m
}

// TestAPartNoReleaseKnowsIsRefused: a field, a mutation kind or an enum value that this binary
// does not know at all (a newer client's) is refused whole at any apply version, before
// anything is written, rather than applied without it.
func TestAPartNoReleaseKnowsIsRefused(t *testing.T) {
	unknownField := enqueueMutation("m1")
	enqueue := unknownField.GetEnqueue().ProtoReflect()
	enqueue.SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 7))
	unknownKind := &orreryv1.Mutation{}
	unknownKind.ProtoReflect().SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, 999, protowire.BytesType), []byte{}))
	unknownValue := configureMutation(everySpec(t0+sec, hour), 0)
	unknownValue.GetConfigureSchedule().GetDefinition().Overlap = 99
	unknownEnvelope := &orreryv1.Batch{CommandId: "envelope", Mutations: []*orreryv1.Mutation{enqueueMutation("m2")}}
	unknownEnvelope.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 50, protowire.VarintType), 1))
	for _, c := range []struct {
		b    *orreryv1.Batch
		want string
	}{
		{&orreryv1.Batch{CommandId: "field", Mutations: []*orreryv1.Mutation{unknownField}}, "mutations[0]: carries field 99 of orrery.v1.Enqueue"},
		{&orreryv1.Batch{CommandId: "kind", Mutations: []*orreryv1.Mutation{enqueueMutation("m3"), unknownKind}}, "mutations[1]: carries field 999 of orrery.v1.Mutation"},
		{&orreryv1.Batch{CommandId: "value", Mutations: []*orreryv1.Mutation{unknownValue}}, "mutations[0]: carries value 99 of field 5 of orrery.v1.ScheduleDefinition"},
		{unknownEnvelope, "validation: carries field 50 of orrery.v1.Batch"},
	} {
		v := granted(t)
		before := v.Clone()
		a := applier()
		a.ApplyVersion = KnownApplyVersion
		_, err := a.ApplyBatch(v, sender(c.b), c.b, t0)
		if !errors.Is(err, orrery.ErrValidation) || !strings.Contains(err.Error(), c.want) || !v.Equal(before) {
			t.Fatalf("%s: %v (wrote: %v), want Validation %q and nothing written", c.b.GetCommandId(), err, !v.Equal(before), c.want)
		}
		if _, err := a.ApplyDue(v, systemTest, c.b, t0); !errors.Is(err, orrery.ErrValidation) {
			t.Fatalf("%s as a due command: %v, want Validation", c.b.GetCommandId(), err)
		}
	}
}

// TestEveryWireGateNamesAPartOfTheWire: the gates resolve against the descriptors (a gate
// naming a field or value that does not exist would panic at start), one per part, each at a
// version this binary knows.
func TestEveryWireGateNamesAPartOfTheWire(t *testing.T) {
	if len(gateVersions) != len(wireGates) {
		t.Fatalf("%d gates resolved to %d parts: two gates name the same part", len(wireGates), len(gateVersions))
	}
	for k, v := range gateVersions {
		if v < 2 || v > KnownApplyVersion {
			t.Fatalf("gate %v at version %d, outside 2..%d", k, v, KnownApplyVersion)
		}
	}
}

// BenchmarkCheckWire is the cost checkWire adds to every command: a batch of one enqueue, and
// one of a labelled schedule definition.
func BenchmarkCheckWire(b *testing.B) {
	a := applier()
	a.ApplyVersion = KnownApplyVersion
	labelled := configureMutation(everySpec(t0+sec, hour), 0)
	labelled.GetConfigureSchedule().GetDefinition().Labels = map[string]string{"team": "billing", "tier": "gold"}
	for _, c := range []struct {
		name string
		m    *orreryv1.Mutation
	}{{"enqueue", enqueueMutation("m1")}, {"configure", labelled}} {
		batch := &orreryv1.Batch{CommandId: "c", Mutations: []*orreryv1.Mutation{c.m}}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := a.checkWire(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
