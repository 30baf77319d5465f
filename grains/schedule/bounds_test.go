package schedule

import (
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// TestMaxOccurrencesEndsTheSeries: an Every schedule bounded to 3 occurrences fires ordinals
// 0..2 and no more however long it runs, is COMPLETED with the reason, records the withheld
// fourth instant as ENDED once, and describes no next fire time.
func TestMaxOccurrencesEndsTheSeries(t *testing.T) {
	v := kv.NewMemory()
	def := definition(every(t0+hour, hour))
	def.MaxOccurrences = 3
	configure(t, v, def, 0, t0)
	if insp, err := Inspect(v, lane, scheduleID, t0); err != nil || len(insp.GetNextFireTimesUnixMicros()) != 3 {
		t.Fatalf("next fire times %v (%v), want the 3 the bound allows", insp.GetNextFireTimesUnixMicros(), err)
	}
	ids := drain(t, v, 1, t0+10*hour)
	if len(ids) != 3 {
		t.Fatalf("enqueued %v, want ordinals 0..2", ids)
	}
	ids = append(ids, drain(t, v, 1, t0+20*hour)...)
	if len(ids) != 3 {
		t.Fatalf("enqueued %d after more time, want still 3", len(ids))
	}
	rec := mustLoad(t, v)
	if StateOf(rec) != orreryv1.ScheduleState_SCHEDULE_STATE_COMPLETED || !strings.Contains(rec.GetSeriesEndReason(), "max_occurrences 3") ||
		rec.GetSeriesEndWithheldUnixMicros() != t0+4*hour || rec.GetNextDueAtUnixMicros() != 0 {
		t.Fatalf("record %v", rec)
	}
	outcomes := outcomesOf(t, v, 1)
	if outcomes[3] != orreryv1.LedgerOutcome_LEDGER_OUTCOME_ENDED || countOutcomes(t, v, 1)[orreryv1.LedgerOutcome_LEDGER_OUTCOME_ENDED] != 1 {
		t.Fatalf("ledger %v, want ordinal 3 ENDED once", outcomes)
	}
	if insp, err := Inspect(v, lane, scheduleID, t0+20*hour); err != nil || len(insp.GetNextFireTimesUnixMicros()) != 0 {
		t.Fatalf("next fire times after the end: %v (%v)", insp.GetNextFireTimesUnixMicros(), err)
	}
}

// TestEndAtEndsTheSeries: no instant after end_at fires; the series ends at the first one past
// it, recorded ENDED with the reason; a replacement without the bound starts a new generation
// that fires again.
func TestEndAtEndsTheSeries(t *testing.T) {
	v := kv.NewMemory()
	def := definition(every(t0+hour, hour))
	def.EndAtUnixMicros = t0 + 2*hour + 30*60*sec
	configure(t, v, def, 0, t0)
	if ids := drain(t, v, 1, t0+10*hour); len(ids) != 2 {
		t.Fatalf("enqueued %v, want the instants at 1 h and 2 h", ids)
	}
	rec := mustLoad(t, v)
	if !rec.GetSeriesEnded() || !strings.Contains(rec.GetSeriesEndReason(), "end_at") || rec.GetSeriesEndWithheldUnixMicros() != t0+3*hour {
		t.Fatalf("record %v", rec)
	}
	if outcomesOf(t, v, 1)[2] != orreryv1.LedgerOutcome_LEDGER_OUTCOME_ENDED {
		t.Fatalf("ledger %v, want ordinal 2 ENDED", outcomesOf(t, v, 1))
	}
	unbounded := definition(every(t0+11*hour, hour))
	configure(t, v, unbounded, rec.GetRevision(), t0+10*hour)
	if ids := drain(t, v, 2, t0+13*hour); len(ids) != 3 {
		t.Fatalf("the unbounded generation enqueued %v, want 3", ids)
	}
	if rec := mustLoad(t, v); rec.GetSeriesEnded() || rec.GetSeriesEndReason() != "" {
		t.Fatalf("the unbounded generation: %v", rec)
	}
}

// TestCronStartAtDelaysTheFirstInstant: a cron schedule with start_at fires from its first
// instant at or after start_at, not from its configure.
func TestCronStartAtDelaysTheFirstInstant(t *testing.T) {
	v := kv.NewMemory()
	def := definition(cronSpec("0 * * * *", "UTC"))
	def.StartAtUnixMicros = t0 + 5*hour
	configure(t, v, def, 0, t0)
	insp, err := Inspect(v, lane, scheduleID, t0)
	if err != nil || len(insp.GetNextFireTimesUnixMicros()) == 0 || insp.GetNextFireTimesUnixMicros()[0] != t0+5*hour {
		t.Fatalf("next fire times %v (%v), want the first at start_at", insp.GetNextFireTimesUnixMicros(), err)
	}
	if ids := drain(t, v, 1, t0+4*hour); len(ids) != 0 {
		t.Fatalf("enqueued %v before start_at", ids)
	}
}

// TestBoundsAreValidated: a start for another kind than cron, an end before the start and an
// instant out of range are Validation errors naming the field.
func TestBoundsAreValidated(t *testing.T) {
	for _, c := range []struct {
		field string
		set   func(*orreryv1.ScheduleDefinition)
	}{
		{"start_at_unix_micros", func(d *orreryv1.ScheduleDefinition) { d.StartAtUnixMicros = t0 }},
		{"end_at_unix_micros", func(d *orreryv1.ScheduleDefinition) { d.EndAtUnixMicros = -1 }},
		{"end_at_unix_micros", func(d *orreryv1.ScheduleDefinition) {
			d.Spec = cronSpec("0 * * * *", "UTC")
			d.StartAtUnixMicros, d.EndAtUnixMicros = t0+2*hour, t0+hour
		}},
	} {
		def := definition(every(t0+hour, hour))
		c.set(def)
		err := ValidateDefinition(def, input.DefaultLimits())
		if err == nil || err.Code != orrery.CodeValidation || err.Field != c.field {
			t.Errorf("%s: %v, want Validation on %s", c.field, err, c.field)
		}
	}
}
