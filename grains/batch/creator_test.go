package batch

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
	"github.com/orreryhq/orrery/grains/saga"
	"github.com/orreryhq/orrery/grains/schedule"
)

// creatorWorld drives the seed's creator-authority scenario on one view: alice creates, bob is
// another authorized caller, the coordinator sends the internal commands.
type creatorWorld struct {
	t   *testing.T
	v   *kv.Memory
	seq int
}

func (w *creatorWorld) apply(principal string, now int64, m *orreryv1.Mutation) (*orreryv1.MutationResult, error) {
	w.t.Helper()
	w.seq++
	out, err := applier().ApplyBatch(w.v, principal, &orreryv1.Batch{CommandId: fmt.Sprint("c", w.seq), Mutations: []*orreryv1.Mutation{m}}, now)
	if err != nil {
		w.t.Fatal(err)
	}
	r := out.Receipt.GetResults()[0]
	return r, resultErr(r)
}

func (w *creatorWorld) ok(principal string, now int64, m *orreryv1.Mutation) *orreryv1.MutationResult {
	w.t.Helper()
	r, err := w.apply(principal, now, m)
	if err != nil {
		w.t.Fatalf("%s %s: %v", principal, kindName(m), err)
	}
	return r
}

// denied applies m and requires Unauthorized naming subject, with the state unchanged.
func (w *creatorWorld) denied(principal string, now int64, m *orreryv1.Mutation, subject string) {
	w.t.Helper()
	before, audited := state(w.t, w.v), len(auditTrail(w.t, w.v))
	_, err := w.apply(principal, now, m)
	if !errors.Is(err, orrery.ErrUnauthorized) || !strings.Contains(err.Error(), subject) {
		w.t.Fatalf("%s %s: %v, want Unauthorized naming %s", principal, kindName(m), err, subject)
	}
	if strings.Contains(err.Error(), `"alice"`) && principal != "alice" {
		w.t.Fatalf("the denial %q names the creator", err)
	}
	if state(w.t, w.v) != before {
		w.t.Fatalf("a denied %s changed the state", kindName(m))
	}
	requireDenialAudited(w.t, w.v, audited, principal, fmt.Sprint("c", w.seq), now, kindName(m), err)
}

func (w *creatorWorld) schedule(id string) *orreryv1.ScheduleRecord {
	w.t.Helper()
	rec, found, err := schedule.Load(w.v, lane, id)
	if err != nil || !found {
		w.t.Fatalf("schedule %s: %v %v", id, found, err)
	}
	return rec
}

func (w *creatorWorld) messages(l *orreryv1.Lane) []string {
	w.t.Helper()
	msgs, _, err := queue.ListLane(w.v, l, "", 100, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.GetId())
	}
	return ids
}

// TestRevokedCreatorEmitsNothingUntilRestored is seed 000's creator-authority scenario: alice
// creates future work (a recurring schedule, a second schedule, a saga with a timeout); her
// grant is revoked before the due instant. After it, the coordinator's emit and expiry are
// denied and leave the records, the due index and the lanes exactly as they were; bob, holding
// every capability in the namespace, cannot replace her schedule or update her saga (same
// revision, same bytes), nor can he once his own grant is revoked, nor after it is restored
// while hers is not. Restored, the transition succeeds once; emission resumes with one
// occurrence per due instant, the ones that fell due while she was revoked included: no gap
// and no duplicate.
func TestRevokedCreatorEmitsNothingUntilRestored(t *testing.T) {
	w := &creatorWorld{t: t, v: kv.NewMemory()}
	ns := lane.GetNamespace()
	scheduler := &orreryv1.GrantRule{Namespace: ns, Capabilities: uint64(grants.SchedulerManage | grants.SagaManage | grants.QueuePublish | grants.QueueConsume)}
	putGrant(t, w.v, "alice", scheduler)
	putGrant(t, w.v, "bob", scheduler)
	const coordinator = "system:coordinator"
	first := t0 + hour

	recurring := configureMutation(everySpec(first, hour), 0) // scheduleID: emission only
	w.ok("alice", t0, recurring)
	replaced := configureMutation(everySpec(first, hour), 0) // newSchedID: bob replaces it
	replaced.GetConfigureSchedule().Definition.ScheduleId = newSchedID
	w.ok("alice", t0, replaced)
	w.ok("alice", t0, mutationOf(sagaMutation(sagaID, 0, first)))

	putGrant(t, w.v, "alice") // revoked before the due instant
	due1 := first + sec
	before := w.schedule(scheduleID)
	w.denied(coordinator, due1, emitMutation(1), "the creator of the schedule")
	w.denied(coordinator, due1, mutationOf(&orreryv1.ExpireSaga{Lane: lane, SagaId: sagaID, ExpectedRevision: 1}), "the creator of the saga")
	if got := w.messages(lane); len(got) != 0 {
		t.Fatalf("a revoked creator's schedule enqueued %v", got)
	}
	if got := w.messages(&orreryv1.Lane{Namespace: ns, Queue: timeoutQueue, Key: lane.GetKey()}); len(got) != 0 {
		t.Fatalf("a revoked creator's saga enqueued %v", got)
	}
	if scan, err := due.ScanDue(w.v, due1, due.Budget{MaxRefs: 100}); err != nil || len(scan.Refs) != 3 {
		t.Fatalf("due refs after the denials: %v %v, want the three records still due", scan, err)
	}

	replacement := configureMutation(everySpec(first+30*60*sec, hour), 1)
	replacement.GetConfigureSchedule().Definition.ScheduleId = newSchedID
	sagaUpdate := mutationOf(sagaMutation(sagaID, 1, first+3*hour))
	sagaBefore, _, _ := saga.Load(w.v, lane, sagaID)
	w.denied("bob", due1, replacement, "the creator of the schedule")
	w.denied("bob", due1, sagaUpdate, "the creator of the saga")
	putGrant(t, w.v, "bob")
	w.denied("bob", due1, replacement, `caller "bob"`)
	w.denied("bob", due1, sagaUpdate, `caller "bob"`)
	putGrant(t, w.v, "bob", scheduler) // the caller restored, the creator still revoked
	w.denied("bob", due1, replacement, "the creator of the schedule")
	w.denied("bob", due1, sagaUpdate, "the creator of the saga")
	if rec := w.schedule(newSchedID); rec.GetRevision() != 1 || rec.GetGeneration() != 1 {
		t.Fatalf("denied replacements moved the schedule to revision %d generation %d", rec.GetRevision(), rec.GetGeneration())
	}
	if sagaAfter, _, _ := saga.Load(w.v, lane, sagaID); sagaAfter.GetRevision() != 1 || sagaAfter.GetStateJson() != sagaBefore.GetStateJson() {
		t.Fatalf("denied updates moved the saga to %v", sagaAfter)
	}

	due2 := first + hour + sec // a second instant falls due while she is revoked
	w.denied(coordinator, due2, emitMutation(1), "the creator of the schedule")
	if after := w.schedule(scheduleID); after.GetRevision() != before.GetRevision() || after.GetNextOrdinal() != 0 {
		t.Fatalf("a denied emit moved the schedule to revision %d ordinal %d", after.GetRevision(), after.GetNextOrdinal())
	}

	putGrant(t, w.v, "alice", scheduler) // restored
	if r := w.ok("bob", due2, replacement).GetSchedule(); r.GetRevision() != 2 || r.GetGeneration() != 2 {
		t.Fatalf("the replacement once restored: %v", r)
	}
	if _, err := w.apply("bob", due2, replacement); !errors.Is(err, orrery.ErrRevisionConflict) {
		t.Fatalf("the same replacement again: %v, want RevisionConflict (it succeeds once)", err)
	}
	if r := w.ok("bob", due2, sagaUpdate).GetSaga(); r.GetRevision() != 2 {
		t.Fatalf("the saga update once restored: %v", r)
	}
	if rec, _, _ := saga.Load(w.v, lane, sagaID); rec.GetCreator() != "alice" {
		t.Fatalf("the saga's creator became %q", rec.GetCreator())
	}

	// The ordinals that fell due while she was revoked are emitted now, once each; then one
	// occurrence per due instant.
	emitted := w.ok(coordinator, due2, emitMutation(1)).GetSchedule().GetEnqueuedIds()
	if len(emitted) != 2 {
		t.Fatalf("emit once restored enqueued %v, want the occurrences of ordinals 0 and 1", emitted)
	}
	if again := w.ok(coordinator, due2+1, emitMutation(1)).GetSchedule().GetEnqueuedIds(); len(again) != 0 {
		t.Fatalf("a second emit at the same instant enqueued %v", again)
	}
	for k := int64(2); k < 5; k++ {
		at := first + k*hour
		if early := w.ok(coordinator, at-sec, emitMutation(1)).GetSchedule().GetEnqueuedIds(); len(early) != 0 {
			t.Fatalf("before instant %d: %v", k, early)
		}
		ids := w.ok(coordinator, at, emitMutation(1)).GetSchedule().GetEnqueuedIds()
		if len(ids) != 1 || ids[0] != schedule.OccurrenceID(scheduleID, 1, uint64(k)) {
			t.Fatalf("at instant %d: %v, want ordinal %d's occurrence", k, ids, k)
		}
		emitted = append(emitted, ids...)
	}
	want := []string{}
	for k := range uint64(5) {
		want = append(want, schedule.OccurrenceID(scheduleID, 1, k))
	}
	if fmt.Sprint(emitted) != fmt.Sprint(want) {
		t.Fatalf("emitted %v, want %v", emitted, want)
	}
}
