package schedule

import (
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// TestRefusalsNameTheStateThatRefuses: an action the schedule's state refuses is Suspended
// (the closed code set has no other), and its field names the record's state field that
// refuses it (paused, cancelled, suspended), so a caller tells a paused schedule from a
// cancelled one by code and field, never by text; the message says the state and what to do.
// It writes nothing.
func TestRefusalsNameTheStateThatRefuses(t *testing.T) {
	lim := input.DefaultLimits()
	paused := func(t *testing.T, v kv.View) { pause(t, v, t0+sec) }
	cancelled := func(t *testing.T, v kv.View) {
		if _, err := ApplyCancel(v, lim, &orreryv1.CancelSchedule{Lane: lane, ScheduleId: scheduleID, AnyRevision: true}); err != nil {
			t.Fatal(err)
		}
	}
	suspended := func(t *testing.T, v kv.View) {
		if res := mustEmit(t, v, 1, t0+10*hour); res.GetSuspendedReason() == "" {
			t.Fatalf("an emit 10 h late with a 1 min anomaly window did not suspend: %v", res)
		}
	}
	doTrigger := func(v kv.View) error { _, err := trigger(v, t0+hour+2*sec); return err }
	doPause := func(v kv.View) error {
		_, err := ApplyPause(v, lim, &orreryv1.PauseSchedule{Lane: lane, ScheduleId: scheduleID, AnyRevision: true}, t0+2*sec)
		return err
	}
	doResume := func(v kv.View) error {
		_, err := ApplyResume(v, lim, &orreryv1.ResumeSchedule{Lane: lane, ScheduleId: scheduleID, AnyRevision: true}, t0+2*sec)
		return err
	}
	cases := []struct {
		name   string
		state  func(*testing.T, kv.View)
		action func(kv.View) error
		field  string
		says   []string
	}{
		{"trigger paused", paused, doTrigger, "paused", []string{"cannot trigger schedule " + scheduleID, "it is paused", "resume it first"}},
		{"trigger cancelled", cancelled, doTrigger, "cancelled", []string{"cannot trigger", "it is cancelled", "configure it again"}},
		{"trigger suspended", suspended, doTrigger, "suspended", []string{"cannot trigger", "it is suspended (clock anomaly", "only a new definition releases it"}},
		{"pause paused", paused, doPause, "paused", []string{"cannot pause", "it is paused already"}},
		{"pause cancelled", cancelled, doPause, "cancelled", []string{"cannot pause", "it is cancelled"}},
		{"resume cancelled", cancelled, doResume, "cancelled", []string{"cannot resume", "it is cancelled"}},
		{"resume running", func(*testing.T, kv.View) {}, doResume, "schedule_id", []string{"cannot resume", "it is not paused"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := kv.NewMemory()
			def := definition(every(t0, minute))
			def.AnomalyWindowMicros = minute
			configure(t, v, def, 0, t0)
			c.state(t, v)
			before := v.Clone()
			err := c.action(v)
			wantCode(t, err, orrery.ErrSuspended, c.field)
			for _, s := range c.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%v does not say %q", err, s)
				}
			}
			if !v.Equal(before) {
				t.Fatal("a refused action wrote")
			}
		})
	}
}
