package schedule

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// fuzzSeeds are definitions of every kind and policy, the starting points of the fuzzer
// (the committed corpus in testdata/fuzz/FuzzValidateDefinition holds their encodings).
func fuzzSeeds() []*orreryv1.ScheduleDefinition {
	withPolicies := func(spec *orreryv1.ScheduleSpec, m orreryv1.MisfirePolicy, o orreryv1.OverlapPolicy, catchUpWindow, anomalyWindow int64) *orreryv1.ScheduleDefinition {
		def := policies(spec, m, o)
		def.CatchUpWindowMicros, def.AnomalyWindowMicros = catchUpWindow, anomalyWindow
		return def
	}
	dst := cronSpec("*/30 1-3 * * *", "America/New_York")
	dst.GetCron().GapPolicy = orreryv1.CronGapPolicy_CRON_GAP_POLICY_SKIP
	dst.GetCron().RepeatPolicy = orreryv1.CronRepeatPolicy_CRON_REPEAT_POLICY_BOTH
	ttl := withPolicies(every(t0, minute), coalesce, bufferOne, 0, 0)
	ttl.Template.TimeToLiveMicros = 90 * sec
	return []*orreryv1.ScheduleDefinition{
		definition(every(t0, hour)),
		definition(at(t0 + hour)),
		definition(after(90 * sec)),
		definition(cronSpec("0 9 * * MON-FRI", "Europe/Paris")),
		definition(cronSpec("H H(1-5)/2 L-3W * 5#2", "Australia/Lord_Howe")),
		definition(cronSpec("@every_second", "")),
		definition(dst),
		withPolicies(every(0, sec), skipMis, skipOver, 10*sec, 0),
		withPolicies(cronSpec("* * * * * *", "Pacific/Apia"), coalesce, allowAll, 0, 30*sec),
		withPolicies(every(t0, 7*sec), catchUp, bufferOne, minute, hour),
		ttl,
	}
}

// FuzzValidateDefinition: arbitrary bytes decoded as a ScheduleDefinition never panic the
// validator, which accepts or refuses with a Validation error; an accepted definition
// configures and then survives emits, pause, resume, trigger, ack and inspection at
// arbitrary later logged times without a panic or an Internal error.
func FuzzValidateDefinition(f *testing.F) {
	for _, def := range fuzzSeeds() {
		b, err := proto.Marshal(def)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint32(3600))
	}
	f.Fuzz(func(t *testing.T, data []byte, advanceSeconds uint32) {
		def := &orreryv1.ScheduleDefinition{}
		if proto.Unmarshal(data, def) != nil {
			return
		}
		lim := input.DefaultLimits()
		if err := ValidateDefinition(def, lim); err != nil {
			if err.Code != orrery.CodeValidation {
				t.Fatalf("validator refused with %v, not Validation", err)
			}
			return
		}
		v := kv.NewMemory()
		now := t0
		if _, err := applyConfigure(v, lim, "fuzz", &orreryv1.ConfigureSchedule{Definition: def}, now); err != nil {
			t.Fatalf("an accepted definition failed to configure: %v", err)
		}
		l, id := def.GetLane(), def.GetScheduleId()
		check := func(op string, err error) {
			if err != nil && !errors.Is(err, orrery.ErrExpired) && !errors.Is(err, orrery.ErrQuotaExceeded) && !errors.Is(err, orrery.ErrSuspended) {
				t.Fatalf("%s: %v", op, err)
			}
		}
		revision := func() uint64 { rec, _, _ := Load(v, l, id); return rec.GetRevision() }
		steps := []int64{int64(advanceSeconds%86400) * sec, int64(advanceSeconds) * sec, input.Day}
		for i, step := range steps {
			now += step
			for range 3 {
				_, err := ApplyEmit(v, lim, &orreryv1.EmitOccurrences{Lane: l, ScheduleId: id, ExpectedGeneration: 1, Max: 32}, now)
				check("emit", err)
			}
			_, err := ApplyTrigger(v, lim, &orreryv1.TriggerSchedule{Lane: l, ScheduleId: id}, now)
			check("trigger", err)
			if i == 0 {
				_, err = ApplyPause(v, lim, &orreryv1.PauseSchedule{Lane: l, ScheduleId: id, ExpectedRevision: revision()}, now)
				check("pause", err)
			}
			if i == 1 {
				_, err = ApplyResume(v, lim, &orreryv1.ResumeSchedule{Lane: l, ScheduleId: id, ExpectedRevision: revision()}, now)
				check("resume", err)
			}
			if rec, _, _ := Load(v, l, id); rec.GetInFlightMessageId() != "" {
				check("release", ReleaseSlot(v, lim, &orreryv1.QueueMessage{Id: rec.GetInFlightMessageId(), Lane: l,
					Origin: &orreryv1.QueueMessage_Occurrence{Occurrence: &orreryv1.OccurrenceOrigin{ScheduleId: id}}}))
			}
			if _, err := Inspect(v, l, id, now); err != nil {
				t.Fatalf("inspect: %v", err)
			}
		}
	})
}
