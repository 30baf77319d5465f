package saga

import (
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// TestTransitionTable checks the table against docs/design.md §4 over every operation and every pair of
// phases, including the absent saga and a phase number this code does not know.
func TestTransitionTable(t *testing.T) {
	t.Parallel()
	phases := []orreryv1.SagaPhase{absent, waiting, completed, cancelled, timedOut, 99}
	type edge struct {
		op       operation
		from, to orreryv1.SagaPhase
	}
	want := map[edge]bool{
		{opCreate, absent, waiting}:      true,
		{opExchange, waiting, waiting}:   true,
		{opExchange, waiting, completed}: true,
		{opExchange, waiting, cancelled}: true,
		{opExpire, waiting, timedOut}:    true,
	}
	for _, op := range []operation{opCreate, opExchange, opExpire} {
		for _, from := range phases {
			for _, to := range phases {
				e := edge{op, from, to}
				err := checkTransition(op, from, to)
				if got := err == nil; got != want[e] {
					t.Errorf("%v %s → %s: allowed %v, want %v", op, phaseName(from), phaseName(to), got, want[e])
					continue
				}
				if err == nil {
					continue
				}
				var code orrery.Code
				field := ""
				switch {
				case terminal(from):
					code, field = orrery.CodeRevisionConflict, "expected_revision"
				case op != opCreate && !known(from):
					code = orrery.CodeInternal
				default:
					code, field = orrery.CodeValidation, "phase"
				}
				wantError(t, err, code, field)
			}
		}
	}
}

func TestPhaseClasses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		phase           orreryv1.SagaPhase
		known, terminal bool
		name            string
	}{
		{absent, false, false, "ABSENT"},
		{waiting, true, false, "WAITING"},
		{completed, true, true, "COMPLETED"},
		{cancelled, true, true, "CANCELLED"},
		{timedOut, true, true, "TIMED_OUT"},
		{99, false, false, "99"},
	} {
		if known(tc.phase) != tc.known || terminal(tc.phase) != tc.terminal || phaseName(tc.phase) != tc.name {
			t.Errorf("%v: known %v terminal %v name %q, want %v %v %q", tc.phase,
				known(tc.phase), terminal(tc.phase), phaseName(tc.phase), tc.known, tc.terminal, tc.name)
		}
	}
}
