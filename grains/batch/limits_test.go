package batch

import (
	"errors"
	"fmt"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

// TestSetLimitsMakesThemThePartitions: until a SetLimits applies, a partition applies under
// the default limits; Orrery's own principal sets others (every one positive, or a Validation
// error naming the field and nothing written); a caller's principal may not.
func TestSetLimitsMakesThemThePartitions(t *testing.T) {
	v := granted(t)
	if lim, err := LoadLimits(v); err != nil || lim != input.DefaultLimits() {
		t.Fatalf("limits before any SetLimits: %+v, %v; want the defaults", lim, err)
	}
	want := input.DefaultLimits()
	want.MaxPayloadBytes = 1 << 20
	calls := 0
	set := func(principal string, lim input.Limits) *orreryv1.MutationResult {
		calls++
		b := &orreryv1.Batch{CommandId: fmt.Sprintf("set-%d", calls), Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_SetLimits{SetLimits: &orreryv1.SetLimits{Limits: lim.Proto()}}}}}
		a := applier()
		a.ApplyVersion = KnownApplyVersion // limits carry the priority step (apply version 20)
		out, err := a.ApplyBatch(v, principal, b, t0)
		if err != nil {
			t.Fatal(err)
		}
		return out.Receipt.GetResults()[0]
	}
	if r := set("alice", want); !errors.Is(resultErr(r), orrery.ErrUnauthorized) {
		t.Fatalf("alice's SetLimits: %v, want Unauthorized", resultErr(r))
	}
	bad := want
	bad.MaxLeaseMicros = 0
	var e *orrery.Error
	if r := set(systemTest, bad); !errors.As(resultErr(r), &e) || e.Code != orrery.CodeValidation || e.Field != "mutations[0].set_limits.limits.max_lease_micros" {
		t.Fatalf("a zero limit: %v, want a Validation error on mutations[0].set_limits.limits.max_lease_micros", resultErr(r))
	}
	if lim, _ := LoadLimits(v); lim != input.DefaultLimits() {
		t.Fatalf("a refused SetLimits wrote %+v", lim)
	}
	if r := set(systemTest, want); r.GetError() != nil {
		t.Fatalf("SetLimits: %v", resultErr(r))
	}
	if lim, err := LoadLimits(v); err != nil || lim != want {
		t.Fatalf("limits after SetLimits: %+v, %v; want %+v", lim, err, want)
	}
}

// TestRefreshZoneRulesIsOrrerysOwn: a caller's RefreshZoneRules is refused Unauthorized;
// Orrery's own principal's applies (with nothing held, it changes nothing).
func TestRefreshZoneRulesIsOrrerysOwn(t *testing.T) {
	v := granted(t)
	refresh := &orreryv1.Mutation{Kind: &orreryv1.Mutation_RefreshZoneRules{RefreshZoneRules: &orreryv1.RefreshZoneRules{Zones: []string{"Europe/Berlin"}}}}
	for i, principal := range []string{"alice", systemTest} {
		out, err := applier().ApplyBatch(v, principal, &orreryv1.Batch{CommandId: fmt.Sprintf("refresh-%d", i), Mutations: []*orreryv1.Mutation{refresh}}, t0)
		if err != nil {
			t.Fatal(err)
		}
		got := resultErr(out.Receipt.GetResults()[0])
		switch principal {
		case "alice":
			if !errors.Is(got, orrery.ErrUnauthorized) {
				t.Fatalf("alice's RefreshZoneRules: %v, want Unauthorized", got)
			}
		default:
			if got != nil {
				t.Fatalf("%s's RefreshZoneRules: %v", principal, got)
			}
		}
	}
}
