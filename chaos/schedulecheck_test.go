package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
)

// Schedule ids of scheduleFixture.
const (
	scheduleEmitting = "00000000-0000-4000-8000-0000000000e1" // emits between the client's calls; two pauses raced; cancelled twice
	scheduleUnknown  = "00000000-0000-4000-8000-0000000000e2" // a pause of unknown outcome that applied, found by a conflict
	scheduleLate     = "00000000-0000-4000-8000-0000000000e3" // a create of unknown outcome that never applied, created again
)

// scheduleFixture is a hand-made clean schedule CAS history of three schedules (see their
// ids), with reads that find the revision grown by emits no client saw, and unknown outcomes.
type scheduleFixture struct {
	zero time.Time
	h    history
}

// at is ms milliseconds after the fixture's zero.
func (f *scheduleFixture) at(ms int) time.Time {
	return f.zero.Add(time.Duration(ms) * time.Millisecond)
}

// op is a schedule call: its interval in ms (the return ignored for an unknown outcome), its
// outcome and resulting revision.
func (f *scheduleFixture) op(id string, kind scheduleOpKind, expected uint64, callMS, returnMS int, out outcome, revision uint64) scheduleOp {
	op := scheduleOp{scheduleID: id, key: "k-" + id, kind: kind, expected: expected, call: f.at(callMS), returned: f.at(returnMS),
		outcome: out, revision: revision}
	if out == outcomeUnknown {
		op.returned = time.Time{}
	}
	return op
}

// failed is a schedule call the partition refused with code.
func (f *scheduleFixture) failed(id string, kind scheduleOpKind, expected uint64, callMS, returnMS int, code orrery.Code) scheduleOp {
	op := f.op(id, kind, expected, callMS, returnMS, outcomeFailed, 0)
	op.code = code
	return op
}

// read is an ok read of revision.
func (f *scheduleFixture) read(id string, callMS, returnMS int, revision uint64) scheduleOp {
	return f.op(id, scheduleRead, 0, callMS, returnMS, outcomeOK, revision)
}

func newScheduleFixture() *scheduleFixture {
	f := &scheduleFixture{zero: time.Unix(1_700_000_000, 0)}
	f.h.scheduleOps = []scheduleOp{
		f.op(scheduleEmitting, scheduleCreate, 0, 0, 10, outcomeOK, 1),
		f.read(scheduleEmitting, 100, 110, 3), // two emits since the create
		f.op(scheduleEmitting, schedulePause, 3, 120, 140, outcomeOK, 4),
		f.failed(scheduleEmitting, schedulePause, 3, 121, 150, orrery.CodeRevisionConflict), // raced the pause from 3, lost
		f.read(scheduleEmitting, 200, 210, 4),
		f.failed(scheduleEmitting, schedulePause, 4, 220, 230, orrery.CodeSuspended), // paused already, at 4
		f.op(scheduleEmitting, scheduleResume, 4, 300, 320, outcomeOK, 5),
		f.read(scheduleEmitting, 1000, 1010, 7), // two more emits
		f.op(scheduleEmitting, scheduleCancel, 7, 1020, 1040, outcomeOK, 8),
		f.op(scheduleEmitting, scheduleCancel, 8, 1100, 1110, outcomeOK, 8), // cancelling a cancelled schedule changes nothing
		f.read(scheduleEmitting, 1200, 1210, 8),
		f.op(scheduleEmitting, scheduleRead, 0, 1300, 0, outcomeUnknown, 0), // an unknown read, left out

		f.op(scheduleUnknown, scheduleCreate, 0, 5, 15, outcomeOK, 1),
		f.read(scheduleUnknown, 40, 45, 2),
		f.op(scheduleUnknown, schedulePause, 2, 50, 0, outcomeUnknown, 0), // applied at about 60 ms: 2 → 3
		f.failed(scheduleUnknown, schedulePause, 2, 3000, 3010, orrery.CodeRevisionConflict),
		f.read(scheduleUnknown, 3100, 3110, 3),
		f.failed(scheduleUnknown, schedulePause, 3, 3200, 3210, orrery.CodeSuspended),
		f.op(scheduleUnknown, scheduleResume, 3, 3300, 3320, outcomeOK, 4),
		f.op(scheduleUnknown, scheduleCancel, 9, 3400, 0, outcomeUnknown, 0), // a revision it may never reach: never applied
		f.read(scheduleUnknown, 3500, 3510, 4),

		f.op(scheduleLate, scheduleCreate, 0, 0, 0, outcomeUnknown, 0), // never applied
		f.failed(scheduleLate, scheduleRead, 0, 500, 510, orrery.CodeNotFound),
		f.failed(scheduleLate, schedulePause, 1, 520, 530, orrery.CodeNotFound),
		f.op(scheduleLate, scheduleCreate, 0, 600, 620, outcomeOK, 1),
		f.failed(scheduleLate, scheduleCreate, 0, 700, 710, orrery.CodeRevisionConflict),
		f.read(scheduleLate, 800, 810, 1),
		f.failed(scheduleLate, scheduleCancel, 1, 820, 830, orrery.CodeUnavailable), // refused before the revision was looked at
	}
	return f
}

// TestCheckSchedulesLinearizablePassesACleanHistory: a history whose reads find revisions
// grown by emits no client saw, with raced pauses, refusals at the expected revision, a
// cancel of a cancelled schedule, and unknown outcomes (one applied, found by a later
// conflict; two never applied) is linearizable.
func TestCheckSchedulesLinearizablePassesACleanHistory(t *testing.T) {
	f := newScheduleFixture()
	v := checkSchedulesLinearizable(f.h, 10*time.Second)
	if !v.linearizable() {
		t.Errorf("checkSchedulesLinearizable: illegal %q, undecided %q", v.illegal, v.undecided)
	}
	if v.histories != 3 || v.operations != len(f.h.scheduleOps)-1 { // the unknown read says nothing
		t.Errorf("checkSchedulesLinearizable checked %d schedules, %d operations; want 3 and %d", v.histories, v.operations, len(f.h.scheduleOps)-1)
	}
}

// TestCheckSchedulesLinearizableFindsEachViolation: a stale read after a newer revision
// returned, two compare-and-sets from one revision both won, a conflict while the revision was
// the expected one, a compare-and-set that skipped a revision, a refusal at a revision the
// schedule had left, and a schedule not found after its create returned are each not
// linearizable, and only the schedule concerned is named.
func TestCheckSchedulesLinearizableFindsEachViolation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		schedule string
		change   func(f *scheduleFixture)
	}{
		{"a read after the cancel returned 8 sees revision 3", scheduleEmitting, func(f *scheduleFixture) {
			f.h.scheduleOps = append(f.h.scheduleOps, f.read(scheduleEmitting, 1050, 1060, 3))
		}},
		{"two pauses from revision 3 both won", scheduleEmitting, func(f *scheduleFixture) {
			f.h.scheduleOps[3] = f.op(scheduleEmitting, schedulePause, 3, 121, 150, outcomeOK, 4)
		}},
		{"a cancel from 8 conflicted between two calls that found it at 8", scheduleEmitting, func(f *scheduleFixture) {
			f.h.scheduleOps = append(f.h.scheduleOps, f.failed(scheduleEmitting, scheduleCancel, 8, 1050, 1060, orrery.CodeRevisionConflict))
		}},
		{"a resume from 3 returned revision 5", scheduleUnknown, func(f *scheduleFixture) {
			f.h.scheduleOps[18] = f.op(scheduleUnknown, scheduleResume, 3, 3300, 3320, outcomeOK, 5)
			f.h.scheduleOps[20] = f.read(scheduleUnknown, 3500, 3510, 5) // so that only the skipped revision is wrong
		}},
		{"a pause refused as paused already at the revision the resume had left", scheduleUnknown, func(f *scheduleFixture) {
			f.h.scheduleOps = append(f.h.scheduleOps, f.failed(scheduleUnknown, schedulePause, 3, 3330, 3340, orrery.CodeSuspended))
		}},
		{"not found after its create returned", scheduleLate, func(f *scheduleFixture) {
			f.h.scheduleOps = append(f.h.scheduleOps, f.failed(scheduleLate, scheduleRead, 0, 900, 910, orrery.CodeNotFound))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newScheduleFixture()
			tc.change(f)
			v := checkSchedulesLinearizable(f.h, 10*time.Second)
			if v.linearizable() || len(v.illegal) != 1 || !strings.HasPrefix(v.illegal[0], "schedule "+tc.schedule) {
				t.Errorf("illegal %q, undecided %q; want schedule %s alone illegal", v.illegal, v.undecided, tc.schedule)
			}
		})
	}
}

// TestCheckLinearizabilityCoversSagasAndSchedules: the run's verdict (linearizable= in the
// CHAOS RESULT line) covers the saga and the schedule histories, and the report says which
// histories were checked and their sizes; a schedule history alone not linearizable makes it
// false and is a violation.
func TestCheckLinearizabilityCoversSagasAndSchedules(t *testing.T) {
	h := newSagaFixture().h
	h.scheduleOps = newScheduleFixture().h.scheduleOps
	r := &Report{}
	checkLinearizability(r, h)
	want := []HistoriesChecked{{Kind: "saga", Histories: 4, Operations: 18}, {Kind: "schedule", Histories: 3, Operations: len(h.scheduleOps) - 1}}
	if !slices.Equal(r.Linearizability, want) {
		t.Errorf("Linearizability = %+v; want %+v", r.Linearizability, want)
	}
	if len(r.Violations) != 0 || r.Counts.Linearizable == nil || !*r.Counts.Linearizable || !strings.Contains(r.ResultLine(), " linearizable=true ") {
		t.Errorf("clean histories: violations %q, result %s", r.Violations, r.ResultLine())
	}
	if r.Counts.ScheduleOps != len(h.scheduleOps) || r.Counts.ScheduleUnknown != 4 {
		t.Errorf("schedule_ops %d, schedule_unknown_outcomes %d; want %d and 4", r.Counts.ScheduleOps, r.Counts.ScheduleUnknown, len(h.scheduleOps))
	}

	f := newScheduleFixture()
	f.h.scheduleOps[3] = f.op(scheduleEmitting, schedulePause, 3, 121, 150, outcomeOK, 4) // two wins from revision 3
	h.scheduleOps = f.h.scheduleOps
	r = &Report{}
	checkLinearizability(r, h)
	if len(r.Violations) != 1 || !strings.HasPrefix(r.Violations[0], "schedule "+scheduleEmitting) || !strings.Contains(r.ResultLine(), " linearizable=false ") {
		t.Errorf("a double win: violations %q, result %s; want the schedule named and linearizable=false", r.Violations, r.ResultLine())
	}
	if r.Linearizability[1].Illegal != 1 || r.Linearizability[0].Illegal != 0 {
		t.Errorf("Linearizability = %+v; want the schedule history alone illegal", r.Linearizability)
	}
}
