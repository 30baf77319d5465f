package engine

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// fuzzSeedInspections are well-formed reads of every target, for the corpus.
func fuzzSeedInspections() []*orreryv1.InspectRequest {
	ns, q := lane.GetNamespace(), lane.GetQueue()
	id := scheduleID(1)
	return []*orreryv1.InspectRequest{
		{Principal: "alice", Target: &orreryv1.InspectRequest_Schedule{Schedule: &orreryv1.InspectSchedule{Lane: lane, ScheduleId: id}}},
		{Principal: "alice", Target: &orreryv1.InspectRequest_Saga{Saga: &orreryv1.InspectSaga{Lane: lane, SagaId: id}}},
		{Principal: "alice", Target: &orreryv1.InspectRequest_Ledger{Ledger: &orreryv1.InspectLedger{Lane: lane, ScheduleId: id, MaxRecords: 3}}},
		{Principal: "alice", Target: &orreryv1.InspectRequest_Lane{Lane: &orreryv1.InspectLane{Lane: lane}}},
		{Principal: "alice", Target: &orreryv1.InspectRequest_ListSchedules{ListSchedules: &orreryv1.ListSchedules{Namespace: ns, Queue: q}}},
		{Principal: "alice", Target: &orreryv1.InspectRequest_ListSagas{ListSagas: &orreryv1.ListSagas{Namespace: ns}}},
		{Principal: "alice", Target: &orreryv1.InspectRequest_Queue{Queue: &orreryv1.InspectQueue{Namespace: ns, Queue: q}}},
		{Principal: "alice", Target: &orreryv1.InspectRequest_ListQueues{ListQueues: &orreryv1.ListQueues{}}},
		{Principal: "carol", Target: &orreryv1.InspectRequest_Partition{Partition: &orreryv1.InspectPartition{}}},
		{Principal: "alice", Target: &orreryv1.InspectRequest_Audit{Audit: &orreryv1.ReadAudit{MaxRecords: 5, After: []byte{0, 0, 0, 1}}}},
	}
}

// fuzzSeedCommands are well-formed requests a client sends, for the corpus.
func fuzzSeedCommands() []*orreryv1.CommandRequest {
	waiting := request("w1", receive())
	waiting.WaitMicros = time.Second.Microseconds()
	due := request("d1", configure(scheduleID(2), t0))
	due.Due = true
	return []*orreryv1.CommandRequest{request("c1", enqueue("m2", time.Minute)), request("c2", configure(scheduleID(3), t0.Add(time.Hour))), waiting, due}
}

// FuzzEngineRequests: arbitrary bytes decoded as the two requests a partition grain takes from
// the network, a CommandRequest and an InspectRequest, sent to a populated partition, never
// panic the engine; the command is answered (at once, or when its wait ends) and the read
// answers without an Internal error.
func FuzzEngineRequests(f *testing.F) {
	commands, inspections := fuzzSeedCommands(), fuzzSeedInspections()
	for i := range max(len(commands), len(inspections)) {
		c, err := proto.Marshal(commands[i%len(commands)])
		if err != nil {
			f.Fatal(err)
		}
		r, err := proto.Marshal(inspections[i%len(inspections)])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(c, r)
	}
	f.Fuzz(func(t *testing.T, command, inspection []byte) {
		h := newHarness(t, nil)
		h.command("alice", request("seed", enqueue("m1", 0), configure(scheduleID(1), t0)))
		h.commit()
		if req := (&orreryv1.CommandRequest{}); proto.Unmarshal(command, req) == nil {
			h.command("fuzz", req)
			h.commit()
			if !h.timers[WaitTimer].IsZero() && len(h.answers("fuzz")) == 0 {
				h.fire(WaitTimer)
				h.commit()
			}
			if len(h.answers("fuzz")) == 0 {
				t.Fatalf("the command was never answered")
			}
			if err := orrery.FromProto(h.answers("fuzz")[0].GetError()); orrery.CodeOf(err) == orrery.CodeInternal {
				t.Fatalf("the command failed Internal: %v", err)
			}
		}
		if req := (&orreryv1.InspectRequest{}); proto.Unmarshal(inspection, req) == nil {
			reply := h.e.Inspect(h.now, req)
			if err := orrery.FromProto(reply.GetError()); orrery.CodeOf(err) == orrery.CodeInternal {
				t.Fatalf("the read failed Internal: %v", err)
			}
		}
	})
}
