package batch

import (
	"bytes"
	"slices"
	"testing"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
)

// snapshot copies every key and value of v.
func snapshot(t *testing.T, v kv.Reader) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := v.Scan(nil, nil, func(k, val []byte) (bool, error) {
		out[string(k)] = string(val)
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRedriveThroughTheBatchPath dead-letters two messages, redrives them with one command,
// checks the state it leaves and that a retry of the same command id replays its receipt
// byte for byte and writes nothing, while a new command finds nothing to move.
func TestRedriveThroughTheBatchPath(t *testing.T) {
	v := granted(t)
	now := t0
	for _, id := range []string{"a", "b"} {
		enqueue := &orreryv1.Enqueue{Lane: lane, Id: id, PayloadJson: `"x"`, MaxDeliveries: 1}
		mustApply(t, v, &orreryv1.Batch{CommandId: "enqueue-" + id, Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_Enqueue{Enqueue: enqueue}}}}, now)
	}
	receive := func(id, queueName string) *orreryv1.ReceiveResult {
		m := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: lane.GetNamespace(), Queue: queueName, Max: 10}}}
		return mustApply(t, v, &orreryv1.Batch{CommandId: id, Mutations: []*orreryv1.Mutation{m}}, now).Receipt.GetResults()[0].GetReceive()
	}
	receive("receive-1", lane.GetQueue())
	now += input.DefaultLimits().DefaultLeaseMicros
	receive("receive-2", lane.GetQueue()) // both used their one delivery: dead-lettered

	redrive := &orreryv1.Batch{CommandId: "redrive-1", Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_RedriveDeadLetters{
		RedriveDeadLetters: &orreryv1.RedriveDeadLetters{Lane: lane}}}}}
	first := mustApply(t, v, redrive, now)
	if r := first.Receipt.GetResults()[0].GetRedrive(); !slices.Equal(r.GetRedrivenIds(), []string{"a", "b"}) || r.GetMore() || r.GetSkipped() != 0 {
		t.Fatalf("redrive receipt %v", first.Receipt)
	}
	dead := queue.DeadLetterLane(lane)
	if c, _ := queue.LoadCounters(v, dead); c.GetMessages() != 0 {
		t.Fatalf("dead-letter lane still counts %d", c.GetMessages())
	}
	if c, _ := queue.LoadCounters(v, lane); c.GetMessages() != 2 {
		t.Fatalf("lane counts %d", c.GetMessages())
	}
	msgs, _, err := queue.ListLane(v, lane, "", 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.GetDeliveryCount() != 0 || m.GetLease() != nil || m.GetDeadLetteredFrom() != "" || m.GetVisibleAtUnixMicros() != now {
			t.Fatalf("redriven message %v", m)
		}
	}

	state := snapshot(t, v)
	replay := mustApply(t, v, redrive, now+sec)
	if !replay.Replayed || !bytes.Equal(replay.ReceiptBytes, first.ReceiptBytes) {
		t.Fatalf("retry of redrive-1 was not replayed byte for byte: %v", replay.Receipt)
	}
	if after := snapshot(t, v); len(after) != len(state) {
		t.Fatalf("replay wrote: %d keys, had %d", len(after), len(state))
	} else {
		for k, val := range state {
			if after[k] != val {
				t.Fatalf("replay changed key %x", k)
			}
		}
	}
	redrive.CommandId = "redrive-2"
	if r := mustApply(t, v, redrive, now+sec).Receipt.GetResults()[0].GetRedrive(); len(r.GetRedrivenIds()) != 0 {
		t.Fatalf("a second redrive moved %v", r.GetRedrivenIds())
	}
	if got := receive("receive-3", lane.GetQueue()); len(got.GetMessages()) != 2 {
		t.Fatalf("received %d redriven messages", len(got.GetMessages()))
	}
}
