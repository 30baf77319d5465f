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

// TestListSelectsByLabelsAndNamePrefix: a list with labels returns only the schedules carrying
// every label (an empty value: any value), with a name prefix only those whose name begins
// with it, in order and across pages, by the records or by the state index; a page that scans
// MaxScanned records without a match ends empty with a continuation, and the next page goes on.
func TestListSelectsByLabelsAndNamePrefix(t *testing.T) {
	v := kv.NewMemory()
	labelled := batch.Applier{Limits: input.DefaultLimits(), ApplyVersion: batch.KnownApplyVersion}
	if err := grants.ApplyPut(v, input.SystemPrincipalPrefix+"test", grants.Everything("alice")); err != nil {
		t.Fatal(err)
	}
	const n = 40
	for i := range n {
		def := &orreryv1.ScheduleDefinition{Lane: jobs, ScheduleId: id(i), Spec: every(t0 + input.Hour), Name: fmt.Sprintf("job-%02d", i),
			Labels: map[string]string{"team": []string{"billing", "search"}[i%2]}}
		if i%10 == 0 {
			def.Labels["tier"] = "gold"
			def.Name = fmt.Sprintf("nightly-%02d", i)
		}
		m := &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{Definition: def}}}
		out, err := labelled.ApplyBatch(v, "alice", &orreryv1.Batch{CommandId: fmt.Sprint("c", i), Mutations: []*orreryv1.Mutation{m}}, t0)
		if err != nil || out.Receipt.GetResults()[0].GetError() != nil {
			t.Fatalf("configure %d: %v %v", i, err, out.Receipt.GetResults()[0].GetError())
		}
	}
	gold := scheduleIDs(t, v, &orreryv1.ListSchedules{Namespace: "acme", Labels: map[string]string{"tier": "gold", "team": "billing"}, MaxRecords: 1})
	if fmt.Sprint(gold) != fmt.Sprint([]string{id(0), id(10), id(20), id(30)}) {
		t.Fatalf("tier=gold,team=billing listed %v", gold)
	}
	if anyTier := scheduleIDs(t, v, &orreryv1.ListSchedules{Namespace: "acme", State: active, Labels: map[string]string{"tier": ""}, MaxRecords: 3}); len(anyTier) != 4 {
		t.Fatalf("tier (any value) by the state index listed %v", anyTier)
	}
	if nightly := scheduleIDs(t, v, &orreryv1.ListSchedules{Namespace: "acme", NamePrefix: "nightly-", MaxRecords: 2}); len(nightly) != 4 {
		t.Fatalf("name prefix nightly- listed %v", nightly)
	}
	if search := scheduleIDs(t, v, &orreryv1.ListSchedules{Namespace: "acme", Labels: map[string]string{"team": "search"}}); len(search) != n/2 {
		t.Fatalf("team=search listed %d, want %d", len(search), n/2)
	}
	// A page that scans its bound without a match ends empty, with a continuation.
	restore := listing.SetMaxScannedForTest(5)
	defer restore()
	page, next, err := listing.Schedules(v, &orreryv1.ListSchedules{Namespace: "acme", Labels: map[string]string{"tier": "gold"}, After: nil, MaxRecords: 10}, listing.MaxPageBytes)
	if err != nil || len(page) != 1 || next == nil {
		t.Fatalf("a bounded scan: %d records, next %x, err %v; want the one match among the first 5 and a continuation", len(page), next, err)
	}
	if all := scheduleIDs(t, v, &orreryv1.ListSchedules{Namespace: "acme", Labels: map[string]string{"tier": "gold"}, MaxRecords: 10}); len(all) != 4 {
		t.Fatalf("bounded scans listed %v, want all 4 over the pages", all)
	}
	if _, _, err := listing.Schedules(v, &orreryv1.ListSchedules{Namespace: "acme", Labels: map[string]string{"bad key": "x"}}, listing.MaxPageBytes); err == nil {
		t.Fatal("a selector with a malformed key was taken")
	}
}
