package engine

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// TestApplyEntryAnswersRefusalsAndReturnsOnlyPlatformFailures: an entry's command applies as
// a receipt; one the applier refuses is answered with its error and writes nothing; a due
// command's receipt comes back for the observers; a command that does not decode is a platform
// failure, returned.
func TestApplyEntryAnswersRefusalsAndReturnsOnlyPlatformFailures(t *testing.T) {
	mem := kv.NewMemory()
	if err := grants.ApplyPut(mem, HousekeepingPrincipal, grants.Everything("alice")); err != nil {
		t.Fatal(err)
	}
	applier := batch.Applier{Limits: input.DefaultLimits(), Partitions: 1}
	encode := func(cmd *orreryv1.PartitionCommand) []byte {
		b, err := proto.Marshal(cmd)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ok, err := ApplyEntry(applier, mem, "alice", encode(&orreryv1.PartitionCommand{Batch: batchOf("c1", enqueue("m1", 0))}), t0.UnixMicro())
	if err != nil || ok.Reply.GetError() != nil || len(ok.Reply.GetReceipt()) == 0 || ok.DueReceipt != nil {
		t.Fatalf("an enqueue: %+v, %v; want a receipt", ok, err)
	}
	before := mem.Len()
	refused, err := ApplyEntry(applier, mem, "alice", encode(&orreryv1.PartitionCommand{Batch: batchOf("", enqueue("m2", 0))}), t0.UnixMicro()+1)
	if err != nil || orrery.CodeOf(orrery.FromProto(refused.Reply.GetError())) != orrery.CodeValidation || mem.Len() != before {
		t.Fatalf("a command without an id: %+v, %v, %d keys (was %d); want a Validation reply and no write", refused, err, mem.Len(), before)
	}
	due, err := ApplyEntry(applier, mem, input.CoordinatorPrincipal, encode(&orreryv1.PartitionCommand{Due: true, Batch: batchOf("d1",
		&orreryv1.Mutation{Kind: &orreryv1.Mutation_ExpireSaga{ExpireSaga: &orreryv1.ExpireSaga{Lane: lane, SagaId: "0f8fad5b-d9cb-469f-a165-70867728950e", ExpectedRevision: 1}}})}), t0.UnixMicro()+2)
	if err != nil || due.DueReceipt == nil || len(due.Reply.GetReceipt()) == 0 {
		t.Fatalf("a due command: %+v, %v; want its receipt", due, err)
	}
	if _, err := ApplyEntry(applier, mem, "alice", []byte{0xff, 0xff}, t0.UnixMicro()+3); orrery.CodeOf(err) != orrery.CodeInternal {
		t.Fatalf("an entry that does not decode: %v, want an Internal error returned", err)
	}
}
