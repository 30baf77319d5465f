package batch

import (
	"errors"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/queue"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/schedule"
)

func setRetryMutation(p *orreryv1.RetryPolicy) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_SetQueueRetryPolicy{SetQueueRetryPolicy: &orreryv1.SetQueueRetryPolicy{
		Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Policy: p}}}
}

// TestRetryPoliciesWaitForTheirApplyVersion: a command carrying SetQueueRetryPolicy, an
// enqueue's or a template's retry policy, or a release's error, backoff or policy is refused
// whole (Validation naming the part, nothing written) before apply version 19, so that no
// replica of an older release releases a failed message otherwise than the others; from
// version 19 each is taken.
func TestRetryPoliciesWaitForTheirApplyVersion(t *testing.T) {
	policy := &orreryv1.RetryPolicy{MaxAttempts: 3, InitialBackoffMicros: sec, MaxBackoffMicros: 10 * sec}
	enqueue := enqueueMutation("m2")
	enqueue.GetEnqueue().Retry = policy
	configure := configureMutation(everySpec(t0+sec, hour), 0)
	configure.GetConfigureSchedule().GetDefinition().Template.Retry = policy
	release := func(edit func(*orreryv1.Release)) func(token string) *orreryv1.Mutation {
		return func(token string) *orreryv1.Mutation {
			r := &orreryv1.Release{Lane: lane, Id: "m1", LeaseToken: token}
			edit(r)
			return &orreryv1.Mutation{Kind: &orreryv1.Mutation_Release{Release: r}}
		}
	}
	for _, c := range []struct {
		name  string
		build func(token string) *orreryv1.Mutation
		want  string
	}{
		{"set_queue_retry_policy", func(string) *orreryv1.Mutation { return setRetryMutation(policy) }, "mutations[0]: carries field 30 of orrery.v1.Mutation"},
		{"enqueue.retry", func(string) *orreryv1.Mutation { return enqueue }, "mutations[0]: carries field 9 of orrery.v1.Enqueue"},
		{"template.retry", func(string) *orreryv1.Mutation { return configure }, "mutations[0]: carries field 6 of orrery.v1.MessageTemplate"},
		{"release.error", release(func(r *orreryv1.Release) { r.Error = "boom" }), "mutations[0]: carries field 5 of orrery.v1.Release"},
		{"release.backoff", release(func(r *orreryv1.Release) { r.Backoff = true }), "mutations[0]: carries field 6 of orrery.v1.Release"},
		{"release.retry", release(func(r *orreryv1.Release) { r.Retry = policy }), "mutations[0]: carries field 7 of orrery.v1.Release"},
	} {
		v := granted(t)
		a := applier()
		a.ApplyVersion = ApplyVersionRetryPolicies
		applyAt(t, a, v, "alice", "enqueue", enqueueMutation("m1"), t0)
		token := applyAt(t, a, v, "alice", "receive", receiveMutation(), t0).GetReceive().GetMessages()[0].GetLease().GetToken()
		m := c.build(token)
		a.ApplyVersion = ApplyVersionRetryPolicies - 1
		before := v.Clone()
		_, err := a.ApplyBatch(v, "alice", &orreryv1.Batch{CommandId: "older", Mutations: []*orreryv1.Mutation{m}}, t0)
		if !errors.Is(err, orrery.ErrValidation) || !strings.Contains(err.Error(), c.want) || !v.Equal(before) {
			t.Fatalf("%s at apply version %d: %v (wrote: %v), want Validation %q and nothing written", c.name, a.ApplyVersion, err, !v.Equal(before), c.want)
		}
		a.ApplyVersion = ApplyVersionRetryPolicies
		if got := resultErr(applyAt(t, a, v, "alice", "current", m, t0)); got != nil {
			t.Fatalf("%s at apply version %d: %v", c.name, a.ApplyVersion, got)
		}
	}
}

// TestSetQueueRetryPolicyNeedsConsumeAndPublish: setting a queue's retry policy needs what a
// pause needs, QueueConsume and QueuePublish on the queue; either alone is Unauthorized.
func TestSetQueueRetryPolicyNeedsConsumeAndPublish(t *testing.T) {
	v := granted(t)
	seedGrant(t, v, "consumer", grants.QueueConsume)
	seedGrant(t, v, "publisher", grants.QueuePublish)
	seedGrant(t, v, "operator", grants.QueueConsume|grants.QueuePublish)
	a := applier()
	a.ApplyVersion = ApplyVersionRetryPolicies
	m := setRetryMutation(&orreryv1.RetryPolicy{MaxAttempts: 2})
	for _, principal := range []string{"consumer", "publisher"} {
		if got := resultErr(applyAt(t, a, v, principal, "set-"+principal, m, t0)); !errors.Is(got, orrery.ErrUnauthorized) {
			t.Fatalf("set retry policy by %s: %v, want Unauthorized", principal, got)
		}
	}
	r := applyAt(t, a, v, "operator", "set-operator", m, t0)
	if got := r.GetQueueRetryPolicy(); resultErr(r) != nil || !got.GetChanged() || got.GetRetry().GetSetBy() != "operator" {
		t.Fatalf("set retry policy by operator: %v", r)
	}
}

// TestAnOccurrenceWhoseRetriesAreExhaustedIsLedgeredAndPausesItsSchedule: an occurrence whose
// template's policy allows one attempt is taken out by its failed release in the same command:
// dead-lettered, or dropped (DROP) and ledgered DEAD_LETTERED all the same with a reason that
// says so, and a schedule with pause_on_failure pauses.
func TestAnOccurrenceWhoseRetriesAreExhaustedIsLedgeredAndPausesItsSchedule(t *testing.T) {
	for _, onExhausted := range []orreryv1.RetryExhausted{orreryv1.RetryExhausted_RETRY_EXHAUSTED_DEAD_LETTER, orreryv1.RetryExhausted_RETRY_EXHAUSTED_DROP} {
		v := granted(t)
		a := applier()
		a.ApplyVersion = ApplyVersionRetryPolicies
		configure := configureMutation(everySpec(t0+sec, hour), 0)
		def := configure.GetConfigureSchedule().GetDefinition()
		def.Template.Retry = &orreryv1.RetryPolicy{MaxAttempts: 1, OnExhausted: onExhausted}
		def.PauseOnFailure = true
		applyAt(t, a, v, "alice", "configure", configure, t0)
		b := &orreryv1.Batch{CommandId: "emit", Mutations: []*orreryv1.Mutation{emitMutation(1)}}
		if out, err := a.ApplyBatch(v, sender(b), b, t0+sec); err != nil || len(out.Receipt.GetResults()[0].GetSchedule().GetEnqueuedIds()) != 1 {
			t.Fatalf("emit: %v %v", out, err)
		}
		got := applyAt(t, a, v, "alice", "receive", receiveMutation(), t0+sec).GetReceive().GetMessages()
		if len(got) != 1 || got[0].GetRetry().GetMaxAttempts() != 1 {
			t.Fatalf("received %v, want the occurrence carrying its template's policy", got)
		}
		release := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Release{Release: &orreryv1.Release{Lane: lane, Id: got[0].GetId(),
			LeaseToken: got[0].GetLease().GetToken(), Error: "handler failed", Backoff: true}}}
		if r := applyAt(t, a, v, "alice", "release", release, t0+2*sec); resultErr(r) != nil {
			t.Fatalf("release: %v", resultErr(r))
		}
		inDLQ, err := record.Load(v, keys.MessageKey(queue.DeadLetterLane(lane), got[0].GetId()), &orreryv1.QueueMessage{})
		if err != nil {
			t.Fatal(err)
		}
		if inDLQ != (onExhausted == orreryv1.RetryExhausted_RETRY_EXHAUSTED_DEAD_LETTER) {
			t.Fatalf("%v: in the dead-letter queue %v", onExhausted, inDLQ)
		}
		rec, _, err := schedule.Load(v, lane, scheduleID)
		if err != nil || !rec.GetPaused() {
			t.Fatalf("%v: schedule paused %v (%v), want paused on failure", onExhausted, rec.GetPaused(), err)
		}
		ledger, _, err := schedule.ReadLedger(v, lane, scheduleID, schedule.LedgerQuery{FromMicros: 0, ToMicros: input.MaxInstantMicros, MaxRecords: 10})
		if err != nil || len(ledger) != 1 || ledger[0].GetOutcome() != orreryv1.LedgerOutcome_LEDGER_OUTCOME_DEAD_LETTERED {
			t.Fatalf("%v: ledger %v (%v)", onExhausted, ledger, err)
		}
		if dropped := strings.Contains(ledger[0].GetReason(), "dropped"); dropped != (onExhausted == orreryv1.RetryExhausted_RETRY_EXHAUSTED_DROP) {
			t.Fatalf("%v: ledger reason %q", onExhausted, ledger[0].GetReason())
		}
	}
}
