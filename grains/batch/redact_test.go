package batch

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// canary is planted in every protected field; it must never reach a caller without read.
const canary = "CANARY-4b1d"

// receiveAs applies one receive of the lane's queue as principal under command id, and
// returns the outcome and its only message.
func receiveAs(t *testing.T, v kv.View, principal, id string, now int64) (*Outcome, *orreryv1.QueueMessage) {
	t.Helper()
	b := &orreryv1.Batch{CommandId: id, Mutations: []*orreryv1.Mutation{
		mutationOf(&orreryv1.Receive{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Max: 1, LeaseDurationMicros: 30 * sec, Owner: "w1"})}}
	out, err := applier().ApplyBatch(v, principal, b, now)
	if err != nil {
		t.Fatal(err)
	}
	msgs := out.Receipt.GetResults()[0].GetReceive().GetMessages()
	if len(msgs) != 1 {
		t.Fatalf("%s received %v (%v)", principal, msgs, resultErr(out.Receipt.GetResults()[0]))
	}
	return out, msgs[0]
}

func consumer(fields ...*orreryv1.FieldPolicy) *orreryv1.GrantRule {
	return &orreryv1.GrantRule{Namespace: lane.GetNamespace(), Capabilities: uint64(grants.QueueConsume), Fields: fields}
}

// TestReceiveProjectsThroughReadPolicies: a consumer without read on the payload and headers
// roots receives the message's id, lease and delivery count with empty payload and headers,
// the receipt's bytes (sent and stored in the inbox) never hold the canary, and it acks by
// the returned token; a consumer with read receives the canary.
func TestReceiveProjectsThroughReadPolicies(t *testing.T) {
	v := kv.NewMemory()
	putGrant(t, v, owner, &orreryv1.GrantRule{Namespace: lane.GetNamespace(), Capabilities: uint64(grants.All)})
	putGrant(t, v, carol, consumer(&orreryv1.FieldPolicy{Path: "payload"}, &orreryv1.FieldPolicy{Path: "headers"}))
	enqueue := enqueueMutation("m1")
	enqueue.GetEnqueue().PayloadJson = `{"card":"` + canary + `"}`
	enqueue.GetEnqueue().HeadersJson = `{"x-secret":"` + canary + `"}`
	ownerApply(t, v, enqueue)

	out, msg := receiveAs(t, v, carol, "r1", t0+sec)
	if bytes.Contains(out.ReceiptBytes, []byte(canary)) || strings.Contains(out.Receipt.String(), canary) {
		t.Fatalf("the receipt of a caller without read holds the canary: %s", out.Receipt)
	}
	inbox := &orreryv1.InboxEntry{}
	if found, err := record.Load(v, keys.InboxKey(carol, "r1"), inbox); !found || err != nil || bytes.Contains(inbox.GetReceipt(), []byte(canary)) {
		t.Fatalf("the stored receipt: %v %v holds the canary or is missing", found, err)
	}
	if msg.GetId() != "m1" || msg.GetLease().GetToken() == "" || msg.GetDeliveryCount() != 1 || msg.GetPayloadJson() != "" || msg.GetHeadersJson() != "" {
		t.Fatalf("projected message %s", msg)
	}
	if want := []string{"headers", "payload"}; !reflect.DeepEqual(msg.GetRedactedPaths(), want) {
		t.Fatalf("redacted %q, want %q", msg.GetRedactedPaths(), want)
	}
	ack := &orreryv1.Batch{CommandId: "a1", Mutations: []*orreryv1.Mutation{mutationOf(&orreryv1.Ack{Lane: lane, Id: "m1", LeaseToken: msg.GetLease().GetToken()})}}
	if out, err := applier().ApplyBatch(v, carol, ack, t0+2*sec); err != nil || resultErr(out.Receipt.GetResults()[0]) != nil {
		t.Fatalf("ack by the projected message's token: %v %v", out, err)
	}

	// The same message, received by a consumer with read, shows the canary.
	enqueue = enqueueMutation("m2")
	enqueue.GetEnqueue().PayloadJson = `{"card":"` + canary + `"}`
	ownerApply(t, v, enqueue)
	putGrant(t, v, "erin", consumer(&orreryv1.FieldPolicy{Path: "payload", Read: true}))
	if _, msg := receiveAs(t, v, "erin", "r2", t0+3*sec); !strings.Contains(msg.GetPayloadJson(), canary) || len(msg.GetRedactedPaths()) != 0 {
		t.Fatalf("a consumer with read received %s", msg)
	}
}

// TestReplayedReceiveIsReprojected: a replayed receipt passes the caller's current read
// policies again: a read revoked since the first answer is withheld from the replay (whose
// bytes then differ only in the message's payload and redacted paths), and with the first
// policies back the replay is byte-identical to the first answer.
func TestReplayedReceiveIsReprojected(t *testing.T) {
	v := kv.NewMemory()
	putGrant(t, v, owner, &orreryv1.GrantRule{Namespace: lane.GetNamespace(), Capabilities: uint64(grants.All)})
	hideSecret := consumer(&orreryv1.FieldPolicy{Path: "payload.secret"})
	putGrant(t, v, carol, hideSecret)
	enqueue := enqueueMutation("m1")
	enqueue.GetEnqueue().PayloadJson = `{"public":"` + canary + `-public","secret":"` + canary + `"}`
	ownerApply(t, v, enqueue)

	first, msg := receiveAs(t, v, carol, "r1", t0+sec)
	if msg.GetPayloadJson() != `{"public":"`+canary+`-public"}` || !reflect.DeepEqual(msg.GetRedactedPaths(), []string{"payload.secret"}) {
		t.Fatalf("first answer %s", msg)
	}
	putGrant(t, v, carol, consumer(&orreryv1.FieldPolicy{Path: "payload"}))
	before := state(t, v)
	replay, again := receiveAs(t, v, carol, "r1", t0+2*sec)
	if !replay.Replayed || again.GetPayloadJson() != "" || bytes.Contains(replay.ReceiptBytes, []byte(canary)) {
		t.Fatalf("replay after the read was revoked: %s", again)
	}
	if want := []string{"payload", "payload.secret"}; !reflect.DeepEqual(again.GetRedactedPaths(), want) {
		t.Fatalf("replay redacted %q, want %q", again.GetRedactedPaths(), want)
	}
	// Only the payload and the redacted paths differ from the first answer.
	again.PayloadJson, again.RedactedPaths = msg.GetPayloadJson(), msg.GetRedactedPaths()
	if encoded, err := record.Marshal(replay.Receipt); err != nil || !bytes.Equal(encoded, first.ReceiptBytes) {
		t.Fatalf("the replay differs elsewhere: %v", err)
	}
	putGrant(t, v, carol, hideSecret)
	restored, _ := receiveAs(t, v, carol, "r1", t0+3*sec)
	if !restored.Replayed || !bytes.Equal(restored.ReceiptBytes, first.ReceiptBytes) {
		t.Fatal("the replay under the first policies is not the first answer")
	}
	if state(t, v) != before {
		t.Fatal("a replay wrote")
	}
}
