package schedule

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
)

func backfill(v kv.View, lim input.Limits, from, to, now int64) (*orreryv1.ScheduleResult, error) {
	return ApplyBackfill(v, lim, &orreryv1.BackfillSchedule{Lane: lane, ScheduleId: scheduleID, FromUnixMicros: from, ToUnixMicros: to}, now, queue.CompareOrReturn)
}

// fataler is what backfillAll needs of a test: *testing.T or *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
	Fatal(args ...any)
}

// backfillAll runs a backfill to its end, command after command, and returns the nominal
// instants it enqueued.
func backfillAll(t fataler, v kv.View, lim input.Limits, from, to, now int64) []int64 {
	t.Helper()
	var nominals []int64
	for range 100_000 {
		res, err := backfill(v, lim, from, to, now)
		if err != nil {
			t.Fatalf("backfill [%d, %d]: %v", from, to, err)
		}
		nominals = append(nominals, res.GetEnqueuedNominalDueAtUnixMicros()...)
		if from = res.GetBackfillResumeFromUnixMicros(); from == 0 {
			return nominals
		}
	}
	t.Fatal("the backfill never ended")
	return nil
}

// TestABackfillRunsThePastInstantsOnce: a backfill enqueues each instant of the range now, with
// ids of its own beside the series' occurrences of the same instants, ledgered BACKFILLED,
// without moving the schedule; a second backfill of an overlapping range enqueues only the
// instants the first did not; a command handles at most MaxEmitPerCommand instants.
func TestABackfillRunsThePastInstantsOnce(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(every(t0, hour)), 0, t0)
	drain(t, v, 1, t0+2*hour) // the series fires ordinals 0..2
	rec := mustLoad(t, v)
	now := t0 + 30*hour
	lim := input.DefaultLimits()
	lim.MaxEmitPerCommand = 4
	res, err := backfill(v, lim, t0, t0+9*hour, now)
	if err != nil || len(res.GetEnqueuedIds()) != 4 || res.GetBackfillResumeFromUnixMicros() != t0+4*hour {
		t.Fatalf("first command: %v %v; want 4 instants and a resume at 4 h", res, err)
	}
	got := append(res.GetEnqueuedNominalDueAtUnixMicros(), backfillAll(t, v, lim, res.GetBackfillResumeFromUnixMicros(), t0+9*hour, now)...)
	if len(got) != 10 || got[0] != t0 || got[9] != t0+9*hour {
		t.Fatalf("backfilled %v, want the 10 instants 0..9 h", got)
	}
	msgs := messages(t, v)
	if _, ok := msgs[BackfillID(scheduleID, 1, t0)]; !ok || len(msgs) != 13 {
		t.Fatalf("%d messages, want the series' 3 and 10 backfilled with their own ids", len(msgs))
	}
	if o := msgs[BackfillID(scheduleID, 1, t0+5*hour)].GetOccurrence(); !o.GetBackfill() || o.GetNominalDueAtUnixMicros() != t0+5*hour {
		t.Fatalf("origin %v", o)
	}
	if after := mustLoad(t, v); after.GetRevision() != rec.GetRevision() || after.GetNextOrdinal() != rec.GetNextOrdinal() {
		t.Fatalf("the backfill moved the schedule: %v", after)
	}
	backfilled := 0
	for _, e := range ledgerOf(t, v) {
		if e.GetBackfill() {
			backfilled++
			if e.GetOutcome() != orreryv1.LedgerOutcome_LEDGER_OUTCOME_BACKFILLED || e.GetMessageId() != BackfillID(scheduleID, 1, e.GetNominalDueAtUnixMicros()) {
				t.Fatalf("backfill ledger record %v", e)
			}
		}
	}
	if backfilled != 10 || len(outcomesOf(t, v, 1)) != 3 {
		t.Fatalf("%d backfill records beside %d series records, want 10 and 3", backfilled, len(outcomesOf(t, v, 1)))
	}
	if again := backfillAll(t, v, lim, t0+5*hour, t0+12*hour, now); len(again) != 3 || again[0] != t0+10*hour {
		t.Fatalf("an overlapping backfill enqueued %v, want only 10..12 h", again)
	}
}

// TestABackfillIsRefusedOutsideItsBounds: a range ending after the logged time, or reversed,
// is Validation on its field; a cancelled schedule refuses a backfill; a cron schedule
// backfills its cron instants.
func TestABackfillIsRefusedOutsideItsBounds(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(cronSpec("0 9 * * *", "UTC")), 0, t0)
	lim := input.DefaultLimits()
	_, err := backfill(v, lim, t0, t0+2*hour, t0+hour)
	wantCode(t, err, orrery.ErrValidation, "to_unix_micros")
	_, err = backfill(v, lim, t0+hour, t0, t0+hour)
	wantCode(t, err, orrery.ErrValidation, "to_unix_micros")
	got := backfillAll(t, v, lim, t0-3*24*hour, t0, t0+hour)
	if len(got) != 3 || got[0] != t0-3*24*hour+9*hour || got[2] != t0-24*hour+9*hour {
		t.Fatalf("cron backfill of three days: %v", got)
	}
	if _, err := ApplyCancel(v, lim, &orreryv1.CancelSchedule{Lane: lane, ScheduleId: scheduleID, AnyRevision: true}); err != nil {
		t.Fatal(err)
	}
	_, err = backfill(v, lim, t0-3*24*hour, t0, t0+hour)
	wantCode(t, err, orrery.ErrSuspended, "cancelled")
}

// TestBackfillMatchesBruteForceOracle: for random schedules and ranges, a backfill enqueues
// exactly the brute-force enumeration's instants within the range and the definition's end.
func TestBackfillMatchesBruteForceOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := genSpec(t)
		createdAt := t0 + rapid.Int64Range(-input.Day, input.Day).Draw(t, "createdAt")
		v := kv.NewMemory()
		def := definition(spec)
		unit := input.Day
		if e := spec.GetEvery(); e != nil {
			unit = e.GetIntervalMicros()
		}
		if rapid.Bool().Draw(t, "bounded") {
			def.EndAtUnixMicros = max(1, createdAt+rapid.Int64Range(-10, 100).Draw(t, "endUnits")*unit)
		}
		if _, err := applyConfigure(v, input.DefaultLimits(), "alice", &orreryv1.ConfigureSchedule{Definition: def}, createdAt); err != nil {
			t.Fatalf("configure: %v", err)
		}
		// The logged time: up to 200 units past the later of the creation and the first instant,
		// so that most ranges hold instants.
		firstInstant := oracleNext(spec, createdAt, nil)
		now := min(max(createdAt, firstInstant)+rapid.Int64Range(0, 200).Draw(t, "nowUnits")*unit, input.MaxInstantMicros)
		from := max(1, now-rapid.Int64Range(0, 120).Draw(t, "fromUnits")*unit-rapid.Int64Range(0, unit).Draw(t, "fromPhase"))
		to := min(now, from+rapid.Int64Range(0, 100).Draw(t, "spanUnits")*unit+rapid.Int64Range(0, unit).Draw(t, "toPhase"))
		lim := input.DefaultLimits()
		lim.MaxEmitPerCommand = uint32(rapid.IntRange(1, 32).Draw(t, "perCommand"))
		var want []int64
		for _, at := range oracleDue(spec, createdAt, to) {
			if at >= from && (def.GetEndAtUnixMicros() == 0 || at <= def.GetEndAtUnixMicros()) {
				want = append(want, at)
			}
		}
		got := backfillAll(t, v, lim, from, to, now)
		if len(got) != len(want) {
			t.Fatalf("backfilled %d instants, oracle %d", len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("instant %d: %d, oracle %d", i, got[i], want[i])
			}
		}
		if again := backfillAll(t, v, lim, from, to, now); len(again) != 0 {
			t.Fatalf("a second backfill of the range enqueued %d", len(again))
		}
	})
}
