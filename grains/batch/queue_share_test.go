package batch

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

func setQueueShareMutation(maxLeased, shareLeased uint32) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_SetQueueShare{SetQueueShare: &orreryv1.SetQueueShare{
		Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Policy: &orreryv1.QueueLimits{MaxLeased: maxLeased}, ShareLeased: shareLeased}}}
}

// TestSetQueueShareWaitsForItsApplyVersion: a command carrying SetQueueShare is refused whole
// before apply version 22 (Validation naming the mutation's field number, nothing written) by
// the release that gates it and, with the same error, by an older release to which the field
// is unknown; from version 22 on it is taken, and a receive through the batch path leases at
// most the share.
func TestSetQueueShareWaitsForItsApplyVersion(t *testing.T) {
	const want = "mutations[1]: carries field 31 of orrery.v1.Mutation"
	v := granted(t)
	for _, id := range []string{"m1", "m2", "m3"} {
		applyOne(t, v, "enqueue-"+id, enqueueMutation(id), t0)
	}
	b := &orreryv1.Batch{CommandId: "older", Mutations: []*orreryv1.Mutation{enqueueMutation("m4"), setQueueShareMutation(2, 1)}}
	a := applier()
	a.ApplyVersion = ApplyVersionQueueShare - 1
	before := v.Clone()
	_, newerErr := a.ApplyBatch(v, "alice", b, t0)
	if !errors.Is(newerErr, orrery.ErrValidation) || !strings.Contains(newerErr.Error(), want) || !v.Equal(before) {
		t.Fatalf("set_queue_share at apply version %d: %v (wrote: %v), want Validation %q and nothing written", a.ApplyVersion, newerErr, !v.Equal(before), want)
	}
	encoded, err := proto.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	older := olderBatch(t, encoded, map[string][]string{"Mutation": {"set_queue_share"}}, nil)
	if olderErr := wireError(older, ApplyVersionQueueShare-1); olderErr == nil || olderErr.Error() != newerErr.Error() {
		t.Fatalf("an older release that does not know set_queue_share:\n%v\nthe release that gates it:\n%v", olderErr, newerErr)
	}
	a.ApplyVersion = ApplyVersionQueueShare
	r := applyAt(t, a, v, "alice", "share", setQueueShareMutation(2, 1), t0+1)
	if s := r.GetQueueShare(); r.GetError() != nil || !s.GetChanged() || s.GetShare().GetShareLeased() != 1 || s.GetShare().GetSetBy() != "alice" {
		t.Fatalf("set_queue_share at apply version %d: %v", a.ApplyVersion, r)
	}
	if r := applyAt(t, a, v, "alice", "receive-1", receiveMutation(), t0+2); len(r.GetReceive().GetMessages()) != 1 {
		t.Fatalf("a receive under a share of 1: %v", r)
	}
	if r := applyAt(t, a, v, "alice", "receive-2", receiveMutation(), t0+3); r.GetError() != nil || len(r.GetReceive().GetMessages()) != 0 {
		t.Fatalf("a receive at the share: %v", r)
	}
}

// TestASiloSetsSharesWithoutAGrant: one of Orrery's own principals (a silo's rebalancer) sets
// a share without a grant; a principal without one is Unauthorized.
func TestASiloSetsSharesWithoutAGrant(t *testing.T) {
	v := kv.NewMemory()
	a := applier()
	a.ApplyVersion = ApplyVersionQueueShare
	if got := resultErr(applyAt(t, a, v, input.SystemPrincipalPrefix+"silo", "rebalance", setQueueShareMutation(2, 1), t0)); got != nil {
		t.Fatalf("a silo's share: %v", got)
	}
	if got := resultErr(applyAt(t, a, v, "mallory", "share", setQueueShareMutation(2, 2), t0+1)); !errors.Is(got, orrery.ErrUnauthorized) {
		t.Fatalf("a share by a principal without a grant: %v, want Unauthorized", got)
	}
}
