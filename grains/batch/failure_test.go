package batch

import (
	"fmt"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/schedule"
)

// TestADeadLetteredOccurrencePausesItsSchedule: a schedule with pause_on_failure whose
// occurrence uses up its one delivery is paused by the receive that dead-letters it, in the
// same command, with the reason on its record and the ordinal ledgered DEAD_LETTERED; at apply
// version 2 the same receive dead-letters the message and leaves the schedule and its ledger
// as they were.
func TestADeadLetteredOccurrencePausesItsSchedule(t *testing.T) {
	for _, c := range []struct {
		version uint32
		pauses  bool
	}{{3, true}, {2, false}} {
		v := granted(t)
		a := applier()
		a.ApplyVersion = c.version
		now := t0
		apply := func(id string, m *orreryv1.Mutation) *orreryv1.MutationResult {
			t.Helper()
			b := &orreryv1.Batch{CommandId: id, Mutations: []*orreryv1.Mutation{m}}
			out, err := a.ApplyBatch(v, sender(b), b, now)
			if err != nil {
				t.Fatal(err)
			}
			if r := out.Receipt.GetResults()[0]; r.GetError() != nil {
				t.Fatalf("version %d, %s: %v", c.version, id, resultErr(r))
			}
			return out.Receipt.GetResults()[0]
		}
		configure := configureMutation(everySpec(t0+sec, hour), 0)
		def := configure.GetConfigureSchedule().GetDefinition()
		def.Template.MaxDeliveries = 1
		def.PauseOnFailure = c.version >= ApplyVersionPauseOnFailure
		apply("configure", configure)
		if c.version < ApplyVersionPauseOnFailure {
			early := configureMutation(everySpec(t0+sec, hour), 0)
			early.GetConfigureSchedule().GetDefinition().ScheduleId = "1f8fad5b-d9cb-469f-a165-70867728950e"
			early.GetConfigureSchedule().GetDefinition().PauseOnFailure = true
			b := &orreryv1.Batch{CommandId: "early", Mutations: []*orreryv1.Mutation{early}}
			if err := oneResultErr(a.ApplyBatch(v, sender(b), b, now)); !strings.Contains(fmt.Sprint(err), "field 13 of orrery.v1.ScheduleDefinition, which this partition does not take under apply version") {
				t.Fatalf("pause_on_failure at version %d: %v, want refused", c.version, err)
			}
		}
		now = t0 + sec
		if res := apply("emit", emitMutation(1)); len(res.GetSchedule().GetEnqueuedIds()) != 1 {
			t.Fatalf("emit %v", res)
		}
		receive := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Max: 10}}}
		apply("receive-1", receive)
		now += input.DefaultLimits().DefaultLeaseMicros
		if res := apply("receive-2", receive); len(res.GetReceive().GetMessages()) != 0 {
			t.Fatalf("the second receive leased %v, want the message dead-lettered", res)
		}
		rec, _, err := schedule.Load(v, lane, scheduleID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.GetPaused() != c.pauses || (c.pauses && !strings.Contains(rec.GetPausedReason(), "dead-lettered after 1 deliveries")) {
			t.Fatalf("version %d: paused %v (%q), want %v", c.version, rec.GetPaused(), rec.GetPausedReason(), c.pauses)
		}
		ledger, _, err := schedule.ReadLedger(v, lane, scheduleID, schedule.LedgerQuery{FromMicros: 0, ToMicros: input.MaxInstantMicros, MaxRecords: 10})
		if err != nil || len(ledger) != 1 {
			t.Fatalf("ledger %v (%v)", ledger, err)
		}
		want := orreryv1.LedgerOutcome_LEDGER_OUTCOME_ENQUEUED
		if c.version >= ApplyVersionPauseOnFailure {
			want = orreryv1.LedgerOutcome_LEDGER_OUTCOME_DEAD_LETTERED
		}
		if ledger[0].GetOutcome() != want {
			t.Fatalf("version %d: ordinal 0 ledgered %v, want %v", c.version, ledger[0].GetOutcome(), want)
		}
	}
}

// TestADeadLetteredHolderLetsABufferAllSeriesGoOn: a BUFFER_ALL series waits, out of the due
// index, while its occurrence is in flight; the receive that dead-letters that occurrence
// frees the slot in the same command, so the series is due again; before apply version 4
// BUFFER_ALL is refused.
func TestADeadLetteredHolderLetsABufferAllSeriesGoOn(t *testing.T) {
	v := granted(t)
	a := applier()
	a.ApplyVersion = 4
	now := t0
	apply := func(a Applier, id string, m *orreryv1.Mutation) *orreryv1.MutationResult {
		t.Helper()
		b := &orreryv1.Batch{CommandId: id, Mutations: []*orreryv1.Mutation{m}}
		out, err := a.ApplyBatch(v, sender(b), b, now)
		if err != nil {
			t.Fatal(err)
		}
		return out.Receipt.GetResults()[0]
	}
	configure := configureMutation(everySpec(t0+sec, input.Minute), 0)
	def := configure.GetConfigureSchedule().GetDefinition()
	def.Template.MaxDeliveries = 1
	def.Overlap = orreryv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ALL
	older := applier()
	older.ApplyVersion = 3
	atThree := &orreryv1.Batch{CommandId: "configure-at-3", Mutations: []*orreryv1.Mutation{configure}}
	if err := oneResultErr(older.ApplyBatch(v, sender(atThree), atThree, now)); !strings.Contains(fmt.Sprint(err), "value 4 of field 5 of orrery.v1.ScheduleDefinition, which this partition does not take under apply version 3") {
		t.Fatalf("BUFFER_ALL at apply version 3: %v, want refused", err)
	}
	if r := apply(a, "configure", configure); r.GetError() != nil {
		t.Fatal(resultErr(r))
	}
	now = t0 + sec
	apply(a, "emit-1", emitMutation(1))
	now = t0 + 2*input.Minute
	if r := apply(a, "emit-2", emitMutation(1)); len(r.GetSchedule().GetEnqueuedIds()) != 0 {
		t.Fatalf("an emit with the slot taken enqueued %v", r)
	}
	if rec, _, _ := schedule.Load(v, lane, scheduleID); rec.GetNextDueAtUnixMicros() != 0 {
		t.Fatalf("a held series is due at %d, want out of the due index", rec.GetNextDueAtUnixMicros())
	}
	receive := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Max: 1}}}
	apply(a, "receive-1", receive)
	now += input.DefaultLimits().DefaultLeaseMicros
	apply(a, "receive-2", receive) // dead-letters ordinal 0, the holder
	rec, _, _ := schedule.Load(v, lane, scheduleID)
	if rec.GetInFlightMessageId() != "" || rec.GetNextDueAtUnixMicros() != t0+sec+input.Minute {
		t.Fatalf("after its holder was dead-lettered: in flight %q, due at %d; want free and due at ordinal 1's instant", rec.GetInFlightMessageId(), rec.GetNextDueAtUnixMicros())
	}
}

// TestCancelOtherWaitsForItsApplyVersion: CANCEL_OTHER is refused before apply version 5.
func TestCancelOtherWaitsForItsApplyVersion(t *testing.T) {
	for _, c := range []struct {
		version uint32
		taken   bool
	}{{4, false}, {5, true}} {
		v := granted(t)
		a := applier()
		a.ApplyVersion = c.version
		configure := configureMutation(everySpec(t0+sec, input.Minute), 0)
		configure.GetConfigureSchedule().GetDefinition().Overlap = orreryv1.OverlapPolicy_OVERLAP_POLICY_CANCEL_OTHER
		b := &orreryv1.Batch{CommandId: "configure", Mutations: []*orreryv1.Mutation{configure}}
		if got := oneResultErr(a.ApplyBatch(v, sender(b), b, t0)); (got == nil) != c.taken {
			t.Fatalf("CANCEL_OTHER at apply version %d: %v, want taken %v", c.version, got, c.taken)
		}
	}
}

// TestJitterWaitsForItsApplyVersion: a definition with a jitter is refused before apply
// version 6, naming the field (jitter_micros is field 14).
func TestJitterWaitsForItsApplyVersion(t *testing.T) {
	for _, c := range []struct {
		version uint32
		taken   bool
	}{{5, false}, {6, true}} {
		v := granted(t)
		a := applier()
		a.ApplyVersion = c.version
		configure := configureMutation(everySpec(t0+sec, input.Minute), 0)
		configure.GetConfigureSchedule().GetDefinition().JitterMicros = 10 * sec
		b := &orreryv1.Batch{CommandId: "configure", Mutations: []*orreryv1.Mutation{configure}}
		got := oneResultErr(a.ApplyBatch(v, sender(b), b, t0))
		if (got == nil) != c.taken || (got != nil && !strings.Contains(got.Error(), "field 14 of orrery.v1.ScheduleDefinition")) {
			t.Fatalf("a jitter at apply version %d: %v, want taken %v", c.version, got, c.taken)
		}
	}
}

// TestAnExpiredOccurrenceStopsItsSeriesFromApplyVersion7: before apply version 7 an emit passes
// an expired occurrence EXPIRED and goes on; from 7 it fails Expired and moves nothing, and
// SkipExpired (refused before 7) passes it; a definition's expired policy waits for 7 too.
func TestAnExpiredOccurrenceStopsItsSeriesFromApplyVersion7(t *testing.T) {
	for _, version := range []uint32{6, 7} {
		v := granted(t)
		a := applier()
		a.ApplyVersion = version
		configure := configureMutation(everySpec(t0, hour), 0)
		configure.GetConfigureSchedule().GetDefinition().GetTemplate().TimeToLiveMicros = 10 * input.Minute
		apply := func(id string, m *orreryv1.Mutation, now int64) error {
			b := &orreryv1.Batch{CommandId: id, Mutations: []*orreryv1.Mutation{m}}
			return oneResultErr(a.ApplyBatch(v, sender(b), b, now))
		}
		if err := apply("configure", configure, t0); err != nil {
			t.Fatal(err)
		}
		emitErr := apply("emit", emitMutation(1), t0+hour+30*input.Minute) // 0 and 1 expired
		rec, _, _ := schedule.Load(v, lane, scheduleID)
		skipErr := apply("skip", &orreryv1.Mutation{Kind: &orreryv1.Mutation_SkipExpired{SkipExpired: &orreryv1.SkipExpired{Lane: lane, ScheduleId: scheduleID}}}, t0+hour+30*input.Minute)
		skipped, _, _ := schedule.Load(v, lane, scheduleID)
		withPolicy := configureMutation(everySpec(t0+24*hour, hour), skipped.GetRevision())
		withPolicy.GetConfigureSchedule().GetDefinition().Expired = orreryv1.ExpiredPolicy_EXPIRED_POLICY_SKIP
		policyErr := apply("policy", withPolicy, t0+hour+30*input.Minute)
		switch version {
		case 6:
			if emitErr != nil || rec.GetNextOrdinal() != 2 {
				t.Fatalf("apply version 6: emit %v, watermark %d; want both expired ordinals passed", emitErr, rec.GetNextOrdinal())
			}
			if skipErr == nil || policyErr == nil {
				t.Fatalf("apply version 6 took SkipExpired (%v) or an expired policy (%v)", skipErr, policyErr)
			}
		case 7:
			if orrery.CodeOf(emitErr) != orrery.CodeExpired || rec.GetNextOrdinal() != 0 {
				t.Fatalf("apply version 7: emit %v, watermark %d; want Expired at ordinal 0", emitErr, rec.GetNextOrdinal())
			}
			if skipErr != nil || skipped.GetNextOrdinal() != 2 || policyErr != nil {
				t.Fatalf("apply version 7: skip %v (watermark %d), policy %v", skipErr, skipped.GetNextOrdinal(), policyErr)
			}
		}
	}
}

// TestGenerationsAreKeptFromApplyVersion8: a replacement keeps the replaced generation from
// apply version 8 on, and not before.
func TestGenerationsAreKeptFromApplyVersion8(t *testing.T) {
	for _, c := range []struct {
		version uint32
		kept    int
	}{{7, 0}, {8, 1}} {
		v := granted(t)
		a := applier()
		a.ApplyVersion = c.version
		for i, m := range []*orreryv1.Mutation{configureMutation(everySpec(t0+hour, hour), 0), configureMutation(everySpec(t0+hour, 2*hour), 1)} {
			b := &orreryv1.Batch{CommandId: fmt.Sprint("configure-", i), Mutations: []*orreryv1.Mutation{m}}
			out, err := a.ApplyBatch(v, sender(b), b, t0)
			if err != nil || resultErr(out.Receipt.GetResults()[0]) != nil {
				t.Fatalf("configure %d: %v %v", i, out, err)
			}
		}
		if gens, err := schedule.Generations(v, lane, scheduleID); err != nil || len(gens) != c.kept {
			t.Fatalf("apply version %d kept %d generations (%v), want %d", c.version, len(gens), err, c.kept)
		}
	}
}

// TestLabelsWaitForTheirApplyVersion: a definition with labels is refused before apply
// version 10, naming the field.
func TestLabelsWaitForTheirApplyVersion(t *testing.T) {
	for _, c := range []struct {
		version uint32
		taken   bool
	}{{9, false}, {10, true}} {
		v := granted(t)
		a := applier()
		a.ApplyVersion = c.version
		configure := configureMutation(everySpec(t0+sec, input.Minute), 0)
		configure.GetConfigureSchedule().GetDefinition().Labels = map[string]string{"team": "billing"}
		b := &orreryv1.Batch{CommandId: "configure", Mutations: []*orreryv1.Mutation{configure}}
		got := oneResultErr(a.ApplyBatch(v, sender(b), b, t0))
		if (got == nil) != c.taken || (got != nil && !strings.Contains(got.Error(), "field 17 of orrery.v1.ScheduleDefinition")) {
			t.Fatalf("labels at apply version %d: %v, want taken %v", c.version, got, c.taken)
		}
	}
}

// TestSagaLabelsWaitForTheirApplyVersion: a saga exchange with labels is refused before apply
// version 12; from it the labels are stored, replaced by an exchange that sets others and kept
// by one that sets none.
func TestSagaLabelsWaitForTheirApplyVersion(t *testing.T) {
	for _, version := range []uint32{11, 12} {
		v := granted(t)
		a := applier()
		a.ApplyVersion = version
		exchange := func(id string, expected uint64, labels map[string]string) (*orreryv1.MutationResult, error) {
			m := &orreryv1.Mutation{Kind: &orreryv1.Mutation_CompareExchangeSaga{CompareExchangeSaga: &orreryv1.CompareExchangeSaga{
				Lane: lane, SagaId: scheduleID, ExpectedRevision: expected, Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING, StateJson: `{}`, Labels: labels}}}
			b := &orreryv1.Batch{CommandId: id, Mutations: []*orreryv1.Mutation{m}}
			out, err := a.ApplyBatch(v, sender(b), b, t0)
			if err != nil {
				if orrery.CodeOf(err) != orrery.CodeValidation {
					t.Fatal(err)
				}
				return nil, err
			}
			r := out.Receipt.GetResults()[0]
			return r, resultErr(r)
		}
		_, err := exchange("create", 0, map[string]string{"team": "billing"})
		if version == 11 {
			if err == nil || !strings.Contains(err.Error(), "field 8 of orrery.v1.CompareExchangeSaga") {
				t.Fatalf("saga labels at apply version 11: %v, want refused on labels (field 8)", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := exchange("keep", 1, nil); err != nil {
			t.Fatal(err)
		}
		rec := &orreryv1.SagaRecord{}
		if _, err := record.Load(v, keys.SagaKey(lane, scheduleID), rec); err != nil || rec.GetLabels()["team"] != "billing" {
			t.Fatalf("after an exchange without labels: %v (%v), want team=billing kept", rec.GetLabels(), err)
		}
		if _, err := exchange("replace", 2, map[string]string{"team": "ops"}); err != nil {
			t.Fatal(err)
		}
		if _, err := record.Load(v, keys.SagaKey(lane, scheduleID), rec); err != nil || len(rec.GetLabels()) != 1 || rec.GetLabels()["team"] != "ops" {
			t.Fatalf("after an exchange with labels: %v (%v), want team=ops", rec.GetLabels(), err)
		}
	}
}

// oneResultErr is the error of a one-mutation batch's apply: the command's Validation refusal
// (a part of the wire its apply version does not take refuses the whole command) or its
// mutation's result's error; any other error of the apply panics.
func oneResultErr(out *Outcome, err error) error {
	if err != nil {
		if orrery.CodeOf(err) != orrery.CodeValidation {
			panic(err)
		}
		return err
	}
	return resultErr(out.Receipt.GetResults()[0])
}
