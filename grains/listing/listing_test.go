package listing_test

import (
	"fmt"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/listing"
)

const t0 int64 = 1767225600 * input.Second // 2026-01-01T00:00:00Z

var (
	applier = batch.Applier{Limits: input.DefaultLimits()}
	jobs    = &orreryv1.Lane{Namespace: "acme", Queue: "jobs", Key: "k"}
	reports = &orreryv1.Lane{Namespace: "acme", Queue: "reports", Key: "k"}
	beta    = &orreryv1.Lane{Namespace: "beta", Queue: "jobs", Key: "k"}
)

const (
	active    = orreryv1.ScheduleState_SCHEDULE_STATE_ACTIVE
	paused    = orreryv1.ScheduleState_SCHEDULE_STATE_PAUSED
	cancelled = orreryv1.ScheduleState_SCHEDULE_STATE_CANCELLED
	completed = orreryv1.ScheduleState_SCHEDULE_STATE_COMPLETED
	waiting   = orreryv1.SagaPhase_SAGA_PHASE_WAITING
	done      = orreryv1.SagaPhase_SAGA_PHASE_COMPLETED
)

func id(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

// apply applies one mutation as its own command and fails the test on any error.
func apply(t *testing.T, v kv.View, now int64, m *orreryv1.Mutation) *orreryv1.MutationResult {
	t.Helper()
	if err := grants.ApplyPut(v, input.SystemPrincipalPrefix+"test", grants.Everything("alice")); err != nil {
		t.Fatal(err)
	}
	principal := "alice"
	switch m.GetKind().(type) {
	case *orreryv1.Mutation_EmitOccurrences, *orreryv1.Mutation_ExpireSaga, *orreryv1.Mutation_Housekeep:
		principal = input.SystemPrincipalPrefix + "test"
	}
	out, err := applier.ApplyBatch(v, principal, &orreryv1.Batch{CommandId: fmt.Sprintf("c-%d-%p", now, m), Mutations: []*orreryv1.Mutation{m}}, now)
	if err != nil {
		t.Fatal(err)
	}
	r := out.Receipt.GetResults()[0]
	if r.GetError() != nil {
		t.Fatalf("%T: %v", m.GetKind(), orrery.FromProto(r.GetError()))
	}
	return r
}

func configure(lane *orreryv1.Lane, scheduleID string, spec *orreryv1.ScheduleSpec) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
		Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: scheduleID, Spec: spec}}}}
}

func every(first int64) *orreryv1.ScheduleSpec {
	return &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{FirstDueAtUnixMicros: first, IntervalMicros: input.Hour}}}
}

func at(instant int64) *orreryv1.ScheduleSpec {
	return &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_At{At: &orreryv1.AtSpec{DueAtUnixMicros: instant}}}
}

func exchange(lane *orreryv1.Lane, sagaID string, expected uint64, phase orreryv1.SagaPhase) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_CompareExchangeSaga{CompareExchangeSaga: &orreryv1.CompareExchangeSaga{
		Lane: lane, SagaId: sagaID, ExpectedRevision: expected, Phase: phase, StateJson: `{}`}}}
}

// scheduleIDs lists every page of q (pages of pageSize) and returns the ids in order.
func scheduleIDs(t *testing.T, v kv.Reader, q *orreryv1.ListSchedules) []string {
	t.Helper()
	var ids []string
	for range 100 {
		page, next, err := listing.Schedules(v, q, listing.MaxPageBytes)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range page {
			ids = append(ids, item.GetRecord().GetDefinition().GetScheduleId())
		}
		if next == nil {
			return ids
		}
		q.After = next
	}
	t.Fatal("more than 100 pages")
	return nil
}

func sagaIDs(t *testing.T, v kv.Reader, q *orreryv1.ListSagas) []string {
	t.Helper()
	page, next, err := listing.Sagas(v, q, listing.MaxPageBytes)
	if err != nil || next != nil {
		t.Fatalf("list sagas: next %x, err %v", next, err)
	}
	var ids []string
	for _, rec := range page {
		ids = append(ids, rec.GetSagaId())
	}
	return ids
}

// TestIndexFollowsEveryMutation: each mutation that changes a schedule's state or a saga's
// phase moves it from one state's list to the other's in the same command; delete removes it.
func TestIndexFollowsEveryMutation(t *testing.T) {
	v := kv.NewMemory()
	byState := func(state orreryv1.ScheduleState) string {
		return fmt.Sprint(scheduleIDs(t, v, &orreryv1.ListSchedules{Namespace: "acme", State: state}))
	}
	apply(t, v, t0, configure(jobs, id(1), every(t0+input.Hour)))
	apply(t, v, t0, configure(jobs, id(2), at(t0+input.Minute)))
	steps := []struct {
		name     string
		mutation *orreryv1.Mutation
		now      int64
		want     map[orreryv1.ScheduleState]string
	}{
		{"created", nil, t0, map[orreryv1.ScheduleState]string{active: fmt.Sprint([]string{id(1), id(2)}), paused: "[]"}},
		{"paused", &orreryv1.Mutation{Kind: &orreryv1.Mutation_PauseSchedule{PauseSchedule: &orreryv1.PauseSchedule{Lane: jobs, ScheduleId: id(1), AnyRevision: true}}}, t0,
			map[orreryv1.ScheduleState]string{active: fmt.Sprint([]string{id(2)}), paused: fmt.Sprint([]string{id(1)})}},
		{"one-shot fired", &orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{Lane: jobs, ScheduleId: id(2), ExpectedGeneration: 1, Max: 1}}}, t0 + input.Minute,
			map[orreryv1.ScheduleState]string{active: "[]", completed: fmt.Sprint([]string{id(2)})}},
		{"cancelled", &orreryv1.Mutation{Kind: &orreryv1.Mutation_CancelSchedule{CancelSchedule: &orreryv1.CancelSchedule{Lane: jobs, ScheduleId: id(1), AnyRevision: true}}}, t0 + input.Minute,
			map[orreryv1.ScheduleState]string{paused: "[]", cancelled: fmt.Sprint([]string{id(1)})}},
		{"reconfigured", &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
			Definition: &orreryv1.ScheduleDefinition{Lane: jobs, ScheduleId: id(1), Spec: every(t0 + input.Hour)}, ExpectedRevision: 3}}}, t0 + input.Minute,
			map[orreryv1.ScheduleState]string{cancelled: "[]", active: fmt.Sprint([]string{id(1)})}},
		{"deleted", &orreryv1.Mutation{Kind: &orreryv1.Mutation_DeleteSchedule{DeleteSchedule: &orreryv1.DeleteSchedule{Lane: jobs, ScheduleId: id(2), AnyRevision: true}}}, t0 + input.Minute,
			map[orreryv1.ScheduleState]string{completed: "[]", 0: fmt.Sprint([]string{id(1)})}},
	}
	for _, s := range steps {
		if s.mutation != nil {
			apply(t, v, s.now, s.mutation)
		}
		for state, want := range s.want {
			if got := byState(state); got != want {
				t.Errorf("%s: %v lists %s, want %s", s.name, state, got, want)
			}
		}
	}
	if n := countPrefix(t, v, keys.ScheduleIndex); n != 1 {
		t.Errorf("schedule index holds %d entries for 1 schedule", n)
	}

	apply(t, v, t0, exchange(jobs, id(3), 0, waiting))
	if got := fmt.Sprint(sagaIDs(t, v, &orreryv1.ListSagas{Namespace: "acme", Phase: waiting})); got != fmt.Sprint([]string{id(3)}) {
		t.Errorf("waiting sagas %s", got)
	}
	apply(t, v, t0, exchange(jobs, id(3), 1, done))
	if got := fmt.Sprint(sagaIDs(t, v, &orreryv1.ListSagas{Namespace: "acme", Phase: waiting})); got != "[]" {
		t.Errorf("waiting sagas after completion %s", got)
	}
	if got := fmt.Sprint(sagaIDs(t, v, &orreryv1.ListSagas{Namespace: "acme", Phase: done})); got != fmt.Sprint([]string{id(3)}) {
		t.Errorf("completed sagas %s", got)
	}
}

func countPrefix(t *testing.T, v kv.Reader, prefix []byte) int {
	t.Helper()
	n := 0
	if err := kv.ScanPrefix(v, prefix, func(_, _ []byte) (bool, error) { n++; return true, nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPagesCoverTheNamespaceOnce: pages of every size, by namespace, queue and state, list
// each matching record once, in (queue, key, id) order, and nothing of another namespace.
func TestPagesCoverTheNamespaceOnce(t *testing.T) {
	v := kv.NewMemory()
	var want, wantJobs, wantPaused []string
	for n := range 7 {
		lane := jobs
		if n >= 4 {
			lane = reports
		}
		apply(t, v, t0, configure(lane, id(n), every(t0+input.Hour)))
		apply(t, v, t0, configure(beta, id(100+n), every(t0+input.Hour)))
		want = append(want, id(n))
		if lane == jobs {
			wantJobs = append(wantJobs, id(n))
		}
		if n%2 == 1 {
			apply(t, v, t0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_PauseSchedule{PauseSchedule: &orreryv1.PauseSchedule{Lane: lane, ScheduleId: id(n), AnyRevision: true}}})
			wantPaused = append(wantPaused, id(n))
		}
	}
	for size := uint32(1); size <= 8; size++ {
		for _, c := range []struct {
			q    *orreryv1.ListSchedules
			want []string
		}{
			{&orreryv1.ListSchedules{Namespace: "acme"}, want},
			{&orreryv1.ListSchedules{Namespace: "acme", Queue: "jobs"}, wantJobs},
			{&orreryv1.ListSchedules{Namespace: "acme", State: paused}, wantPaused},
			{&orreryv1.ListSchedules{Namespace: "acme", Queue: "nothing"}, nil},
		} {
			c.q.MaxRecords = size
			if got := scheduleIDs(t, v, c.q); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("pages of %d, queue %q state %v: %v, want %v", size, c.q.Queue, c.q.State, got, c.want)
			}
		}
	}
}

// TestPageBudget: a page ends at its record count or its byte budget, whichever comes first,
// with a continuation; the last page has none; a page holds one record however large.
func TestPageBudget(t *testing.T) {
	v := kv.NewMemory()
	for n := range 3 {
		apply(t, v, t0, configure(jobs, id(n), every(t0+input.Hour)))
	}
	page, next, err := listing.Schedules(v, &orreryv1.ListSchedules{Namespace: "acme", MaxRecords: 2}, listing.MaxPageBytes)
	if err != nil || len(page) != 2 || next == nil {
		t.Fatalf("2 of 3: %d records, next %x, err %v", len(page), next, err)
	}
	page, next, err = listing.Schedules(v, &orreryv1.ListSchedules{Namespace: "acme", MaxRecords: 2, After: next}, listing.MaxPageBytes)
	if err != nil || len(page) != 1 || next != nil {
		t.Fatalf("last page: %d records, next %x, err %v", len(page), next, err)
	}
	page, next, err = listing.Schedules(v, &orreryv1.ListSchedules{Namespace: "acme", MaxRecords: 3}, 1)
	if err != nil || len(page) != 1 || next == nil {
		t.Fatalf("byte budget of 1: %d records, next %x, err %v", len(page), next, err)
	}
	_, _, err = listing.Schedules(v, &orreryv1.ListSchedules{Namespace: "acme", After: []byte("garbage")}, listing.MaxPageBytes)
	if orrery.AsError(err).Code != orrery.CodeValidation {
		t.Fatalf("malformed continuation: %v", err)
	}
	_, _, err = listing.Schedules(v, &orreryv1.ListSchedules{}, listing.MaxPageBytes)
	if orrery.AsError(err).Code != orrery.CodeValidation {
		t.Fatalf("no namespace: %v", err)
	}
}

// TestBuildIndexesOlderRecords: a store whose records predate the index (no index entries, no
// progress) answers lists Unavailable and has housekeeping due; Housekeep indexes it in
// bounded steps, after which lists answer and nothing is due.
func TestBuildIndexesOlderRecords(t *testing.T) {
	v := kv.NewMemory()
	for n := range 5 {
		apply(t, v, t0, configure(jobs, id(n), every(t0+input.Hour)))
		apply(t, v, t0, exchange(jobs, id(10+n), 0, waiting))
	}
	// What a store written before the index looks like.
	for _, prefix := range [][]byte{keys.ScheduleIndex, keys.SagaIndex, keys.ListIndexProgress} {
		var doomed [][]byte
		_ = kv.ScanPrefix(v, prefix, func(k, _ []byte) (bool, error) { doomed = append(doomed, append([]byte(nil), k...)); return true, nil })
		for _, k := range doomed {
			_ = v.Delete(k)
		}
	}
	_, _, err := listing.Schedules(v, &orreryv1.ListSchedules{Namespace: "acme", State: active}, listing.MaxPageBytes)
	if orrery.AsError(err).Code != orrery.CodeUnavailable {
		t.Fatalf("list before the index is built: %v", err)
	}
	due, err := applier.HousekeepingDue(v, t0)
	if err != nil || !due {
		t.Fatalf("housekeeping due before the index is built: %v %v", due, err)
	}
	for step := 0; ; step++ {
		r := apply(t, v, t0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Housekeep{Housekeep: &orreryv1.Housekeep{MaxRecords: 4}}}).GetHousekeep()
		if step == 0 && (r.GetIndexRecordsBuilt() != 4 || !r.GetMore()) {
			t.Fatalf("first housekeep: %v", r)
		}
		if !r.GetMore() {
			break
		}
		if step > 5 {
			t.Fatal("index never completed")
		}
	}
	if due, err := applier.HousekeepingDue(v, t0); err != nil || due {
		t.Fatalf("housekeeping due after the index is built: %v %v", due, err)
	}
	if got := scheduleIDs(t, v, &orreryv1.ListSchedules{Namespace: "acme", State: active}); len(got) != 5 {
		t.Fatalf("active schedules after the build: %v", got)
	}
	if got := sagaIDs(t, v, &orreryv1.ListSagas{Namespace: "acme", Phase: waiting}); len(got) != 5 {
		t.Fatalf("waiting sagas after the build: %v", got)
	}
}
