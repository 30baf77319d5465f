package schedule

import (
	"bytes"
	"errors"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

const (
	scheduleID = "0f8fad5b-d9cb-469f-a165-70867728950e"
	sec        = input.Second
	hour       = input.Hour
	// t0 is 2026-01-01T00:00:00Z.
	t0 int64 = 1767225600 * sec
)

var lane = &orreryv1.Lane{Namespace: "acme", Queue: "reports", Key: "k1"}

func every(first, interval int64) *orreryv1.ScheduleSpec {
	return &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{FirstDueAtUnixMicros: first, IntervalMicros: interval}}}
}

func at(instant int64) *orreryv1.ScheduleSpec {
	return &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_At{At: &orreryv1.AtSpec{DueAtUnixMicros: instant}}}
}

func after(delay int64) *orreryv1.ScheduleSpec {
	return &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_After{After: &orreryv1.AfterSpec{DelayMicros: delay}}}
}

func definition(spec *orreryv1.ScheduleSpec) *orreryv1.ScheduleDefinition {
	return &orreryv1.ScheduleDefinition{
		Lane: lane, ScheduleId: scheduleID, Spec: spec,
		Template: &orreryv1.MessageTemplate{PayloadJson: `{"report":"daily"}`, HeadersJson: `{"h":"v"}`},
	}
}

func configure(t *testing.T, v kv.View, def *orreryv1.ScheduleDefinition, expected uint64, now int64) *orreryv1.ScheduleResult {
	t.Helper()
	res, err := applyConfigure(v, input.DefaultLimits(), "alice", &orreryv1.ConfigureSchedule{Definition: def, ExpectedRevision: expected}, now)
	if err != nil {
		t.Fatalf("configure: %v", err)
	}
	return res
}

func emit(v kv.View, generation uint64, max uint32, now int64) (*orreryv1.ScheduleResult, error) {
	return ApplyEmit(v, input.DefaultLimits(), &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: scheduleID, ExpectedGeneration: generation, Max: max}, now)
}

func mustLoad(t *testing.T, v kv.Reader) *orreryv1.ScheduleRecord {
	t.Helper()
	rec, found, err := Load(v, lane, scheduleID)
	if err != nil || !found {
		t.Fatalf("load: found=%v err=%v", found, err)
	}
	return rec
}

// wantCode fails unless err is an *orrery.Error of the code (and, if field is set, names it).
func wantCode(t *testing.T, err error, sentinel *orrery.Error, field string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want code %v", err, sentinel.Code)
	}
	if field != "" && orrery.AsError(err).Field != field {
		t.Fatalf("error field %q, want %q (%v)", orrery.AsError(err).Field, field, err)
	}
}

// messages returns the live messages of the lane, by id.
func messages(t *testing.T, v kv.Reader) map[string]*orreryv1.QueueMessage {
	t.Helper()
	out := map[string]*orreryv1.QueueMessage{}
	if err := scanMessages(v, func(m *orreryv1.QueueMessage) { out[m.GetId()] = m }); err != nil {
		t.Fatal(err)
	}
	return out
}

func scanMessages(v kv.Reader, fn func(*orreryv1.QueueMessage)) error {
	return kv.ScanPrefix(v, keys.Of(keys.Message, keys.AppendLane(nil, lane)), func(key, value []byte) (bool, error) {
		m := &orreryv1.QueueMessage{}
		if _, err := record.Load(v, bytes.Clone(key), m); err != nil {
			return false, err
		}
		fn(m)
		return true, nil
	})
}

// dueEntries returns the due index entries.
func dueEntries(t *testing.T, v kv.Reader) []*orreryv1.DueRef {
	t.Helper()
	var refs []*orreryv1.DueRef
	err := kv.ScanPrefix(v, keys.Due, func(key, value []byte) (bool, error) {
		ref := &orreryv1.DueRef{}
		_, err := record.Load(v, bytes.Clone(key), ref)
		refs = append(refs, ref)
		return true, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return refs
}

// wantDue fails unless the due index holds exactly one schedule entry at dueAt with the token
// (or none when dueAt is 0).
func wantDue(t *testing.T, v kv.Reader, dueAt int64, generation uint64) {
	t.Helper()
	refs := dueEntries(t, v)
	if dueAt == 0 {
		if len(refs) != 0 {
			t.Fatalf("due index %v, want empty", refs)
		}
		return
	}
	if len(refs) != 1 || refs[0].GetDueAtUnixMicros() != dueAt || refs[0].GetToken() != generation || refs[0].GetId() != scheduleID {
		t.Fatalf("due index %v, want one entry at %d token %d", refs, dueAt, generation)
	}
}

// applyConfigure applies m as a partition does: with the zone rules its leader carries.
func applyConfigure(v kv.View, lim input.Limits, principal string, m *orreryv1.ConfigureSchedule, now int64) (*orreryv1.ScheduleResult, error) {
	carried := ZoneRulesFor([]*orreryv1.Mutation{{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: m}}})
	return ApplyConfigure(v, lim, principal, m, carried, now, Newest)
}
