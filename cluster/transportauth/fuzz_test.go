package transportauth

import (
	"testing"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// FuzzClientBatch feeds arbitrary message batches from a client stream through the guard: it
// never panics, and what it lets through is in range for protoactor's decoder, of a client
// type, protobuf-encoded, never a due command, and carries the certificate's principal.
func FuzzClientBatch(f *testing.F) {
	seed := batchOf(
		envelopeOf(0, &orreryv1.CommandRequest{Principal: "mallory", Batch: &orreryv1.Batch{CommandId: "c"}}),
		envelopeOf(1, &orreryv1.InspectRequest{Principal: "system:silo"}),
		envelopeOf(2, &orreryv1.ScanDueRequest{}),
		envelopeOf(3, &orreryv1.PartitionActivationRequest{Kind: "partition"}),
	)
	data, err := proto.Marshal(seed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	g := newGuard(quiet)
	f.Fuzz(func(t *testing.T, data []byte) {
		var batch remote.MessageBatch
		if proto.Unmarshal(data, &batch) != nil {
			return
		}
		if g.filter(&batch, "alice") != nil {
			return
		}
		for _, e := range batch.Envelopes {
			if int(e.TypeId) >= len(batch.TypeNames) || int(e.Target) >= len(batch.Targets) || int(e.Sender) > len(batch.Senders) ||
				e.TypeId < 0 || e.Target < 0 || e.Sender < 0 {
				t.Fatalf("out of range envelope delivered: %v", e)
			}
			if e.SerializerId != protoSerializerID {
				t.Fatalf("serializer %d delivered", e.SerializerId)
			}
			switch batch.TypeNames[e.TypeId] {
			case commandRequestType:
				var r orreryv1.CommandRequest
				if err := proto.Unmarshal(e.MessageData, &r); err != nil || r.GetPrincipal() != "alice" || r.GetDue() {
					t.Fatalf("command request delivered as %v (%v)", &r, err)
				}
			case inspectRequestType:
				var r orreryv1.InspectRequest
				if err := proto.Unmarshal(e.MessageData, &r); err != nil || r.GetPrincipal() != "alice" {
					t.Fatalf("inspect request delivered as %v (%v)", &r, err)
				}
			case activationRequestType:
			default:
				t.Fatalf("type %q delivered", batch.TypeNames[e.TypeId])
			}
		}
	})
}

func envelopeOf(typeID int32, m proto.Message) *remote.MessageEnvelope {
	data, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return &remote.MessageEnvelope{TypeId: typeID, MessageData: data, Target: 0, Sender: 1}
}
