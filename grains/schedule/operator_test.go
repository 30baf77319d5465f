package schedule

import (
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// operatorAction applies one of the four operator actions that take a revision form.
type operatorAction struct {
	name  string
	apply func(v kv.View, expected uint64, anyRevision bool, now int64) (*orreryv1.ScheduleResult, error)
}

func operatorActions() []operatorAction {
	lim := input.DefaultLimits()
	return []operatorAction{
		{"pause", func(v kv.View, expected uint64, anyRevision bool, now int64) (*orreryv1.ScheduleResult, error) {
			return ApplyPause(v, lim, &orreryv1.PauseSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: expected, AnyRevision: anyRevision}, now)
		}},
		{"resume", func(v kv.View, expected uint64, anyRevision bool, now int64) (*orreryv1.ScheduleResult, error) {
			return ApplyResume(v, lim, &orreryv1.ResumeSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: expected, AnyRevision: anyRevision}, now)
		}},
		{"cancel", func(v kv.View, expected uint64, anyRevision bool, now int64) (*orreryv1.ScheduleResult, error) {
			return ApplyCancel(v, lim, &orreryv1.CancelSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: expected, AnyRevision: anyRevision})
		}},
		{"delete", func(v kv.View, expected uint64, anyRevision bool, now int64) (*orreryv1.ScheduleResult, error) {
			return ApplyDelete(v, &orreryv1.DeleteSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: expected, AnyRevision: anyRevision}, now, Newest)
		}},
	}
}

// TestOperatorActionsAnyRevision: an emit between an operator's two actions bumps the
// revision, so an action with the revision the previous one returned conflicts; the
// any-revision form of pause, resume, cancel and delete applies whatever the revision is,
// while the CAS form still conflicts and writes nothing.
func TestOperatorActionsAnyRevision(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(every(t0, minute)), 0, t0)
	a := operatorActions()
	pauseA, resumeA, cancelA, deleteA := a[0], a[1], a[2], a[3]
	seen := mustEmit(t, v, 1, t0).GetRevision() // what the operator read
	mustEmit(t, v, 1, t0+minute)                // an occurrence fires in between

	paused := casThenAny(t, v, pauseA, seen, t0+minute+sec)
	if !mustLoad(t, v).GetPaused() {
		t.Fatal("pause with any_revision did not pause")
	}
	// Resume with a revision older than the pause's.
	resumed := casThenAny(t, v, resumeA, paused.GetRevision()-1, t0+minute+2*sec)
	if mustLoad(t, v).GetPaused() {
		t.Fatal("resume with any_revision did not resume")
	}
	mustEmit(t, v, 1, t0+2*minute) // fires again
	cancelled := casThenAny(t, v, cancelA, resumed.GetRevision(), t0+2*minute+sec)
	if !mustLoad(t, v).GetCancelled() {
		t.Fatal("cancel with any_revision did not cancel")
	}
	casThenAny(t, v, deleteA, cancelled.GetRevision()-1, t0+2*minute+2*sec)
	if _, found, _ := Load(v, lane, scheduleID); found {
		t.Fatal("delete with any_revision left the schedule")
	}
}

// casThenAny applies an action with a stale expected revision, which must conflict and write
// nothing, then with any_revision, which must succeed.
func casThenAny(t *testing.T, v *kv.Memory, a operatorAction, stale uint64, now int64) *orreryv1.ScheduleResult {
	t.Helper()
	before := v.Clone()
	_, err := a.apply(v, stale, false, now)
	wantCode(t, err, orrery.ErrRevisionConflict, "expected_revision")
	if !v.Equal(before) {
		t.Fatalf("%s: a conflicting CAS wrote", a.name)
	}
	res, err := a.apply(v, 0, true, now)
	if err != nil {
		t.Fatalf("%s with any_revision: %v", a.name, err)
	}
	return res
}

// TestAnyRevisionWithExpectedRevisionIsValidation: both forms at once is a Validation error
// naming expected_revision, for every operator action, and writes nothing.
func TestAnyRevisionWithExpectedRevisionIsValidation(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(every(t0, minute)), 0, t0)
	current := mustLoad(t, v).GetRevision()
	for _, a := range operatorActions() {
		before := v.Clone()
		_, err := a.apply(v, current, true, t0)
		wantCode(t, err, orrery.ErrValidation, "expected_revision")
		if !v.Equal(before) {
			t.Fatalf("%s: a refused action wrote", a.name)
		}
	}
}

// TestPauseAndResumeRefuseTheirNoOps: pausing a paused schedule and resuming one that is not
// paused (or is cancelled) are refused alike — Suspended, naming the state field that refuses
// them (schedule_id for a schedule that is not paused) — and write nothing.
func TestPauseAndResumeRefuseTheirNoOps(t *testing.T) {
	lim := input.DefaultLimits()
	v := kv.NewMemory()
	configure(t, v, definition(every(t0, minute)), 0, t0)
	refusedResume := func(now int64, field string) {
		t.Helper()
		before := v.Clone()
		_, err := ApplyResume(v, lim, &orreryv1.ResumeSchedule{Lane: lane, ScheduleId: scheduleID, AnyRevision: true}, now)
		wantCode(t, err, orrery.ErrSuspended, field)
		if !v.Equal(before) {
			t.Fatal("a refused resume wrote")
		}
	}
	refusedResume(t0, "schedule_id") // running
	pause(t, v, t0+sec)
	before := v.Clone()
	_, err := ApplyPause(v, lim, &orreryv1.PauseSchedule{Lane: lane, ScheduleId: scheduleID, AnyRevision: true}, t0+2*sec)
	wantCode(t, err, orrery.ErrSuspended, "paused")
	if !v.Equal(before) {
		t.Fatal("a refused pause wrote")
	}
	if _, err := ApplyCancel(v, lim, &orreryv1.CancelSchedule{Lane: lane, ScheduleId: scheduleID, AnyRevision: true}); err != nil {
		t.Fatal(err)
	}
	refusedResume(t0+3*sec, "cancelled") // paused and cancelled
}
