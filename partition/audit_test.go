package partition

import (
	"errors"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

// TestAReplayToARevokedCallerIsAnsweredAndTheLogGoesOn: the replay of a stored receipt to a
// caller no longer authorized is the command's Unauthorized answer, and the partition applies
// what follows it.
func TestAReplayToARevokedCallerIsAnsweredAndTheLogGoesOn(t *testing.T) {
	h := newHarness(t, nil)
	receipt(t, h.do(command("c1", 0, enqueue("m1"))))
	revoke := &orreryv1.CommandRequest{Principal: input.SystemPrincipalPrefix + "test", Batch: &orreryv1.Batch{CommandId: "revoke-alice",
		Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_PutGrant{PutGrant: &orreryv1.PutGrant{Principal: "alice"}}}}}}
	if r := h.do(revoke); r.GetError() != nil {
		t.Fatal(r.GetError())
	}
	if r := h.do(command("c1", 0, enqueue("m1"))); !errors.Is(orrery.FromProto(r.GetError()), orrery.ErrUnauthorized) {
		t.Fatalf("the replay to a revoked caller: %v, want Unauthorized", r)
	}
	h.grantAll("alice")
	if r := h.do(command("c2", 0, enqueue("m2"))); r.GetError() != nil {
		t.Fatalf("the command after the refused replay: %v", r.GetError())
	}
}
