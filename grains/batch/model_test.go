package batch

import (
	"bytes"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/saga"
	"github.com/orreryhq/orrery/grains/schedule"
)

// The reference model: just enough state to predict every outcome code and every emitted id.
type modelSchedule struct {
	exists, deleted, cancelled, paused bool
	revision, generation, nextOrdinal  uint64
	first, interval                    int64
	emitted                            map[uint64]bool // ordinals of the current generation
	skipped                            map[uint64]bool // ordinals passed over by a resume
}

type modelSaga struct {
	exists           bool
	revision         uint64
	phase            orreryv1.SagaPhase
	deadline         int64
	timeoutsEnqueued int
}

type model struct {
	now       int64
	schedules []*modelSchedule
	sagas     []*modelSaga
	ids       map[string]bool // every message id ever enqueued, to catch a second emission
}

var (
	modelScheduleIDs = []string{"11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"}
	modelSagaIDs     = []string{"33333333-3333-4333-8333-333333333333", "44444444-4444-4444-8444-444444444444"}
	modelLane        = &orreryv1.Lane{Namespace: "acme", Queue: "jobs", Key: "k"}
	// modelLanes are the lanes of schedule i and saga i: two queues of one namespace, so that lists by
	// queue differ from lists by namespace.
	modelLanes = []*orreryv1.Lane{modelLane, {Namespace: "acme", Queue: "reports", Key: "k"}}
)

// dueCount is how many ordinals are due by now, by repeated addition.
func (s *modelSchedule) dueCount(now int64) uint64 {
	var n uint64
	for at := s.first; at <= now; at += s.interval {
		n++
	}
	return n
}

// step is one generated mutation with the model's prediction.
type step struct {
	mutation *orreryv1.Mutation
	// predict applies the mutation to the model and returns the expected code (0 = success)
	// and the ids it must enqueue.
	predict func(m *model) (orrery.Code, []string)
}

func genStep(t *rapid.T, m *model) step {
	si := rapid.IntRange(0, 1).Draw(t, "schedule")
	s, sid, slane := m.schedules[si], modelScheduleIDs[si], modelLanes[si]
	gi := rapid.IntRange(0, 1).Draw(t, "saga")
	g, gid, glane := m.sagas[gi], modelSagaIDs[gi], modelLanes[gi]
	rev := func(current uint64) uint64 { // mostly right, sometimes stale
		if rapid.IntRange(0, 4).Draw(t, "wrongRevision") == 0 {
			return current + 1
		}
		return current
	}
	switch rapid.IntRange(0, 10).Draw(t, "op") {
	case 0, 1: // configure
		expected := rev(s.revision)
		first := m.now + rapid.Int64Range(-10, 10).Draw(t, "firstMinutes")*input.Minute
		interval := rapid.Int64Range(1, 30).Draw(t, "intervalMinutes") * input.Minute
		mut := &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
			Definition:       &orreryv1.ScheduleDefinition{Lane: slane, ScheduleId: sid, Spec: everySpec(first, interval)},
			ExpectedRevision: expected,
		}}}
		return step{mut, func(m *model) (orrery.Code, []string) {
			switch {
			case s.deleted:
				return orrery.CodeRevisionConflict, nil
			case expected == 0 && s.exists:
				return orrery.CodeRevisionConflict, nil
			case expected != 0 && !s.exists:
				return orrery.CodeNotFound, nil
			case s.exists && expected != s.revision:
				return orrery.CodeRevisionConflict, nil
			}
			*s = modelSchedule{exists: true, revision: s.revision + 1, generation: s.generation + 1, first: first, interval: interval,
				emitted: map[uint64]bool{}, skipped: map[uint64]bool{}}
			return 0, nil
		}}
	case 2, 3: // emit
		gen := s.generation
		if rapid.IntRange(0, 4).Draw(t, "staleGeneration") == 0 {
			gen++
		}
		max := uint32(rapid.IntRange(1, 32).Draw(t, "max"))
		mut := &orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{Lane: slane, ScheduleId: sid, ExpectedGeneration: gen, Max: max}}}
		return step{mut, func(m *model) (orrery.Code, []string) {
			switch {
			case !s.exists:
				return orrery.CodeNotFound, nil
			case gen != s.generation:
				return orrery.CodeTokenInvalidated, nil
			case s.cancelled || s.paused:
				return 0, nil
			}
			var ids []string
			for due := s.dueCount(m.now); s.nextOrdinal < due && uint32(len(ids)) < max; s.nextOrdinal++ {
				ids = append(ids, schedule.OccurrenceID(sid, s.generation, s.nextOrdinal))
				s.emitted[s.nextOrdinal] = true
			}
			if len(ids) > 0 {
				s.revision++
			}
			return 0, ids
		}}
	case 4: // cancel, pause or resume
		expected := rev(s.revision)
		kind := rapid.IntRange(0, 2).Draw(t, "lifecycle")
		var mut *orreryv1.Mutation
		switch kind {
		case 0:
			mut = &orreryv1.Mutation{Kind: &orreryv1.Mutation_CancelSchedule{CancelSchedule: &orreryv1.CancelSchedule{Lane: slane, ScheduleId: sid, ExpectedRevision: expected}}}
		case 1:
			mut = &orreryv1.Mutation{Kind: &orreryv1.Mutation_PauseSchedule{PauseSchedule: &orreryv1.PauseSchedule{Lane: slane, ScheduleId: sid, ExpectedRevision: expected}}}
		default:
			mut = &orreryv1.Mutation{Kind: &orreryv1.Mutation_ResumeSchedule{ResumeSchedule: &orreryv1.ResumeSchedule{Lane: slane, ScheduleId: sid, ExpectedRevision: expected}}}
		}
		return step{mut, func(m *model) (orrery.Code, []string) {
			switch {
			case !s.exists:
				return orrery.CodeNotFound, nil
			case expected != s.revision:
				return orrery.CodeRevisionConflict, nil
			}
			switch kind {
			case 0:
				if !s.cancelled {
					s.cancelled = true
					s.revision++
				}
			case 1:
				if s.cancelled || s.paused {
					return orrery.CodeSuspended, nil
				}
				s.paused = true
				s.revision++
			default:
				if s.cancelled || !s.paused {
					return orrery.CodeSuspended, nil
				}
				// Pass (PAUSED) every ordinal due before now.
				for at := s.first + int64(s.nextOrdinal)*s.interval; at < m.now; at += s.interval {
					s.skipped[s.nextOrdinal] = true
					s.nextOrdinal++
				}
				s.paused = false
				s.revision++
			}
			return 0, nil
		}}
	case 5, 6: // saga compare-exchange
		expected := rev(g.revision)
		phase := rapid.SampledFrom([]orreryv1.SagaPhase{orreryv1.SagaPhase_SAGA_PHASE_WAITING, orreryv1.SagaPhase_SAGA_PHASE_WAITING, orreryv1.SagaPhase_SAGA_PHASE_COMPLETED, orreryv1.SagaPhase_SAGA_PHASE_CANCELLED}).Draw(t, "phase")
		var deadline int64
		var timeout *orreryv1.SagaTimeout
		if phase == orreryv1.SagaPhase_SAGA_PHASE_WAITING && rapid.Bool().Draw(t, "withDeadline") {
			deadline = m.now + rapid.Int64Range(1, 20).Draw(t, "deadlineMinutes")*input.Minute
			timeout = &orreryv1.SagaTimeout{Queue: "timeouts"}
		}
		mut := &orreryv1.Mutation{Kind: &orreryv1.Mutation_CompareExchangeSaga{CompareExchangeSaga: &orreryv1.CompareExchangeSaga{
			Lane: glane, SagaId: gid, ExpectedRevision: expected, Phase: phase, StateJson: `{"s":1}`, DeadlineUnixMicros: deadline, Timeout: timeout,
		}}}
		return step{mut, func(m *model) (orrery.Code, []string) {
			switch {
			case expected == 0 && g.exists:
				return orrery.CodeRevisionConflict, nil
			case expected == 0 && phase != orreryv1.SagaPhase_SAGA_PHASE_WAITING:
				return orrery.CodeValidation, nil
			case expected != 0 && !g.exists:
				return orrery.CodeNotFound, nil
			case g.exists && (expected != g.revision || g.phase != orreryv1.SagaPhase_SAGA_PHASE_WAITING):
				return orrery.CodeRevisionConflict, nil
			}
			g.exists, g.revision, g.phase, g.deadline = true, g.revision+1, phase, deadline
			return 0, nil
		}}
	case 7: // expire
		expected := rev(g.revision)
		mut := &orreryv1.Mutation{Kind: &orreryv1.Mutation_ExpireSaga{ExpireSaga: &orreryv1.ExpireSaga{Lane: glane, SagaId: gid, ExpectedRevision: expected}}}
		return step{mut, func(m *model) (orrery.Code, []string) {
			switch {
			case expected == 0:
				return orrery.CodeValidation, nil
			case !g.exists:
				return orrery.CodeNotFound, nil
			case expected != g.revision || g.phase != orreryv1.SagaPhase_SAGA_PHASE_WAITING:
				return orrery.CodeRevisionConflict, nil
			case g.deadline == 0 || g.deadline > m.now:
				return orrery.CodeValidation, nil
			}
			id := saga.TimeoutMessageID(gid, g.revision)
			g.revision++
			g.phase = orreryv1.SagaPhase_SAGA_PHASE_TIMED_OUT
			g.timeoutsEnqueued++
			return 0, []string{id}
		}}
	case 10: // delete
		expected := rev(s.revision)
		mut := &orreryv1.Mutation{Kind: &orreryv1.Mutation_DeleteSchedule{DeleteSchedule: &orreryv1.DeleteSchedule{Lane: slane, ScheduleId: sid, ExpectedRevision: expected}}}
		return step{mut, func(m *model) (orrery.Code, []string) {
			switch {
			case !s.exists:
				return orrery.CodeNotFound, nil
			case expected != s.revision:
				return orrery.CodeRevisionConflict, nil
			}
			*s = modelSchedule{deleted: true}
			return 0, nil
		}}
	default: // trigger
		mut := &orreryv1.Mutation{Kind: &orreryv1.Mutation_TriggerSchedule{TriggerSchedule: &orreryv1.TriggerSchedule{Lane: slane, ScheduleId: sid}}}
		return step{mut, func(m *model) (orrery.Code, []string) {
			switch {
			case !s.exists:
				return orrery.CodeNotFound, nil
			case s.paused || s.cancelled:
				return orrery.CodeSuspended, nil
			}
			id := schedule.ManualID(sid, s.generation, m.now)
			if m.ids[id] {
				return 0, nil // a second trigger at the same logged time is a no-op
			}
			return 0, []string{id}
		}}
	}
}

// enqueuedIDs extracts what a result says it enqueued.
func enqueuedIDs(r *orreryv1.MutationResult) []string {
	if id := r.GetSaga().GetTimeoutMessageId(); id != "" {
		return []string{id}
	}
	return r.GetSchedule().GetEnqueuedIds()
}

// TestModel drives random batches and time advances through ApplyBatch against the reference
// model. Invariants: every outcome code and enqueued id matches the model; no message id is
// enqueued twice; below each schedule's watermark every ordinal was emitted or passed over by
// a resume (no gap); at most one timeout message per saga; every earlier command id replays
// its byte-identical receipt without writing; every list, page by page, is exactly the records
// its filter names (checkListing).
func TestModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := granted(t)
		m := &model{now: t0, ids: map[string]bool{}}
		for range modelScheduleIDs {
			m.schedules = append(m.schedules, &modelSchedule{})
		}
		for range modelSagaIDs {
			m.sagas = append(m.sagas, &modelSaga{})
		}
		type sent struct {
			batch   *orreryv1.Batch
			receipt []byte
		}
		var history []sent
		for i := range rapid.IntRange(1, 60).Draw(t, "commands") {
			if rapid.IntRange(0, 3).Draw(t, "advance") == 0 {
				m.now += rapid.Int64Range(1, 40*60).Draw(t, "advanceSeconds") * input.Second
			}
			if len(history) > 0 && rapid.IntRange(0, 5).Draw(t, "replay") == 0 {
				old := history[rapid.IntRange(0, len(history)-1).Draw(t, "which")]
				before := v.Clone()
				out, err := applier().ApplyBatch(v, sender(old.batch), old.batch, m.now)
				if err != nil || !out.Replayed || !bytes.Equal(out.ReceiptBytes, old.receipt) || !v.Equal(before) {
					t.Fatalf("replay of %s: err=%v replayed=%v identical=%v", old.batch.GetCommandId(), err, out != nil && out.Replayed, out != nil && bytes.Equal(out.ReceiptBytes, old.receipt))
				}
				continue
			}
			var steps []step
			b := &orreryv1.Batch{CommandId: fmt.Sprintf("cmd-%d", i)}
			for range rapid.IntRange(1, 3).Draw(t, "mutations") {
				st := genStep(t, m)
				steps = append(steps, st)
				b.Mutations = append(b.Mutations, st.mutation)
			}
			out, err := applier().ApplyBatch(v, sender(b), b, m.now)
			if err != nil {
				t.Fatalf("apply %s: %v", b.GetCommandId(), err)
			}
			if out.Receipt.GetError() != nil {
				t.Fatalf("batch %s rolled back: %v", b.GetCommandId(), out.Receipt.GetError())
			}
			for j, st := range steps {
				// Mutations of one batch see each other's effects: predict in order.
				code, ids := st.predict(m)
				r := out.Receipt.GetResults()[j]
				if got := r.GetError().GetCode(); got != code {
					t.Fatalf("%s mutation %d (%T): code %v, model %v (%v)", b.GetCommandId(), j, st.mutation.GetKind(), got, code, r.GetError())
				}
				got := enqueuedIDs(r)
				if fmt.Sprint(got) != fmt.Sprint(ids) {
					t.Fatalf("%s mutation %d: enqueued %v, model %v", b.GetCommandId(), j, got, ids)
				}
				for _, id := range got {
					if m.ids[id] {
						t.Fatalf("message id %s enqueued twice", id)
					}
					m.ids[id] = true
				}
			}
			history = append(history, sent{b, out.ReceiptBytes})
			checkInvariants(t, v, m)
			checkListing(t, v)
		}
	})
}

func checkInvariants(t *rapid.T, v kv.Reader, m *model) {
	for i, s := range m.schedules {
		if !s.exists {
			continue
		}
		rec, found, err := schedule.Load(v, modelLanes[i], modelScheduleIDs[i])
		if err != nil || !found {
			t.Fatalf("schedule %d: found=%v err=%v", i, found, err)
		}
		if rec.GetNextOrdinal() != s.nextOrdinal || rec.GetRevision() != s.revision || rec.GetGeneration() != s.generation {
			t.Fatalf("schedule %d: record %v, model rev %d gen %d ordinal %d", i, rec, s.revision, s.generation, s.nextOrdinal)
		}
		for o := range s.nextOrdinal {
			if !s.emitted[o] && !s.skipped[o] {
				t.Fatalf("schedule %d: ordinal %d below watermark %d was neither emitted nor skipped", i, o, s.nextOrdinal)
			}
		}
	}
	for i, g := range m.sagas {
		if g.timeoutsEnqueued > 1 {
			t.Fatalf("saga %d: %d timeout messages", i, g.timeoutsEnqueued)
		}
		if !g.exists {
			continue
		}
		rec, _, err := saga.Load(v, modelLanes[i], modelSagaIDs[i])
		if err != nil || rec.GetRevision() != g.revision || rec.GetPhase() != g.phase {
			t.Fatalf("saga %d: record %v err %v, model rev %d phase %v", i, rec, err, g.revision, g.phase)
		}
	}
}
