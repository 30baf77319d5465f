package cluster

import (
	"testing"

	protocluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// TestAStrayReplyIsUnavailableNotAPanic: a reply of another type than the call waits for (a
// gossip response that reached a partition read after the silo rejoined under a new member id,
// seen in a chaos run as a panic that killed the silo) is an Unavailable error the caller
// retries; a reply of the awaited type is judged by its error as before.
func TestAStrayReplyIsUnavailableNotAPanic(t *testing.T) {
	opts := replyOptions(&PartitionTransport{}, (*orreryv1.InspectReply).GetError)
	err := opts.RetryReply(&protocluster.GossipResponse{})
	if orrery.CodeOf(err) != orrery.CodeUnavailable {
		t.Fatalf("a stray GossipResponse: %v, want Unavailable", err)
	}
	if err := opts.RetryReply(&orreryv1.InspectReply{}); err != nil {
		t.Fatalf("an InspectReply without error: %v", err)
	}
	retriable := &orreryv1.InspectReply{Error: orrery.AsError(orrery.Errorf(orrery.CodeUnavailable, "opening")).Proto()}
	if err := opts.RetryReply(retriable); err == nil {
		t.Fatal("an InspectReply with a retriable error is not retried")
	}
	final := &orreryv1.InspectReply{Error: orrery.AsError(orrery.Invalid("lane", "bad")).Proto()}
	if err := opts.RetryReply(final); err != nil {
		t.Fatalf("an InspectReply with a final error is retried: %v", err)
	}
}
