package batch

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

const (
	sagaID     = "16fd2706-8baf-433b-82eb-8c7fada847da"
	newSagaID  = "9b2d7c1e-5a4f-4e3b-8c6d-0f1e2d3c4b5a"
	newSchedID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	// owner creates the records the matrix acts on; carol is the caller under test.
	owner = "owner"
	carol = "carol"
)

var timeoutQueue = "timeouts"

func mutationOf(kind any) *orreryv1.Mutation {
	m := &orreryv1.Mutation{}
	switch k := kind.(type) {
	case *orreryv1.ConfigureSchedule:
		m.Kind = &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: k}
	case *orreryv1.CancelSchedule:
		m.Kind = &orreryv1.Mutation_CancelSchedule{CancelSchedule: k}
	case *orreryv1.DeleteSchedule:
		m.Kind = &orreryv1.Mutation_DeleteSchedule{DeleteSchedule: k}
	case *orreryv1.PauseSchedule:
		m.Kind = &orreryv1.Mutation_PauseSchedule{PauseSchedule: k}
	case *orreryv1.ResumeSchedule:
		m.Kind = &orreryv1.Mutation_ResumeSchedule{ResumeSchedule: k}
	case *orreryv1.TriggerSchedule:
		m.Kind = &orreryv1.Mutation_TriggerSchedule{TriggerSchedule: k}
	case *orreryv1.CompareExchangeSaga:
		m.Kind = &orreryv1.Mutation_CompareExchangeSaga{CompareExchangeSaga: k}
	case *orreryv1.ExpireSaga:
		m.Kind = &orreryv1.Mutation_ExpireSaga{ExpireSaga: k}
	case *orreryv1.Receive:
		m.Kind = &orreryv1.Mutation_Receive{Receive: k}
	case *orreryv1.Ack:
		m.Kind = &orreryv1.Mutation_Ack{Ack: k}
	case *orreryv1.Release:
		m.Kind = &orreryv1.Mutation_Release{Release: k}
	case *orreryv1.ExtendLease:
		m.Kind = &orreryv1.Mutation_ExtendLease{ExtendLease: k}
	case *orreryv1.PutGrant:
		m.Kind = &orreryv1.Mutation_PutGrant{PutGrant: k}
	case *orreryv1.RedriveDeadLetters:
		m.Kind = &orreryv1.Mutation_RedriveDeadLetters{RedriveDeadLetters: k}
	case *orreryv1.DeleteGrant:
		m.Kind = &orreryv1.Mutation_DeleteGrant{DeleteGrant: k}
	case *orreryv1.PauseQueue:
		m.Kind = &orreryv1.Mutation_PauseQueue{PauseQueue: k}
	case *orreryv1.ResumeQueue:
		m.Kind = &orreryv1.Mutation_ResumeQueue{ResumeQueue: k}
	case *orreryv1.SetQueueRetryPolicy:
		m.Kind = &orreryv1.Mutation_SetQueueRetryPolicy{SetQueueRetryPolicy: k}
	case *orreryv1.CancelMessage:
		m.Kind = &orreryv1.Mutation_CancelMessage{CancelMessage: k}
	case *orreryv1.PutCalendar:
		m.Kind = &orreryv1.Mutation_PutCalendar{PutCalendar: k}
	case *orreryv1.DeleteCalendar:
		m.Kind = &orreryv1.Mutation_DeleteCalendar{DeleteCalendar: k}
	case *orreryv1.SetQueueShare:
		m.Kind = &orreryv1.Mutation_SetQueueShare{SetQueueShare: k}
	default:
		panic(fmt.Sprintf("mutationOf(%T)", kind))
	}
	return m
}

func sagaMutation(id string, expected uint64, deadline int64) *orreryv1.CompareExchangeSaga {
	return &orreryv1.CompareExchangeSaga{Lane: lane, SagaId: id, ExpectedRevision: expected, Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING,
		StateJson: fmt.Sprintf(`{"rev":%d}`, expected), DeadlineUnixMicros: deadline,
		Timeout: &orreryv1.SagaTimeout{Queue: timeoutQueue, Template: &orreryv1.MessageTemplate{PayloadJson: `{"timeout":true}`}}}
}

// putGrant sets principal's grant in v as an Orrery principal would (nil rules: none).
func putGrant(t *testing.T, v kv.View, principal string, rules ...*orreryv1.GrantRule) {
	t.Helper()
	if err := grants.ApplyPut(v, systemTest, &orreryv1.PutGrant{Principal: principal, Rules: rules}); err != nil {
		t.Fatal(err)
	}
}

// state is every key and value of v outside the command inbox, the grants and the audit log
// (its records, denial windows and count): what a denied mutation must leave as it was.
func state(t *testing.T, v kv.Reader) string {
	t.Helper()
	var b strings.Builder
	err := v.Scan(nil, nil, func(key, value []byte) (bool, error) {
		for _, p := range [][]byte{keys.Inbox, keys.InboxExpiry, keys.ReceiptCount, keys.Grant, keys.Audit, keys.AuditDenial, keys.AuditCount} {
			if bytes.HasPrefix(key, p) {
				return true, nil
			}
		}
		fmt.Fprintf(&b, "%x=%x\n", key, value)
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// matrixDue is when the matrix's schedule and saga are due, matrixNow when its mutations
// apply (within the lease of m1).
const (
	matrixDue = t0 + 5*sec
	matrixNow = t0 + 10*sec
)

// matrixWorld is a view in which owner (every capability) created schedule scheduleID, saga
// sagaID (Waiting, due at matrixDue, its timeout in timeoutQueue) and message m1, leased with
// token.
func matrixWorld(t *testing.T) (v *kv.Memory, token string) {
	t.Helper()
	v = kv.NewMemory()
	putGrant(t, v, owner, &orreryv1.GrantRule{Namespace: grants.AnyNamespace, Capabilities: uint64(grants.All)})
	out, err := applier().ApplyBatch(v, owner, &orreryv1.Batch{CommandId: "setup", Mutations: []*orreryv1.Mutation{
		configureMutation(everySpec(matrixDue, hour), 0),
		mutationOf(sagaMutation(sagaID, 0, matrixDue)),
		enqueueMutation("m1"),
		mutationOf(&orreryv1.Receive{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Max: 1, LeaseDurationMicros: 10 * input.Minute}),
	}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range out.Receipt.GetResults() {
		if r.GetError() != nil {
			t.Fatalf("setup mutation %d: %v", i, r.GetError())
		}
	}
	return v, out.Receipt.GetResults()[3].GetReceive().GetMessages()[0].GetLease().GetToken()
}

// matrixApplier applies at the newest apply version, so that every mutation kind is taken.
func matrixApplier() Applier {
	a := applier()
	a.ApplyVersion = KnownApplyVersion
	return a
}

// TestCapabilityMutationMatrix: each mutation is denied Unauthorized, leaving the state as
// it was, to a caller that holds every capability it needs but one (in the namespace and
// queue it needs it), and allowed to a caller holding exactly what it needs. The internal
// commands are denied to a caller holding every capability and allowed to an Orrery
// principal. PolicyAdmin implies nothing else.
func TestCapabilityMutationMatrix(t *testing.T) {
	ns, jobs := lane.GetNamespace(), lane.GetQueue()
	schedulerNeeds := []need{{capability: grants.SchedulerManage, namespace: ns, queue: jobs}, {capability: grants.QueuePublish, namespace: ns, queue: jobs}}
	cases := []struct {
		name    string
		prepare func(t *testing.T, v kv.View) // runs as owner before the mutation
		build   func(token string) *orreryv1.Mutation
		needs   []need // nil: an internal command
	}{
		{"configure", nil, func(string) *orreryv1.Mutation {
			m := configureMutation(everySpec(t0+hour, hour), 0)
			m.GetConfigureSchedule().Definition.ScheduleId = newSchedID
			return m
		}, schedulerNeeds},
		{"replace", nil, func(string) *orreryv1.Mutation { return configureMutation(everySpec(t0+2*hour, hour), 1) }, schedulerNeeds},
		{"cancel", nil, func(string) *orreryv1.Mutation {
			return mutationOf(&orreryv1.CancelSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: 1})
		}, schedulerNeeds},
		{"pause", nil, func(string) *orreryv1.Mutation {
			return mutationOf(&orreryv1.PauseSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: 1})
		}, schedulerNeeds},
		{"resume", func(t *testing.T, v kv.View) {
			ownerApply(t, v, mutationOf(&orreryv1.PauseSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: 1}))
		}, func(string) *orreryv1.Mutation {
			return mutationOf(&orreryv1.ResumeSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: 2})
		}, schedulerNeeds},
		{"trigger", nil, func(string) *orreryv1.Mutation {
			return mutationOf(&orreryv1.TriggerSchedule{Lane: lane, ScheduleId: scheduleID})
		}, schedulerNeeds},
		{"delete", nil, func(string) *orreryv1.Mutation {
			return mutationOf(&orreryv1.DeleteSchedule{Lane: lane, ScheduleId: scheduleID, ExpectedRevision: 1})
		}, schedulerNeeds},
		{"create saga", nil, func(string) *orreryv1.Mutation { return mutationOf(sagaMutation(newSagaID, 0, t0+hour)) },
			[]need{{capability: grants.SagaManage, namespace: ns, queue: jobs}, {capability: grants.QueuePublish, namespace: ns, queue: timeoutQueue}}},
		{"update saga", nil, func(string) *orreryv1.Mutation { return mutationOf(sagaMutation(sagaID, 1, t0+2*hour)) },
			[]need{{capability: grants.SagaManage, namespace: ns, queue: jobs}, {capability: grants.QueuePublish, namespace: ns, queue: timeoutQueue}}},
		{"complete saga", nil, func(string) *orreryv1.Mutation {
			return mutationOf(&orreryv1.CompareExchangeSaga{Lane: lane, SagaId: sagaID, ExpectedRevision: 1, Phase: orreryv1.SagaPhase_SAGA_PHASE_COMPLETED})
		}, []need{{capability: grants.SagaManage, namespace: ns, queue: jobs}}},
		{"enqueue", nil, func(string) *orreryv1.Mutation { return enqueueMutation("m2") }, []need{{capability: grants.QueuePublish, namespace: ns, queue: jobs}}},
		{"receive", func(t *testing.T, v kv.View) { ownerApply(t, v, enqueueMutation("m2")) }, func(string) *orreryv1.Mutation {
			return mutationOf(&orreryv1.Receive{Namespace: ns, Queue: jobs, Max: 1})
		}, []need{{capability: grants.QueueConsume, namespace: ns, queue: jobs}}},
		{"ack", nil, func(token string) *orreryv1.Mutation {
			return mutationOf(&orreryv1.Ack{Lane: lane, Id: "m1", LeaseToken: token})
		}, []need{{capability: grants.QueueConsume, namespace: ns, queue: jobs}}},
		{"release", nil, func(token string) *orreryv1.Mutation {
			return mutationOf(&orreryv1.Release{Lane: lane, Id: "m1", LeaseToken: token})
		}, []need{{capability: grants.QueueConsume, namespace: ns, queue: jobs}}},
		{"extend lease", nil, func(token string) *orreryv1.Mutation {
			return mutationOf(&orreryv1.ExtendLease{Lane: lane, Id: "m1", LeaseToken: token, LeaseDurationMicros: 60 * sec})
		}, []need{{capability: grants.QueueConsume, namespace: ns, queue: jobs}}},
		{"redrive dead letters", nil, func(string) *orreryv1.Mutation { return mutationOf(&orreryv1.RedriveDeadLetters{Lane: lane}) },
			[]need{{capability: grants.QueueConsume, namespace: ns, queue: jobs}, {capability: grants.QueuePublish, namespace: ns, queue: jobs}}},
		{"pause queue", nil, func(string) *orreryv1.Mutation { return mutationOf(&orreryv1.PauseQueue{Namespace: ns, Queue: jobs}) },
			[]need{{capability: grants.QueueConsume, namespace: ns, queue: jobs}, {capability: grants.QueuePublish, namespace: ns, queue: jobs}}},
		{"resume queue", nil, func(string) *orreryv1.Mutation { return mutationOf(&orreryv1.ResumeQueue{Namespace: ns, Queue: jobs}) },
			[]need{{capability: grants.QueueConsume, namespace: ns, queue: jobs}, {capability: grants.QueuePublish, namespace: ns, queue: jobs}}},
		{"cancel message", nil, func(string) *orreryv1.Mutation { return mutationOf(&orreryv1.CancelMessage{Lane: lane, Id: "m1"}) },
			[]need{{capability: grants.QueueConsume, namespace: ns, queue: jobs}, {capability: grants.QueuePublish, namespace: ns, queue: jobs}}},
		{"set queue retry policy", nil, func(string) *orreryv1.Mutation {
			return mutationOf(&orreryv1.SetQueueRetryPolicy{Namespace: ns, Queue: jobs, Policy: &orreryv1.RetryPolicy{MaxAttempts: 2}})
		}, []need{{capability: grants.QueueConsume, namespace: ns, queue: jobs}, {capability: grants.QueuePublish, namespace: ns, queue: jobs}}},
		{"set queue share", nil, func(string) *orreryv1.Mutation {
			return mutationOf(&orreryv1.SetQueueShare{Namespace: ns, Queue: jobs, Policy: &orreryv1.QueueLimits{MaxLeased: 2}, ShareLeased: 1})
		}, []need{{capability: grants.QueueConsume, namespace: ns, queue: jobs}, {capability: grants.QueuePublish, namespace: ns, queue: jobs}}},
		// A calendar is the namespace's: SchedulerManage on the whole namespace.
		{"put calendar", nil, func(string) *orreryv1.Mutation {
			return mutationOf(&orreryv1.PutCalendar{Calendar: &orreryv1.Calendar{Namespace: ns, Name: "holidays", ExcludedDates: []string{"2026-12-25"}}})
		}, []need{{capability: grants.SchedulerManage, namespace: ns, queue: ""}}},
		{"delete calendar", func(t *testing.T, v kv.View) {
			put := &orreryv1.Batch{CommandId: "owner-calendar", Mutations: []*orreryv1.Mutation{mutationOf(&orreryv1.PutCalendar{Calendar: &orreryv1.Calendar{Namespace: ns, Name: "holidays"}})}}
			if out, err := matrixApplier().ApplyBatch(v, owner, put, t0+1); err != nil || resultErr(out.Receipt.GetResults()[0]) != nil {
				t.Fatalf("owner's calendar: %v %v", err, out)
			}
		}, func(string) *orreryv1.Mutation {
			return mutationOf(&orreryv1.DeleteCalendar{Namespace: ns, Name: "holidays"})
		},
			[]need{{capability: grants.SchedulerManage, namespace: ns, queue: ""}}},
		{"put grant", nil, func(string) *orreryv1.Mutation {
			return mutationOf(&orreryv1.PutGrant{Principal: "dave", Rules: []*orreryv1.GrantRule{{Namespace: ns, Capabilities: uint64(grants.QueueConsume)}}})
		}, []need{{capability: grants.PolicyAdmin, namespace: ns, queue: ""}}},
		{"delete grant", func(t *testing.T, v kv.View) {
			putGrant(t, v, "dave", &orreryv1.GrantRule{Namespace: ns, Queue: jobs, Capabilities: uint64(grants.QueueConsume)})
		}, func(string) *orreryv1.Mutation { return mutationOf(&orreryv1.DeleteGrant{Principal: "dave"}) },
			[]need{{capability: grants.PolicyAdmin, namespace: ns, queue: jobs}}},
		// A caller's emit (client.ProcessDue), from ApplyVersionManualEmit; before it, Orrery's
		// own principals only (TestACallerThatManagesAScheduleMayEmitIt).
		{"emit", nil, func(string) *orreryv1.Mutation { return emitMutation(1) }, schedulerNeeds},
		{"expire saga", nil, func(string) *orreryv1.Mutation {
			return mutationOf(&orreryv1.ExpireSaga{Lane: lane, SagaId: sagaID, ExpectedRevision: 1})
		}, nil},
		{"housekeep", nil, func(string) *orreryv1.Mutation { return housekeepMutation(10) }, nil},
	}
	now := matrixNow
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			world := func() (*kv.Memory, *orreryv1.Mutation) {
				v, token := matrixWorld(t)
				if c.prepare != nil {
					c.prepare(t, v)
				}
				return v, c.build(token)
			}
			denied := func(v *kv.Memory, principal string, m *orreryv1.Mutation, lacking string) {
				t.Helper()
				before, audited := state(t, v), len(auditTrail(t, v))
				out, err := matrixApplier().ApplyBatch(v, principal, &orreryv1.Batch{CommandId: "denied", Mutations: []*orreryv1.Mutation{m}}, now)
				if err != nil {
					t.Fatal(err)
				}
				got := resultErr(out.Receipt.GetResults()[0])
				if !errors.Is(got, orrery.ErrUnauthorized) {
					t.Fatalf("%s lacking %s: %v, want Unauthorized", principal, lacking, got)
				}
				if !strings.Contains(got.Error(), lacking) {
					t.Errorf("the denial %q does not name %s", got, lacking)
				}
				if after := state(t, v); after != before {
					t.Fatalf("a denied %s changed the state", c.name)
				}
				requireDenialAudited(t, v, audited, principal, "denied", now, kindName(m), got)
			}
			allowed := func(v *kv.Memory, principal string, m *orreryv1.Mutation) {
				t.Helper()
				out, err := matrixApplier().ApplyBatch(v, principal, &orreryv1.Batch{CommandId: "allowed", Mutations: []*orreryv1.Mutation{m}}, now)
				if err != nil {
					t.Fatal(err)
				}
				if r := out.Receipt.GetResults()[0]; r.GetError() != nil {
					t.Fatalf("%s holding what %s needs: %v", principal, c.name, resultErr(r))
				}
			}
			if c.needs == nil {
				v, m := world()
				putGrant(t, v, carol, &orreryv1.GrantRule{Namespace: grants.AnyNamespace, Capabilities: uint64(grants.All)})
				denied(v, carol, m, "Orrery's own principals")
				allowed(v, systemTest, m)
				return
			}
			for skip := range c.needs {
				v, m := world()
				var rules []*orreryv1.GrantRule
				for i, n := range c.needs {
					if i != skip {
						rules = append(rules, &orreryv1.GrantRule{Namespace: n.namespace, Queue: n.queue, Capabilities: uint64(n.capability)})
					}
				}
				// Every other capability, in other namespaces: no bypass, no spill-over.
				rules = append(rules, &orreryv1.GrantRule{Namespace: "elsewhere", Capabilities: uint64(grants.All)})
				putGrant(t, v, carol, rules...)
				denied(v, carol, m, c.needs[skip].capability.String())
			}
			if c.needs[0].capability != grants.PolicyAdmin {
				v, m := world()
				putGrant(t, v, carol, &orreryv1.GrantRule{Namespace: grants.AnyNamespace, Capabilities: uint64(grants.PolicyAdmin)})
				denied(v, carol, m, c.needs[0].capability.String())
			}
			v, m := world()
			var rules []*orreryv1.GrantRule
			for _, n := range c.needs {
				rules = append(rules, &orreryv1.GrantRule{Namespace: n.namespace, Queue: n.queue, Capabilities: uint64(n.capability)})
			}
			putGrant(t, v, carol, rules...)
			allowed(v, carol, m)
		})
	}
}

// ownerApply applies m as owner and fails on any error.
func ownerApply(t *testing.T, v kv.View, m *orreryv1.Mutation) *orreryv1.MutationResult {
	t.Helper()
	out, err := applier().ApplyBatch(v, owner, &orreryv1.Batch{CommandId: fmt.Sprintf("owner-%p", m), Mutations: []*orreryv1.Mutation{m}}, t0+1)
	if err != nil {
		t.Fatal(err)
	}
	if r := out.Receipt.GetResults()[0]; r.GetError() != nil {
		t.Fatalf("owner: %v", resultErr(r))
	}
	return out.Receipt.GetResults()[0]
}

// TestReplayRechecksTheCallersCurrentGrant: a stored receipt goes back only to a caller that
// may still send its command; restored, the same command id replays the byte-identical
// receipt, and nothing is applied again either way.
func TestReplayRechecksTheCallersCurrentGrant(t *testing.T) {
	v, _ := matrixWorld(t)
	putGrant(t, v, carol, &orreryv1.GrantRule{Namespace: lane.GetNamespace(), Capabilities: uint64(grants.QueuePublish | grants.QueueConsume)})
	b := &orreryv1.Batch{CommandId: "c1", Mutations: []*orreryv1.Mutation{enqueueMutation("m2"),
		mutationOf(&orreryv1.Receive{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Max: 1})}}
	first, err := applier().ApplyBatch(v, carol, b, t0+sec)
	if err != nil || len(first.Receipt.GetResults()[1].GetReceive().GetMessages()) != 1 {
		t.Fatalf("first: %v %v", first, err)
	}
	putGrant(t, v, carol, &orreryv1.GrantRule{Namespace: lane.GetNamespace(), Capabilities: uint64(grants.QueuePublish)})
	before := state(t, v)
	if _, err := applier().ApplyBatch(v, carol, b, t0+2*sec); !errors.Is(err, orrery.ErrUnauthorized) || orrery.AsError(err).Field != "mutations[1].receive" {
		t.Fatalf("replay after losing QueueConsume: %v, want Unauthorized on mutations[1].receive", err)
	}
	putGrant(t, v, carol, &orreryv1.GrantRule{Namespace: lane.GetNamespace(), Capabilities: uint64(grants.QueuePublish | grants.QueueConsume)})
	again, err := applier().ApplyBatch(v, carol, b, t0+3*sec)
	if err != nil || !again.Replayed || !bytes.Equal(again.ReceiptBytes, first.ReceiptBytes) {
		t.Fatalf("replay once restored: %v %v", again, err)
	}
	if state(t, v) != before {
		t.Fatal("a replay applied again")
	}
}
