package cluster

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// unreachableSeed is a loopback port nothing listens on (privileged, so no test binds it).
const unreachableSeed = "127.0.0.1:1"

// TestGateStaysClosedUntilJoin: a founding silo whose seeds are unreachable publishes nothing;
// a second founding silo joining it completes BootstrapExpect 2, and both publish both.
func TestGateStaysClosedUntilJoin(t *testing.T) {
	t.Parallel()
	lonely, top := startFake(t, ProviderConfig{Seeds: []string{unreachableSeed}, BootstrapExpect: 2}, "gate", false)
	time.Sleep(300 * time.Millisecond) // six resync intervals: long enough to have published
	if isClosed(lonely.Ready()) {
		t.Fatal("a node whose seeds are unreachable reported ready")
	}
	if ids, n := top.snapshot(); n != 0 {
		t.Fatalf("a node that has not joined published %d topologies, last %v", n, ids)
	}

	// Someone joining the lonely node opens its gate.
	joiner, joinerTop := startFake(t, ProviderConfig{Seeds: []string{lonely.GossipAddress()}, BootstrapExpect: 2}, "gate", false)
	waitClosed(t, joiner.Ready(), 5*time.Second, "the joiner to be ready")
	waitClosed(t, lonely.Ready(), 5*time.Second, "the joined node to be ready")
	want := []string{lonely.MemberID(), joiner.MemberID()}
	slices.Sort(want)
	for _, top := range []*fakeTopology{top, joinerTop} {
		waitFor(t, 5*time.Second, "both to publish both members", func() bool {
			ids, _ := top.snapshot()
			return slices.Equal(ids, want)
		})
	}
}

func TestFirstNodePublishesAtOnce(t *testing.T) {
	t.Parallel()
	seedless, top := startFake(t, ProviderConfig{}, "first", false)
	waitClosed(t, seedless.Ready(), time.Second, "a seedless node to be ready")
	waitFor(t, 2*time.Second, "a self-only topology", func() bool {
		ids, _ := top.snapshot()
		return slices.Equal(ids, []string{seedless.MemberID()})
	})

	// BootstrapExpect 1 creates the cluster whatever the seeds; seeds naming the node itself
	// are ignored.
	boot, _ := startFake(t, ProviderConfig{Seeds: []string{unreachableSeed}, BootstrapExpect: 1}, "first", false)
	waitClosed(t, boot.Ready(), time.Second, "a bootstrap node to be ready")
	if seedless.ClusterID() == 0 || boot.ClusterID() == 0 || seedless.ClusterID() == boot.ClusterID() {
		t.Fatalf("two founders that never met: cluster ids %016x and %016x, want two different non-zero ids", seedless.ClusterID(), boot.ClusterID())
	}

	if got := otherSeeds([]string{"127.0.0.1:7000", " 10.0.0.2:7000 ", "localhost:7000", "", "127.0.0.1:7001"}, "127.0.0.1:7000", "127.0.0.1", "localhost"); !slices.Equal(got, []string{"10.0.0.2:7000", "127.0.0.1:7001"}) {
		t.Fatalf("otherSeeds = %v", got)
	}
}

func TestClientsAreNotMembers(t *testing.T) {
	t.Parallel()
	member, memberTop := startFake(t, ProviderConfig{}, "clients", false)
	client, clientTop := startFake(t, ProviderConfig{Seeds: []string{member.GossipAddress()}}, "clients", true)
	waitClosed(t, client.Ready(), 5*time.Second, "the client to join")
	only := []string{member.MemberID()}
	waitFor(t, 5*time.Second, "the client to see the member", func() bool {
		ids, _ := clientTop.snapshot()
		return slices.Equal(ids, only)
	})
	// The member has seen the client join (memberlist push/pull is symmetric); its topology
	// must still be itself only.
	time.Sleep(200 * time.Millisecond)
	if ids, _ := memberTop.snapshot(); !slices.Equal(ids, only) {
		t.Fatalf("member published %v, want %v", ids, only)
	}
	if n := len(member.ml.Members()); n != 2 {
		t.Fatalf("member's memberlist has %d nodes, want 2 (itself and the client)", n)
	}
}

func TestOtherClustersAreIgnored(t *testing.T) {
	t.Parallel()
	a, _ := startFake(t, ProviderConfig{}, "cluster-a", false)
	// Different cluster name means a different memberlist label: the join itself fails.
	b, _ := startFake(t, ProviderConfig{Seeds: []string{a.GossipAddress()}}, "cluster-b", false)
	time.Sleep(300 * time.Millisecond)
	if isClosed(b.Ready()) {
		t.Fatal("a node joined a cluster with another name")
	}
}

func TestEncryptedGossip(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef")
	a, _ := startFake(t, ProviderConfig{SecretKey: key}, "secret", false)
	b, top := startFake(t, ProviderConfig{SecretKey: key, Seeds: []string{a.GossipAddress()}}, "secret", false)
	waitClosed(t, b.Ready(), 5*time.Second, "a node with the key to join")
	waitFor(t, 5*time.Second, "both members", func() bool {
		ids, _ := top.snapshot()
		return len(ids) == 2
	})
	wrong, _ := startFake(t, ProviderConfig{SecretKey: []byte("fedcba9876543210"), Seeds: []string{a.GossipAddress()}}, "secret", false)
	time.Sleep(300 * time.Millisecond)
	if isClosed(wrong.Ready()) {
		t.Fatal("a node with the wrong key joined")
	}
	if _, err := NewProvider(ProviderConfig{SecretKey: []byte("short")}); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
}

// TestDetectsKilledPeer measures the default failure detection on loopback: a peer whose
// memberlist stops without leaving (as after SIGKILL) must vanish from the topology.
func TestDetectsKilledPeer(t *testing.T) {
	t.Parallel()
	survivor, top := startFake(t, ProviderConfig{}, "detect", false)
	victim, _ := startFake(t, ProviderConfig{Seeds: []string{survivor.GossipAddress()}}, "detect", false)
	waitFor(t, 5*time.Second, "two members", func() bool {
		ids, _ := top.snapshot()
		return len(ids) == 2
	})
	start := time.Now()
	if err := victim.Shutdown(false); err != nil {
		t.Fatal(err)
	}
	detected := waitFor(t, 15*time.Second, "the killed peer to be dropped", func() bool {
		ids, _ := top.snapshot()
		return slices.Equal(ids, []string{survivor.MemberID()})
	})
	t.Logf("killed peer dropped after %v (shutdown took %v)", detected, time.Since(start)-detected)
}

func TestGracefulLeaveIsFast(t *testing.T) {
	t.Parallel()
	survivor, top := startFake(t, ProviderConfig{}, "leave", false)
	leaver, _ := startFake(t, ProviderConfig{Seeds: []string{survivor.GossipAddress()}}, "leave", false)
	waitFor(t, 5*time.Second, "two members", func() bool {
		ids, _ := top.snapshot()
		return len(ids) == 2
	})
	if err := leaver.Shutdown(true); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, 5*time.Second, "the leaver to be dropped", func() bool {
		ids, _ := top.snapshot()
		return len(ids) == 1
	})
	if took > time.Second {
		t.Fatalf("a graceful leave took %v to propagate", took)
	}
	if err := leaver.Shutdown(true); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
}

func TestFenceWhenPeerReportsBlocked(t *testing.T) {
	t.Parallel()
	var fencedCause error
	called := make(chan struct{})
	a, aTop := startFake(t, ProviderConfig{}, "fence", false)
	b, _ := startFake(t, ProviderConfig{
		Seeds:    []string{a.GossipAddress()},
		OnFenced: func(cause error) { fencedCause = cause; close(called) },
	}, "fence", false)
	waitFor(t, 5*time.Second, "two members", func() bool {
		ids, _ := aTop.snapshot()
		return len(ids) == 2
	})
	if isClosed(b.Fenced()) || b.FenceCause() != nil {
		t.Fatal("fenced before anything happened")
	}
	// a's protoactor blocks b (as after b was declared dead while paused) while b's memberlist
	// node is still alive: a must tell b, and b must fence itself.
	aTop.block(b.MemberID())
	waitClosed(t, b.Fenced(), 5*time.Second, "the blocked member to fence itself")
	waitClosed(t, called, time.Second, "OnFenced")
	if cause := b.FenceCause(); cause == nil || !strings.Contains(cause.Error(), a.MemberID()) {
		t.Fatalf("fence cause %v does not name the reporting member %s", cause, a.MemberID())
	}
	if fencedCause == nil {
		t.Fatal("OnFenced got a nil cause")
	}
	if isClosed(a.Fenced()) {
		t.Fatalf("the reporting member fenced itself: %v", a.FenceCause())
	}
}

func TestFenceWhenSelfBlocked(t *testing.T) {
	t.Parallel()
	p, top := startFake(t, ProviderConfig{}, "self-blocked", false)
	waitFor(t, 2*time.Second, "a topology", func() bool { _, n := top.snapshot(); return n > 0 })
	top.block(p.MemberID())
	waitClosed(t, p.Fenced(), 2*time.Second, "a self-blocked member to fence itself")
	if !strings.Contains(p.FenceCause().Error(), "block list") {
		t.Fatalf("cause %v", p.FenceCause())
	}
}

func TestFenceWhenDroppedFromTopology(t *testing.T) {
	t.Parallel()
	p, top := startFake(t, ProviderConfig{}, "dropped", false)
	waitFor(t, 2*time.Second, "itself in the topology", func() bool {
		ids, _ := top.snapshot()
		return slices.Contains(ids, p.MemberID())
	})
	if isClosed(p.Fenced()) {
		t.Fatal("fenced while in the topology")
	}
	top.setDropSelf()
	waitClosed(t, p.Fenced(), 2*time.Second, "a member dropped from the topology to fence itself")
	if !strings.Contains(p.FenceCause().Error(), "dropped out") {
		t.Fatalf("cause %v", p.FenceCause())
	}
}

func TestShutdownBeforeStart(t *testing.T) {
	t.Parallel()
	p, err := NewProvider(ProviderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(true); err != nil {
		t.Fatal(err)
	}
	if p.GossipAddress() != "" || p.MemberID() != "" {
		t.Fatal("an unstarted provider reports an address or id")
	}
}
