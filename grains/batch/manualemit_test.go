package batch

import (
	"errors"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/kv"
)

// TestACallerThatManagesAScheduleMayEmitIt: from ApplyVersionManualEmit, an EmitOccurrences
// from a caller holding SchedulerManage and QueuePublish on the schedule's lane emits what is
// due (client.ProcessDue), and the due coordinator's emit of the same occurrences right after
// enqueues nothing again; a caller lacking either capability is refused, naming it; before the
// version only Orrery's own principals may emit.
func TestACallerThatManagesAScheduleMayEmitIt(t *testing.T) {
	emit := func(a Applier, v *kv.Memory, principal, id string) (*orreryv1.MutationResult, error) {
		t.Helper()
		out, err := a.ApplyBatch(v, principal, &orreryv1.Batch{CommandId: id, Mutations: []*orreryv1.Mutation{emitMutation(1)}}, t0+2*hour)
		if err != nil {
			t.Fatal(err)
		}
		r := out.Receipt.GetResults()[0]
		return r, resultErr(r)
	}
	for _, version := range []uint32{ApplyVersionManualEmit - 1, ApplyVersionManualEmit} {
		v := granted(t)
		mustApply(t, v, &orreryv1.Batch{CommandId: "configure", Mutations: []*orreryv1.Mutation{configureMutation(everySpec(t0+hour, hour), 0)}}, t0)
		putGrant(t, v, "carol", &orreryv1.GrantRule{Namespace: lane.GetNamespace(), Capabilities: uint64(grants.SchedulerManage)})
		putGrant(t, v, "dan", &orreryv1.GrantRule{Namespace: lane.GetNamespace(), Capabilities: uint64(grants.QueuePublish | grants.QueueInspect)})
		a := applier()
		a.ApplyVersion = version
		for _, c := range []struct{ principal, lacking string }{{"carol", "QueuePublish"}, {"dan", "SchedulerManage"}} {
			if _, err := emit(a, v, c.principal, "by-"+c.principal); !errors.Is(err, orrery.ErrUnauthorized) ||
				(version >= ApplyVersionManualEmit && !strings.Contains(err.Error(), c.lacking)) {
				t.Fatalf("version %d: an emit by %s: %v, want Unauthorized naming %s", version, c.principal, err, c.lacking)
			}
		}
		r, err := emit(a, v, "alice", "by-alice")
		if version < ApplyVersionManualEmit {
			if !errors.Is(err, orrery.ErrUnauthorized) || !strings.Contains(err.Error(), "Orrery's own principals") {
				t.Fatalf("version %d: an emit by alice: %v, want Unauthorized (system principals only)", version, err)
			}
			continue
		}
		if err != nil || len(r.GetSchedule().GetEnqueuedIds()) != 2 {
			t.Fatalf("version %d: an emit by alice: %v, enqueued %v; want the two occurrences due", version, err, r.GetSchedule().GetEnqueuedIds())
		}
		again, err := emit(a, v, systemTest, "by-the-coordinator")
		if err != nil || len(again.GetSchedule().GetEnqueuedIds()) != 0 {
			t.Fatalf("the coordinator's emit after alice's: %v, enqueued %v; want nothing again", err, again.GetSchedule().GetEnqueuedIds())
		}
	}
}
