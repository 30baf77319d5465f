package batch

import (
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/kv"
)

// fataler is what the seeding helpers need of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// seedPrincipals are the principals the tests act as that get every capability.
var seedPrincipals = []string{"alice", "bob", "x", systemTest}

// systemTest is the Orrery principal the tests send internal commands as.
const systemTest = "system:test"

// sender is who the tests send b as: systemTest when it holds an internal command
// (EmitOccurrences, ExpireSaga, Housekeep), alice otherwise.
func sender(b *orreryv1.Batch) string {
	for _, m := range b.GetMutations() {
		if m.GetEmitOccurrences() != nil || m.GetExpireSaga() != nil || m.GetHousekeep() != nil {
			return systemTest
		}
	}
	return "alice"
}

// written is the number of keys in v besides the grants granted seeded.
func written(v *kv.Memory) int { return v.Len() - len(seedPrincipals) }

// granted returns an empty view in which seedPrincipals hold every capability on every
// namespace (grants.Everything).
func granted(t fataler) *kv.Memory {
	t.Helper()
	v := kv.NewMemory()
	for _, p := range seedPrincipals {
		seedGrant(t, v, grants.Everything(p).GetPrincipal(), grants.All)
	}
	return v
}

// seedGrant gives principal capabilities on every namespace in v, as a system principal would.
func seedGrant(t fataler, v kv.View, principal string, capabilities grants.Capability) {
	t.Helper()
	put := grants.Everything(principal)
	put.Rules[0].Capabilities = uint64(capabilities)
	if capabilities == 0 {
		put.Rules = nil
	}
	if err := grants.ApplyPut(v, systemTest, put); err != nil {
		t.Fatalf("seed the grant of %s: %v", principal, err)
	}
}
