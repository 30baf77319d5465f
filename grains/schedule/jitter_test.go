package schedule

import (
	"strings"
	"testing"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// jittered is an Every-1-minute definition from t0+1min with a jitter of 30 s.
func jittered(early bool) *orreryv1.ScheduleDefinition {
	def := definition(every(t0+minute, minute))
	def.JitterMicros, def.JitterAllowEarly = 30*sec, early
	return def
}

// TestJitterFiresEachOccurrenceAtItsOwnOffset: each ordinal fires at its nominal instant plus
// its own offset in [0, jitter] (not before it, not after it), its due entry is there, and its
// message and ledger record keep the nominal instant.
func TestJitterFiresEachOccurrenceAtItsOwnOffset(t *testing.T) {
	for _, early := range []bool{false, true} {
		v := kv.NewMemory()
		def := jittered(early)
		configure(t, v, def, 0, t0)
		offsets := map[int64]bool{}
		sawEarly := false
		for k := range uint64(20) {
			nominal := t0 + minute + int64(k)*minute
			offset := JitterOffsetMicros(def, 1, k)
			low := int64(0)
			if early {
				low = -30 * sec
			}
			if offset < low || offset > 30*sec {
				t.Fatalf("early=%v ordinal %d: offset %d outside [%d, %d]", early, k, offset, low, 30*sec)
			}
			offsets[offset] = true
			sawEarly = sawEarly || offset < 0
			fire := nominal + offset
			if due := mustLoad(t, v).GetNextDueAtUnixMicros(); due != fire {
				t.Fatalf("early=%v ordinal %d: due entry at %d, want nominal %d + offset %d", early, k, due, nominal, offset)
			}
			if ids := drain(t, v, 1, fire-1); len(ids) != 0 {
				t.Fatalf("early=%v ordinal %d fired %v a microsecond before its jittered instant", early, k, ids)
			}
			ids := drain(t, v, 1, fire)
			if len(ids) != 1 || ids[0] != OccurrenceID(scheduleID, 1, k) {
				t.Fatalf("early=%v ordinal %d: enqueued %v at its jittered instant", early, k, ids)
			}
		}
		if len(offsets) < 10 {
			t.Fatalf("early=%v: 20 ordinals had %d distinct offsets, want them spread", early, len(offsets))
		}
		if early != sawEarly {
			t.Fatalf("early=%v: an offset before the nominal instant seen: %v", early, sawEarly)
		}
		for _, e := range ledgerOf(t, v) {
			if want := t0 + minute + int64(e.GetOrdinal())*minute; e.GetNominalDueAtUnixMicros() != want {
				t.Fatalf("ledger record of ordinal %d has nominal %d, want %d", e.GetOrdinal(), e.GetNominalDueAtUnixMicros(), want)
			}
		}
	}
}

// TestJitterOffsetsArePinned: the offsets depend only on the occurrence, identically on every
// release, or replicas of two releases would fire one occurrence at two instants. These values
// are the function's; a change to it must be a new apply version.
func TestJitterOffsetsArePinned(t *testing.T) {
	def := jittered(false)
	early := jittered(true)
	got := []int64{JitterOffsetMicros(def, 1, 0), JitterOffsetMicros(def, 1, 1), JitterOffsetMicros(def, 2, 0), JitterOffsetMicros(early, 1, 0)}
	want := []int64{pinned0, pinned1, pinned2, pinned3}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("offsets %v, want %v", got, want)
		}
	}
	if JitterOffsetMicros(definition(every(t0, minute)), 1, 0) != 0 {
		t.Fatal("a definition without jitter has an offset")
	}
}

// TestInspectShowsJitteredFireTimes: describe's next fire times are the instants the
// occurrences fire, offsets included.
func TestInspectShowsJitteredFireTimes(t *testing.T) {
	v := kv.NewMemory()
	def := jittered(false)
	configure(t, v, def, 0, t0)
	insp, err := Inspect(v, lane, scheduleID, t0)
	if err != nil {
		t.Fatal(err)
	}
	times := insp.GetNextFireTimesUnixMicros()
	if len(times) < 3 {
		t.Fatalf("next fire times %v", times)
	}
	for k, at := range times {
		if want := t0 + minute + int64(k)*minute + JitterOffsetMicros(def, 1, uint64(k)); at != want {
			t.Fatalf("fire time %d is %d, want %d", k, at, want)
		}
	}
}

// TestJitterBeyondTheAnomalyWindowIsNoAnomaly: an occurrence that fires up to its jitter after
// its nominal instant is not a clock anomaly of a smaller anomaly window.
func TestJitterBeyondTheAnomalyWindowIsNoAnomaly(t *testing.T) {
	v := kv.NewMemory()
	def := jittered(false)
	def.AnomalyWindowMicros = sec
	configure(t, v, def, 0, t0)
	for k := range uint64(10) {
		fire := t0 + minute + int64(k)*minute + JitterOffsetMicros(def, 1, k)
		if ids := drain(t, v, 1, fire); len(ids) != 1 {
			t.Fatalf("ordinal %d: enqueued %v", k, ids)
		}
		if rec := mustLoad(t, v); rec.GetSuspended() {
			t.Fatalf("ordinal %d suspended the schedule: %s", k, rec.GetSuspendedReason())
		}
	}
}

// TestJitterIsValidated: a jitter below 1 ms or above 7 days, or allow-early without one, is
// refused naming the field.
func TestJitterIsValidated(t *testing.T) {
	for _, c := range []struct {
		jitter int64
		early  bool
		field  string
	}{{500, false, "jitter_micros"}, {8 * 24 * hour, false, "jitter_micros"}, {-sec, false, "jitter_micros"}, {0, true, "jitter_allow_early"}} {
		def := definition(every(t0+minute, minute))
		def.JitterMicros, def.JitterAllowEarly = c.jitter, c.early
		err := ValidateDefinition(def, input.DefaultLimits())
		if err == nil || err.Field != c.field {
			t.Fatalf("jitter %d early %v: %v, want a Validation error on %s", c.jitter, c.early, err, c.field)
		}
	}
}

const (
	pinned0 = 11588256
	pinned1 = 7851918
	pinned2 = 23772026
	pinned3 = 29082209
)

// TestATimeToLiveCountsFromTheJitteredInstant: an occurrence's time to live starts when it
// fires, so a jitter longer than the time to live expires nothing.
func TestATimeToLiveCountsFromTheJitteredInstant(t *testing.T) {
	v := kv.NewMemory()
	def := jittered(false)
	def.Template.TimeToLiveMicros = 5 * sec
	configure(t, v, def, 0, t0)
	for k := range uint64(10) {
		fire := t0 + minute + int64(k)*minute + JitterOffsetMicros(def, 1, k)
		ids := drain(t, v, 1, fire)
		if len(ids) != 1 {
			t.Fatalf("ordinal %d at its jittered instant: enqueued %v", k, ids)
		}
		if m := messages(t, v)[ids[0]]; m.GetExpiresAtUnixMicros() != fire+5*sec {
			t.Fatalf("ordinal %d expires at %d, want its fire instant %d + 5 s", k, m.GetExpiresAtUnixMicros(), fire)
		}
	}
}

// TestLabelsAreValidated: too many labels, a malformed key or a value with a control character
// is refused naming the labels field.
func TestLabelsAreValidated(t *testing.T) {
	many := map[string]string{}
	for i := range input.MaxLabels + 1 {
		many[string(rune('a'+i))] = "v"
	}
	for _, labels := range []map[string]string{many, {"bad key": "v"}, {"": "v"}, {"k": "a\x01b"}} {
		def := definition(every(t0+minute, minute))
		def.Labels = labels
		if err := ValidateDefinition(def, input.DefaultLimits()); err == nil || !strings.HasPrefix(err.Field, "labels") {
			t.Fatalf("labels %q: %v, want a Validation error on labels", labels, err)
		}
	}
	def := definition(every(t0+minute, minute))
	def.Labels = map[string]string{"team": "billing", "app.kubernetes.io/name": "", "tier": "gold"}
	if err := ValidateDefinition(def, input.DefaultLimits()); err != nil {
		t.Fatalf("valid labels refused: %v", err)
	}
}
