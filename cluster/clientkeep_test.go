package cluster

import (
	"slices"
	"testing"
	"time"

	protocluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/orreryhq/orrery/internal/testkit"
)

// TestAClientKeepsPublishingASiloThatLeftItsView: a client publishes every silo member it saw
// live within clientKeep, sorted, and forgets one only past it.
func TestAClientKeepsPublishingASiloThatLeftItsView(t *testing.T) {
	t.Parallel()
	ids := func(ms []*protocluster.Member) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.GetId())
		}
		return out
	}
	a, b := &protocluster.Member{Id: "a"}, &protocluster.Member{Id: "b"}
	var k keptMembers
	at := time.Unix(1000, 0)
	if got := ids(k.publish([]*protocluster.Member{b, a}, at)); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("published %v", got)
	}
	if got := ids(k.publish([]*protocluster.Member{a}, at.Add(time.Minute))); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("published %v after b left the view, want it kept", got)
	}
	if got := ids(k.publish([]*protocluster.Member{a}, at.Add(time.Minute+clientKeep))); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("published %v past clientKeep, want b forgotten", got)
	}
}

// TestAClientNeverBlocksASiloItLostSight: a client whose silo memberlist declares dead drops it
// from the topology it routes by, but never from the set it publishes to protoactor, so
// protoactor never blocks the silo's member id: once the silo is live again under the same id
// (a split healed, a pause ended), its replies reach the client.
func TestAClientNeverBlocksASiloItLostSight(t *testing.T) {
	t.Parallel()
	silo, _ := startFake(t, ProviderConfig{}, "keep", false)
	client, clientTop := startFake(t, ProviderConfig{Seeds: []string{silo.GossipAddress()}}, "keep", true)
	routed := func() []string {
		var out []string
		for _, m := range client.Topology() {
			out = append(out, m.GetId())
		}
		return out
	}
	testkit.Eventually(t, 5*time.Second, "the client to see the silo", func() bool { return slices.Equal(routed(), []string{silo.MemberID()}) })
	if err := silo.Shutdown(false); err != nil { // as after SIGKILL: no leave
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the client to stop routing to the silo", func() bool { return len(routed()) == 0 })
	if ids, _ := clientTop.snapshot(); !slices.Equal(ids, []string{silo.MemberID()}) {
		t.Fatalf("the client published %v, want the silo kept: protoactor would block its id for good", ids)
	}
}
