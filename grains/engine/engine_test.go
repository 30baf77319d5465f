package engine

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/schedule/zonerules"
)

// TestACommandIsAnsweredOnceItsEntryApplies: a command is proposed, answered nothing while its
// entry is only accepted, and answered with its receipt (and the term) by the Applied event
// holding its index and term, which also asks for the reply-sent failpoint.
func TestACommandIsAnsweredOnceItsEntryApplies(t *testing.T) {
	h := newHarness(t, nil)
	h.command("a", request("c1", enqueue("m1", 0)))
	if len(h.log) != 1 || len(h.answers("a")) != 0 || h.e.Queued() != 1 {
		t.Fatalf("log %d, answers %d, queued %d: want one accepted entry, no answer", len(h.log), len(h.answers("a")), h.e.Queued())
	}
	h.commit()
	answers := h.answers("a")
	if len(answers) != 1 || answers[0].GetActivationEpoch() != 3 || h.answeredApplied != 1 || h.e.Queued() != 0 {
		t.Fatalf("answers %v, answered-applied %d, queued %d", answers, h.answeredApplied, h.e.Queued())
	}
	if rc := receiptOf(t, answers[0]); rc.GetCommandId() != "c1" || rc.GetResults()[0].GetError() != nil {
		t.Fatalf("receipt %v", rc)
	}
}

// TestAnEntryOfAnotherTermAnswersNothingAndALostProposalIsUnavailable: a result at a proposal's
// index but of another term is not its outcome; Lost answers it Unavailable.
func TestAnEntryOfAnotherTermAnswersNothingAndALostProposalIsUnavailable(t *testing.T) {
	h := newHarness(t, nil)
	h.command("a", request("c1", enqueue("m1", 0)))
	index := h.log[0].index
	h.log = nil
	h.step(Applied{Results: []Result{{Index: index, Term: 4, Reply: &orreryv1.CommandReply{}}}})
	if len(h.answers("a")) != 0 || h.answeredApplied != 0 {
		t.Fatalf("answered by another term's entry: %v", h.answers("a"))
	}
	h.step(Lost{Proposals: []Proposal{{Index: index, Term: 3}}})
	if a := h.answers("a"); len(a) != 1 || orrery.CodeOf(orrery.FromProto(a[0].GetError())) != orrery.CodeUnavailable {
		t.Fatalf("answers %v, want one Unavailable", a)
	}
}

// TestDueMutationsTakeOnlyTheDuePath: ExpireSaga arrives only in a due command, and a due
// command only from the due coordinators' principal; anything else is refused by the field
// that broke the rule, before a proposal, whoever sends it (an Orrery principal included). An
// EmitOccurrences may also come in an ordinary command (client.ProcessDue), whose apply
// authorizes its caller.
func TestDueMutationsTakeOnlyTheDuePath(t *testing.T) {
	emit := &orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: "s", ExpectedGeneration: 1, Max: 1}}}
	expire := &orreryv1.Mutation{Kind: &orreryv1.Mutation_ExpireSaga{ExpireSaga: &orreryv1.ExpireSaga{Lane: lane, SagaId: "g", ExpectedRevision: 1}}}
	refused := []struct {
		name  string
		req   *orreryv1.CommandRequest
		field string
	}{
		{"expire on the ordinary path", &orreryv1.CommandRequest{Principal: input.SystemPrincipalPrefix + "silo", Batch: batchOf("c2", enqueue("m", 0), expire)}, "batch.mutations[1].expire_saga"},
		{"a due command of another Orrery principal", &orreryv1.CommandRequest{Principal: input.SystemPrincipalPrefix + "silo", Due: true, Batch: batchOf("c3", emit)}, "due"},
		{"a due command that waits", &orreryv1.CommandRequest{Principal: input.CoordinatorPrincipal, Due: true, WaitMicros: 1, Batch: batchOf("c4", emit)}, "wait_micros"},
		{"a due command that abandons", &orreryv1.CommandRequest{Principal: input.CoordinatorPrincipal, Due: true, Abandon: true, Batch: batchOf("c6", emit)}, "abandon"},
	}
	for _, tc := range refused {
		h := newHarness(t, nil)
		h.command("x", tc.req)
		a := h.answers("x")
		if len(a) != 1 || orrery.CodeOf(orrery.FromProto(a[0].GetError())) != orrery.CodeValidation || len(h.log) != 0 {
			t.Fatalf("%s: answers %v, %d entries; want one validation error and no proposal", tc.name, a, len(h.log))
		}
		if got := orrery.AsError(orrery.FromProto(a[0].GetError())).Field; got != tc.field {
			t.Fatalf("%s: refused on field %q, want %q", tc.name, got, tc.field)
		}
	}
	h := newHarness(t, nil)
	h.command("x", &orreryv1.CommandRequest{Principal: input.CoordinatorPrincipal, Due: true, Batch: batchOf("c5", emit)})
	if len(h.answers("x")) != 0 || len(h.log) != 1 {
		t.Fatalf("the coordinator's due command: answers %v, %d entries; want it proposed", h.answers("x"), len(h.log))
	}
	h = newHarness(t, nil)
	h.command("y", request("c1", emit))
	if len(h.answers("y")) != 0 || len(h.log) != 1 {
		t.Fatalf("an emit in an ordinary command: answers %v, %d entries; want it proposed", h.answers("y"), len(h.log))
	}
}

// TestRefusalsAreAnsweredAtOnce: a proposal the host refuses, a command beyond MaxPending and
// a due command from a caller's principal are answered at once, the last two without a
// proposal.
func TestRefusalsAreAnsweredAtOnce(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxPending = 1 })
	h.command("a", request("c1", enqueue("m1", 0)))
	h.command("b", request("c2", enqueue("m2", 0)))
	if a := h.answers("b"); len(a) != 1 || orrery.CodeOf(orrery.FromProto(a[0].GetError())) != orrery.CodeUnavailable || len(h.log) != 1 {
		t.Fatalf("beyond MaxPending: answers %v, %d entries", a, len(h.log))
	}
	h.commit()
	due := request("d1", enqueue("m3", 0))
	due.Due = true
	h.command("c", due)
	if a := h.answers("c"); len(a) != 1 || !strings.Contains(orrery.FromProto(a[0].GetError()).Error(), "due") || len(h.log) != 0 {
		t.Fatalf("a caller's due command: answers %v, %d entries", a, len(h.log))
	}
	h.refuse = orrery.Errorf(orrery.CodeUnavailable, "disk floor")
	h.command("d", request("c3", enqueue("m4", 0)))
	if a := h.answers("d"); len(a) != 1 || !strings.Contains(orrery.FromProto(a[0].GetError()).Error(), "disk floor") || h.e.Queued() != 0 {
		t.Fatalf("refused proposal: answers %v, queued %d", a, h.e.Queued())
	}
}

// TestHostFailedAndStopAnswerEverythingInFlight: a failed host answers what is in flight
// Unavailable; Stop answers what is in flight Unavailable and parked receives not visible,
// disarms the timers and answers nothing after.
func TestHostFailedAndStopAnswerEverythingInFlight(t *testing.T) {
	h := newHarness(t, nil)
	h.command("a", request("c1", enqueue("m1", 0)))
	h.step(HostFailed{Err: errors.New("sync failed")})
	if a := h.answers("a"); len(a) != 1 || !strings.Contains(orrery.FromProto(a[0].GetError()).Error(), "sync failed") {
		t.Fatalf("host failed: answers %v", a)
	}
	h = newHarness(t, nil)
	h.command("a", request("c1", enqueue("m1", 0)))
	h.command("w", longPoll("r1", 10*time.Second))
	h.step(Stop{})
	if a := h.answers("a"); len(a) != 1 || orrery.CodeOf(orrery.FromProto(a[0].GetError())) != orrery.CodeUnavailable {
		t.Fatalf("stop: in-flight answers %v", a)
	}
	if w := h.answers("w"); len(w) != 1 || len(w[0].GetReceipt()) != 0 || w[0].GetError() != nil {
		t.Fatalf("stop: parked answers %v, want neither receipt nor error", w)
	}
	if !h.timers[WaitTimer].IsZero() || !h.timers[HousekeepTimer].IsZero() {
		t.Fatalf("timers still armed after Stop: %v", h.timers)
	}
	h.commit()
	h.command("b", request("c2", enqueue("m2", 0)))
	if a := h.answers("a"); len(a) != 1 || len(h.log) != 0 || orrery.CodeOf(orrery.FromProto(h.answers("b")[0].GetError())) != orrery.CodeUnavailable {
		t.Fatalf("after Stop: answers %v and %v, %d entries", a, h.answers("b"), len(h.log))
	}
}

// TestALongPollLeasesOnceAMessageIsVisibleOrEndsAtItsDeadline: a long poll on an empty queue
// is parked (nothing proposed, the wait timer at its deadline); the Applied event of an
// enqueue proposes it, and its own entry's receipt, holding the message it leased, answers it.
// Another one is answered with nothing, having proposed nothing, when its deadline's timer
// fires.
func TestALongPollLeasesOnceAMessageIsVisibleOrEndsAtItsDeadline(t *testing.T) {
	h := newHarness(t, nil)
	h.command("w", longPoll("r1", 10*time.Second))
	if len(h.log) != 0 || len(h.answers("w")) != 0 || !h.timers[WaitTimer].Equal(t0.Add(10*time.Second)) {
		t.Fatalf("parked: %d entries, answers %v, wait timer %v", len(h.log), h.answers("w"), h.timers[WaitTimer])
	}
	h.command("a", request("c1", enqueue("m1", 0)))
	h.commit()
	if len(h.answers("w")) != 0 || len(h.log) != 1 || h.log[0].cmd.GetBatch().GetCommandId() != "r1" {
		t.Fatalf("after the enqueue applied: answers %v, log %v; want the long poll proposed, not answered", h.answers("w"), h.log)
	}
	if !h.timers[WaitTimer].IsZero() {
		t.Fatalf("wait timer armed at %v with nobody waiting", h.timers[WaitTimer])
	}
	h.commit()
	w := h.answers("w")
	if len(w) != 1 {
		t.Fatalf("after its entry applied: answers %v", w)
	}
	if msgs := receiptOf(t, w[0]).GetResults()[0].GetReceive().GetMessages(); len(msgs) != 1 || msgs[0].GetId() != "m1" {
		t.Fatalf("the long poll leased %v, want m1", msgs)
	}
	h.command("v", longPoll("r2", 5*time.Second))
	h.now = t0.Add(4 * time.Second)
	h.step(WaitTimerFired{}) // early: nothing to answer
	if len(h.answers("v")) != 0 {
		t.Fatalf("answered before its deadline: %v", h.answers("v"))
	}
	h.fire(WaitTimer)
	if v := h.answers("v"); len(v) != 1 || len(v[0].GetReceipt()) != 0 || v[0].GetError() != nil || !h.now.Equal(t0.Add(5*time.Second)) || len(h.log) != 0 {
		t.Fatalf("at the deadline %v: %v, %d entries; want neither receipt nor error, nothing proposed", h.now, v, len(h.log))
	}
}

// TestTheWaitTimerFollowsADelayedMessage: a long poll on a queue whose message becomes visible
// in 2 s arms the wait timer then, not at its 30 s deadline, and leases the message there.
func TestTheWaitTimerFollowsADelayedMessage(t *testing.T) {
	h := newHarness(t, nil)
	h.command("a", request("c1", enqueue("m1", 2*time.Second)))
	h.commit()
	h.command("w", longPoll("r1", 30*time.Second))
	if at := h.timers[WaitTimer]; !at.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("wait timer at %v, want when the message becomes visible", at.Sub(t0))
	}
	h.fire(WaitTimer)
	h.commit()
	w := h.answers("w")
	if len(w) != 1 {
		t.Fatalf("when the message became visible: %v", w)
	}
	if msgs := receiptOf(t, w[0]).GetResults()[0].GetReceive().GetMessages(); len(msgs) != 1 || msgs[0].GetId() != "m1" {
		t.Fatalf("the long poll leased %v, want m1", msgs)
	}
}

// TestAnAbandonedLongPollLeasesNothing: an abandon drops its parked long poll (answered with
// nothing) and is answered with nothing itself, without a proposal; a message that arrives
// afterwards leases for nobody, and a late copy of the abandoned request is answered at once,
// not parked. Another principal's abandon of the same command id drops nothing.
func TestAnAbandonedLongPollLeasesNothing(t *testing.T) {
	h := newHarness(t, nil)
	h.command("w", longPoll("r1", 10*time.Second))
	mallory := abandon("r1")
	mallory.Principal = "mallory"
	h.command("m", mallory)
	if len(h.answers("w")) != 0 || h.e.Queued() != 1 {
		t.Fatalf("another principal's abandon: answers %v, queued %d; want the long poll still parked", h.answers("w"), h.e.Queued())
	}
	h.command("x", abandon("r1"))
	w, x := h.answers("w"), h.answers("x")
	if len(w) != 1 || len(w[0].GetReceipt()) != 0 || w[0].GetError() != nil || len(x) != 1 || len(x[0].GetReceipt()) != 0 || x[0].GetError() != nil || len(h.log) != 0 {
		t.Fatalf("abandon: long poll answered %v, abandon %v, %d entries; want both answered with nothing, nothing proposed", w, x, len(h.log))
	}
	if !h.timers[WaitTimer].IsZero() || h.e.Queued() != 0 {
		t.Fatalf("after the abandon: wait timer %v, queued %d", h.timers[WaitTimer], h.e.Queued())
	}
	h.command("a", request("c1", enqueue("m1", 0)))
	h.commit()
	if len(h.log) != 0 {
		t.Fatalf("the enqueue proposed %d entries, want none", len(h.log))
	}
	h.command("late", longPoll("r1", 10*time.Second))
	if late := h.answers("late"); len(late) != 1 || len(late[0].GetReceipt()) != 0 || len(h.log) != 0 {
		t.Fatalf("a late copy of the abandoned long poll: %v, %d entries; want nothing at once", late, len(h.log))
	}
	h.now = t0.Add(31 * time.Second) // past MaxWait: the abandon is forgotten
	h.command("later", longPoll("r1", 10*time.Second))
	if len(h.log) != 1 {
		t.Fatalf("a copy after MaxWait: %d entries, want it proposed (m1 is visible)", len(h.log))
	}
}

// TestAnAbandonOfAProposedLongPollAnswersItsReceipt: an abandon that finds its long poll
// proposed, or applied, is proposed too, and answered with the long poll's receipt (the caller
// releases what it leased); a retry of a proposed long poll is proposed, not parked.
func TestAnAbandonOfAProposedLongPollAnswersItsReceipt(t *testing.T) {
	h := newHarness(t, nil)
	h.command("a", request("c1", enqueue("m1", 0), enqueue("m2", 0)))
	h.commit()
	h.command("w", longPoll("r1", 10*time.Second))
	h.command("retry", longPoll("r1", 10*time.Second))
	h.command("x", abandon("r1"))
	if len(h.log) != 3 || len(h.answers("w"))+len(h.answers("retry"))+len(h.answers("x")) != 0 {
		t.Fatalf("%d entries, answers %v %v %v; want the long poll, its retry and the abandon proposed", len(h.log), h.answers("w"), h.answers("retry"), h.answers("x"))
	}
	h.commit()
	raw := h.answers("w")[0].GetReceipt()
	if msgs := receiptOf(t, h.answers("w")[0]).GetResults()[0].GetReceive().GetMessages(); len(msgs) != 2 {
		t.Fatalf("the long poll leased %v, want m1 and m2", msgs)
	}
	if !bytes.Equal(h.answers("retry")[0].GetReceipt(), raw) || !bytes.Equal(h.answers("x")[0].GetReceipt(), raw) {
		t.Fatal("the retry or the abandon was not answered with the long poll's receipt")
	}
	h.command("y", abandon("r1"))
	h.commit()
	if y := h.answers("y"); len(y) != 1 || !bytes.Equal(y[0].GetReceipt(), raw) {
		t.Fatalf("an abandon after the apply: %v, want the receipt", y)
	}
}

// TestAnAbandonIsForAReceiveAndDoesNotWait: an abandon of a batch that is not one Receive, or
// that waits, is refused by its field at once.
func TestAnAbandonIsForAReceiveAndDoesNotWait(t *testing.T) {
	h := newHarness(t, nil)
	notReceive := request("c1", enqueue("m1", 0))
	notReceive.Abandon = true
	waits := abandon("r1")
	waits.WaitMicros = 1
	for name, tc := range map[string]struct {
		req   *orreryv1.CommandRequest
		field string
	}{"enqueue": {notReceive, "abandon"}, "waiting": {waits, "wait_micros"}} {
		h.command(name, tc.req)
		a := h.answers(name)
		if len(a) != 1 || orrery.AsError(orrery.FromProto(a[0].GetError())).Field != tc.field || len(h.log) != 0 {
			t.Fatalf("%s: %v, %d entries; want Validation of %s", name, a, len(h.log), tc.field)
		}
	}
}

// TestALongPollOfAnAnsweredCommandIsProposed: a waiting receive whose command id has a receipt
// is not parked: its entry is proposed and the inbox replays the receipt.
func TestALongPollOfAnAnsweredCommandIsProposed(t *testing.T) {
	h := newHarness(t, nil)
	h.command("a", request("r1", receive()))
	h.commit()
	h.command("w", longPoll("r1", 10*time.Second))
	if len(h.log) != 1 {
		t.Fatalf("%d entries, want the retry proposed", len(h.log))
	}
	h.commit()
	if !bytes.Equal(h.answers("w")[0].GetReceipt(), h.answers("a")[0].GetReceipt()) {
		t.Fatal("the retry's receipt differs from the original")
	}
}

// TestHousekeepingProposesOnlyWhenSomethingExpired: the housekeeping timer proposes nothing
// while no receipt has expired and re-arms HousekeepEvery later; once receipts have expired it
// proposes one Housekeep command as a system principal and re-arms when that applies.
func TestHousekeepingProposesOnlyWhenSomethingExpired(t *testing.T) {
	h := newHarness(t, nil)
	if at := h.timers[HousekeepTimer]; !at.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("housekeeping armed at %v after Open, want HousekeepEvery", at.Sub(t0))
	}
	h.command("a", request("c1", enqueue("m1", 0)))
	h.commit()
	h.fire(HousekeepTimer)
	if len(h.log) != 0 || !h.timers[HousekeepTimer].Equal(h.now.Add(10*time.Second)) {
		t.Fatalf("nothing expired: %d entries, timer at %v", len(h.log), h.timers[HousekeepTimer].Sub(h.now))
	}
	h.timers[HousekeepTimer] = t0.Add(25 * time.Hour) // past the receipt's retention
	h.fire(HousekeepTimer)
	if len(h.log) != 1 || h.log[0].principal != HousekeepingPrincipal || h.log[0].cmd.GetBatch().GetMutations()[0].GetHousekeep() == nil {
		t.Fatalf("after the retention: log %v, want one Housekeep command", h.log)
	}
	h.step(HousekeepTimerFired{}) // one is in flight: no second
	if len(h.log) != 1 {
		t.Fatalf("%d entries: a second Housekeep while one is in flight", len(h.log))
	}
	h.commit()
	if at := h.timers[HousekeepTimer]; !at.Equal(h.now.Add(10 * time.Second)) {
		t.Fatalf("after the Housekeep applied, timer at %v", at.Sub(h.now))
	}
	if len(h.answers("a")) != 1 {
		t.Fatal("the housekeeping reply went to a caller")
	}
}

// TestNextDueNoticesOnlyUndercutWhatTheCoordinatorKnows: Open tells the coordinator the next
// due instant (none); an apply writing a due entry tells it; one writing a later entry does not;
// one writing an earlier entry does.
func TestNextDueNoticesOnlyUndercutWhatTheCoordinatorKnows(t *testing.T) {
	h := newHarness(t, nil)
	if len(h.notices) != 1 || h.notices[0].GetNextDueAtUnixMicros() != 0 || h.notices[0].GetActivationEpoch() != 3 {
		t.Fatalf("notices on Open %v, want one naming no due instant", h.notices)
	}
	at := t0.Add(time.Hour)
	for i, first := range []time.Time{at, at.Add(time.Minute), at.Add(-time.Minute)} {
		h.command("a", request("c"+scheduleID(i), configure(scheduleID(i), first)))
		h.commit()
	}
	var got []int64
	for _, n := range h.notices[1:] {
		got = append(got, n.GetNextDueAtUnixMicros())
	}
	if len(got) != 2 || got[0] != at.UnixMicro() || got[1] != at.Add(-time.Minute).UnixMicro() {
		t.Fatalf("notices %v, want the first due instant and the earlier one only", got)
	}
}

// TestScanDueIsAnsweredFromTheDueHead: once a scan loaded the due head, later scans read no
// state, and see what Applied events wrote since: a new due entry and an emitted one.
func TestScanDueIsAnsweredFromTheDueHead(t *testing.T) {
	h := newHarness(t, nil)
	h.command("a", request("c1", configure(scheduleID(1), t0.Add(-time.Second))))
	h.commit()
	if r := h.scan(&orreryv1.ScanDueRequest{MaxRefs: 10}); len(r.GetRefs()) != 1 || r.GetLoggedTimeUnixMicros() <= h.state.logged {
		t.Fatalf("first scan %v", r)
	}
	if n := h.e.DueHeadEntries(); n != 1 {
		t.Fatalf("due head holds %d entries after the first scan, want 1", n)
	}
	h.command("a", request("c2", configure(scheduleID(2), t0.Add(-time.Second))))
	h.commit()
	views := h.state.views
	r := h.scan(&orreryv1.ScanDueRequest{MaxRefs: 10})
	if len(r.GetRefs()) != 2 || h.state.views != views {
		t.Fatalf("scan after a new due entry: %d refs, %d reads; want 2 refs, no read", len(r.GetRefs()), h.state.views-views)
	}
	if n := h.e.DueHeadEntries(); n != 2 {
		t.Fatalf("due head holds %d entries after a second due schedule, want 2", n)
	}
	emit := &orreryv1.CommandRequest{Principal: input.SystemPrincipalPrefix + "coordinator", Due: true, Batch: batchOf("d1",
		&orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: scheduleID(1), ExpectedGeneration: 1, Max: 32}}})}
	h.command("coordinator", emit)
	h.commit()
	if rc := receiptOf(t, h.answers("coordinator")[0]); len(rc.GetResults()[0].GetSchedule().GetEnqueuedIds()) != 1 {
		t.Fatalf("due command receipt %v", rc)
	}
	views = h.state.views
	r = h.scan(&orreryv1.ScanDueRequest{MaxRefs: 10})
	if len(r.GetRefs()) != 1 || r.GetRefs()[0].GetId() != scheduleID(2) || h.state.views != views {
		t.Fatalf("scan after the emit: refs %v, %d reads; want schedule 2 only, no read", r.GetRefs(), h.state.views-views)
	}
}

// TestTheLeaderCarriesTheZoneRulesOfWhatItConfigures: a proposed configure of a cron schedule
// in a zone carries this binary's rules of that zone (once per zone), which apply then uses;
// other commands carry none.
func TestTheLeaderCarriesTheZoneRulesOfWhatItConfigures(t *testing.T) {
	h := newHarness(t, nil)
	cronIn := func(id, zone string) *orreryv1.Mutation {
		return &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
			Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: id, Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Cron{
				Cron: &orreryv1.CronSpec{Expression: "0 22 * * *", TimeZone: zone}}}}}}}
	}
	h.command("a", request("c1", cronIn(scheduleID(1), "Europe/Berlin"), cronIn(scheduleID(2), "Europe/Berlin"), cronIn(scheduleID(3), "UTC")))
	h.command("b", request("c2", enqueue("m1", 0)))
	carried := h.log[0].cmd.GetZoneRules()
	want, _ := zonerules.Lookup("Europe/Berlin")
	if len(carried) != 1 || carried[0].GetZone() != "Europe/Berlin" || carried[0].GetVersion() != zonerules.Version || !bytes.Equal(carried[0].GetTzif(), want) {
		t.Fatalf("carried %v, want Europe/Berlin's rules of %s once", carried, zonerules.Version)
	}
	if other := h.log[1].cmd.GetZoneRules(); len(other) != 0 {
		t.Fatalf("an enqueue carried zone rules: %v", other)
	}
	h.commit()
	if rc := receiptOf(t, h.answers("a")[0]); rc.GetResults()[0].GetError() != nil || rc.GetResults()[1].GetError() != nil {
		t.Fatalf("configures refused: %v", rc)
	}
}

// TestConsistencyChecksAreProposedEveryCheckEvery: with CheckEvery set, Open arms the check
// timer; its firing proposes one CheckConsistency command as ConsistencyPrincipal (a second
// firing while it is in flight proposes nothing), whose reply goes to nobody and arms the next
// one. Without CheckEvery no timer is armed.
func TestConsistencyChecksAreProposedEveryCheckEvery(t *testing.T) {
	if at := newHarness(t, nil).timers[CheckTimer]; !at.IsZero() {
		t.Fatalf("check timer armed at %v without CheckEvery", at)
	}
	h := newHarness(t, func(c *Config) { c.CheckEvery = time.Minute })
	if at := h.timers[CheckTimer]; !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("check armed at %v after Open, want CheckEvery", at.Sub(t0))
	}
	h.fire(CheckTimer)
	if len(h.log) != 1 || h.log[0].principal != ConsistencyPrincipal || h.log[0].cmd.GetBatch().GetMutations()[0].GetCheckConsistency() == nil {
		t.Fatalf("log %v, want one CheckConsistency command", h.log)
	}
	h.step(CheckTimerFired{})
	if len(h.log) != 1 {
		t.Fatalf("%d entries: a second check while one is in flight", len(h.log))
	}
	h.commit()
	if at := h.timers[CheckTimer]; !at.Equal(h.now.Add(time.Minute)) {
		t.Fatalf("after the check applied, timer at %v", at.Sub(h.now))
	}
	if h.answeredApplied != 0 {
		t.Fatal("the check's reply counted as a caller's")
	}
}

// TestTheLeaderProposesItsLimitsWhenThePartitionsDiffer: on Open, an engine whose silo is
// configured with other limits than the partition applies under proposes them, once, as
// LimitsPrincipal; once that applies, the partition's limits are the silo's, and an engine
// opened on them proposes nothing.
func TestTheLeaderProposesItsLimitsWhenThePartitionsDiffer(t *testing.T) {
	want := input.DefaultLimits()
	want.MaxPayloadBytes = 1 << 20
	h := newHarness(t, func(c *Config) { c.Limits = want })
	if len(h.log) != 1 || h.log[0].principal != LimitsPrincipal || h.log[0].cmd.GetBatch().GetMutations()[0].GetSetLimits() == nil {
		t.Fatalf("log %v, want one SetLimits command", h.log)
	}
	if got := input.LimitsOf(h.log[0].cmd.GetBatch().GetMutations()[0].GetSetLimits().GetLimits()); got != want {
		t.Fatalf("proposed %+v, want %+v", got, want)
	}
	h.commit()
	if h.answeredApplied != 0 {
		t.Fatal("the SetLimits reply counted as a caller's")
	}
	again := New(Config{Partition: 0, Partitions: 1, Applier: h.applier, Limits: want, MaxPending: 10, MaxWaiters: 1,
		MaxWait: time.Second, HousekeepEvery: time.Second, Logger: quiet}, h.state)
	if rd := again.Step(h.now, Open{}); len(rd.Propose) != 0 {
		t.Fatalf("an engine opened on its own limits proposed %d commands", len(rd.Propose))
	}
	if same := newHarness(t, func(c *Config) { c.Limits = input.DefaultLimits() }); len(same.log) != 0 {
		t.Fatalf("an engine configured with the partition's limits proposed %v", same.log)
	}
}

// TestEachTimerKindFiresItsEvent: a driver steps the event Fired names for each timer kind
// the engine arms, and nothing for a kind it does not know.
func TestEachTimerKindFiresItsEvent(t *testing.T) {
	for kind, want := range map[TimerKind]Event{WaitTimer: WaitTimerFired{}, HousekeepTimer: HousekeepTimerFired{}, CheckTimer: CheckTimerFired{}} {
		if got := kind.Fired(); got != want {
			t.Errorf("timer kind %d fires %T, want %T", kind, got, want)
		}
	}
	if got := TimerKind(0).Fired(); got != nil {
		t.Errorf("an unknown timer kind fires %T, want nothing", got)
	}
}

// TestStagesTimeEachAnsweredCommand: a command answered after its entry applied reports its
// time from arrival (command, or due for a due command) and from its proposal (apply); a long
// poll reports its time from the moment its queue had a visible message (lease), not its
// wait; a wait that ends, and the engine's own housekeeping, report nothing.
func TestStagesTimeEachAnsweredCommand(t *testing.T) {
	h := newHarness(t, nil)
	h.command("a", request("c1", enqueue("m1", 0)))
	h.now = h.now.Add(5 * time.Millisecond)
	h.commit()
	want := []StageTiming{{StageCommand, 5 * time.Millisecond}, {StageApply, 5 * time.Millisecond}}
	if !slices.Equal(h.stages, want) {
		t.Fatalf("an enqueue's stages %v, want %v", h.stages, want)
	}
	h.command("b", request("c2", receive())) // takes m1: the long poll below waits
	h.commit()
	h.command("w", longPoll("r1", 10*time.Second))
	h.now = h.now.Add(time.Second)
	h.stages = nil
	h.command("a", request("c3", enqueue("m2", 0)))
	h.commit() // wakes the long poll, proposed now
	h.now = h.now.Add(3 * time.Millisecond)
	h.commit()
	want = []StageTiming{{StageCommand, 0}, {StageApply, 0}, {StageLease, 3 * time.Millisecond}, {StageApply, 3 * time.Millisecond}}
	if !slices.Equal(h.stages, want) {
		t.Fatalf("stages of an enqueue and the long poll it woke: %v, want %v", h.stages, want)
	}
	h.stages = nil
	h.command("v", longPoll("r2", time.Second))
	h.fire(WaitTimer)
	h.fire(HousekeepTimer)
	h.commit()
	if len(h.answers("v")) != 1 || len(h.stages) != 0 {
		t.Fatalf("a wait that ended and housekeeping: answers %v, stages %v; want no stages", h.answers("v"), h.stages)
	}
	emit := &orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: "s", ExpectedGeneration: 1, Max: 1}}}
	h.command("d", &orreryv1.CommandRequest{Principal: input.CoordinatorPrincipal, Due: true, Batch: batchOf("d1", emit)})
	h.now = h.now.Add(2 * time.Millisecond)
	h.commit()
	want = []StageTiming{{StageDue, 2 * time.Millisecond}, {StageApply, 2 * time.Millisecond}}
	if !slices.Equal(h.stages, want) {
		t.Fatalf("a due command's stages %v, want %v", h.stages, want)
	}
}

// TestAWaitedQueueIsReadOnlyWhenItsHintAllows: a parked long poll's queue is read when it
// parks; after that, applies that write other queues, or set a later visibility entry in its
// own, read nothing for it (before, every Applied event read its queue twice), and the wait
// timer follows the entry a delayed enqueue set. An enqueue visible now wakes it at once.
func TestAWaitedQueueIsReadOnlyWhenItsHintAllows(t *testing.T) {
	h := newHarness(t, nil)
	other := &orreryv1.Lane{Namespace: "acme", Queue: "other", Key: lane.GetKey()}
	h.command("w", longPoll("r1", 10*time.Second))
	parked := h.state.views
	for i := range 5 {
		h.command("a", request(fmt.Sprint("o", i), &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: other, Id: fmt.Sprint("o", i), PayloadJson: `{}`}}}))
		h.commit()
	}
	h.command("a", request("c1", enqueue("later", 2*time.Second)))
	h.commit()
	if reads := h.state.views - parked; reads != 0 {
		t.Fatalf("%d reads for the waiter across 6 applies that made nothing visible in its queue, want 0", reads)
	}
	if at, want := h.timers[WaitTimer], time.UnixMicro(h.state.logged).Add(2*time.Second); !at.Equal(want) {
		t.Fatalf("wait timer at %v, want %v, when the delayed message becomes visible", at.Sub(t0), want.Sub(t0))
	}
	h.command("a", request("c2", enqueue("now", 0)))
	h.commit()
	if len(h.log) != 1 || h.log[0].cmd.GetBatch().GetCommandId() != "r1" {
		t.Fatalf("after an enqueue visible now: log %v, want the long poll proposed", h.log)
	}
}

// TestDrainsIsOnlyForCommandsThatAddNoWork: receives, acks, releases, lease extensions,
// housekeeping and schedule pauses, cancels and deletes drain; a command with any other
// mutation, an empty one and a due command do not.
func TestDrainsIsOnlyForCommandsThatAddNoWork(t *testing.T) {
	m := func(kind any) *orreryv1.Mutation {
		mut := &orreryv1.Mutation{}
		switch k := kind.(type) {
		case *orreryv1.Receive:
			mut.Kind = &orreryv1.Mutation_Receive{Receive: k}
		case *orreryv1.Ack:
			mut.Kind = &orreryv1.Mutation_Ack{Ack: k}
		case *orreryv1.Release:
			mut.Kind = &orreryv1.Mutation_Release{Release: k}
		case *orreryv1.ExtendLease:
			mut.Kind = &orreryv1.Mutation_ExtendLease{ExtendLease: k}
		case *orreryv1.PauseSchedule:
			mut.Kind = &orreryv1.Mutation_PauseSchedule{PauseSchedule: k}
		case *orreryv1.CancelSchedule:
			mut.Kind = &orreryv1.Mutation_CancelSchedule{CancelSchedule: k}
		case *orreryv1.DeleteSchedule:
			mut.Kind = &orreryv1.Mutation_DeleteSchedule{DeleteSchedule: k}
		case *orreryv1.Housekeep:
			mut.Kind = &orreryv1.Mutation_Housekeep{Housekeep: k}
		case *orreryv1.Enqueue:
			mut.Kind = &orreryv1.Mutation_Enqueue{Enqueue: k}
		case *orreryv1.ResumeSchedule:
			mut.Kind = &orreryv1.Mutation_ResumeSchedule{ResumeSchedule: k}
		case *orreryv1.EmitOccurrences:
			mut.Kind = &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: k}
		}
		return mut
	}
	req := func(due bool, muts ...*orreryv1.Mutation) *orreryv1.CommandRequest {
		return &orreryv1.CommandRequest{Due: due, Batch: &orreryv1.Batch{CommandId: "c", Mutations: muts}}
	}
	draining := req(false, m(&orreryv1.Receive{}), m(&orreryv1.Ack{}), m(&orreryv1.Release{}), m(&orreryv1.ExtendLease{}),
		m(&orreryv1.PauseSchedule{}), m(&orreryv1.CancelSchedule{}), m(&orreryv1.DeleteSchedule{}), m(&orreryv1.Housekeep{}))
	if !Drains(draining) {
		t.Errorf("Drains(%v) = false, want true", draining)
	}
	for _, r := range []*orreryv1.CommandRequest{
		req(false),
		req(false, m(&orreryv1.Ack{}), m(&orreryv1.Enqueue{})),
		req(false, m(&orreryv1.ResumeSchedule{})),
		req(true, m(&orreryv1.EmitOccurrences{})),
	} {
		if Drains(r) {
			t.Errorf("Drains(%v) = true, want false", r)
		}
	}
}
