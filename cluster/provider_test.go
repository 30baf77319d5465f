package cluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery/internal/testkit"
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
		testkit.Eventually(t, 5*time.Second, "both to publish both members", func() bool {
			ids, _ := top.snapshot()
			return slices.Equal(ids, want)
		})
	}
}

func TestFirstNodePublishesAtOnce(t *testing.T) {
	t.Parallel()
	seedless, top := startFake(t, ProviderConfig{}, "first", false)
	waitClosed(t, seedless.Ready(), time.Second, "a seedless node to be ready")
	testkit.Eventually(t, 2*time.Second, "a self-only topology", func() bool {
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
	testkit.Eventually(t, 5*time.Second, "the client to see the member", func() bool {
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
	testkit.Eventually(t, 5*time.Second, "both members", func() bool {
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
	testkit.Eventually(t, 5*time.Second, "two members", func() bool {
		ids, _ := top.snapshot()
		return len(ids) == 2
	})
	start := time.Now()
	if err := victim.Shutdown(false); err != nil {
		t.Fatal(err)
	}
	detected := testkit.Eventually(t, 15*time.Second, "the killed peer to be dropped", func() bool {
		ids, _ := top.snapshot()
		return slices.Equal(ids, []string{survivor.MemberID()})
	})
	t.Logf("killed peer dropped after %v (shutdown took %v)", detected, time.Since(start)-detected)
}

func TestGracefulLeaveIsFast(t *testing.T) {
	t.Parallel()
	survivor, top := startFake(t, ProviderConfig{}, "leave", false)
	leaver, _ := startFake(t, ProviderConfig{Seeds: []string{survivor.GossipAddress()}}, "leave", false)
	testkit.Eventually(t, 5*time.Second, "two members", func() bool {
		ids, _ := top.snapshot()
		return len(ids) == 2
	})
	if err := leaver.Shutdown(true); err != nil {
		t.Fatal(err)
	}
	took := testkit.Eventually(t, 5*time.Second, "the leaver to be dropped", func() bool {
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

// startTrio starts three silo members of one cluster and waits until each sees all three.
func startTrio(t *testing.T, name string) ([]*Provider, []*fakeTopology) {
	t.Helper()
	a, aTop := startFake(t, ProviderConfig{}, name, false)
	b, bTop := startFake(t, ProviderConfig{Seeds: []string{a.GossipAddress()}}, name, false)
	c, cTop := startFake(t, ProviderConfig{Seeds: []string{a.GossipAddress()}}, name, false)
	ps, tops := []*Provider{a, b, c}, []*fakeTopology{aTop, bTop, cTop}
	for i, top := range tops {
		testkit.Eventually(t, 5*time.Second, fmt.Sprintf("member %d to see three members", i), func() bool {
			ids, _ := top.snapshot()
			return len(ids) == 3
		})
	}
	return ps, tops
}

// A member that the two others blocked (as after it was declared dead while paused), while its
// memberlist node is alive again, is told so by members with a majority and loses its id.
func TestLostWhenAMajorityReportsBlocked(t *testing.T) {
	t.Parallel()
	var lostCause error
	called := make(chan struct{})
	a, aTop := startFake(t, ProviderConfig{}, "lost", false)
	b, bTop := startFake(t, ProviderConfig{Seeds: []string{a.GossipAddress()}}, "lost", false)
	x, _ := startFake(t, ProviderConfig{
		Seeds:  []string{a.GossipAddress()},
		OnLost: func(cause error) { lostCause = cause; close(called) },
	}, "lost", false)
	testkit.Eventually(t, 5*time.Second, "three members", func() bool {
		ids, _ := aTop.snapshot()
		return len(ids) == 3
	})
	if isClosed(x.Lost()) || x.LostCause() != nil {
		t.Fatal("lost before anything happened")
	}
	aTop.block(x.MemberID())
	bTop.block(x.MemberID())
	waitClosed(t, x.Lost(), 5*time.Second, "the blocked member to lose its id")
	waitClosed(t, called, time.Second, "OnLost")
	if cause := x.LostCause(); cause == nil || !strings.Contains(cause.Error(), "reports that it has blocked") {
		t.Fatalf("lost cause %v does not name a report", cause)
	}
	if lostCause == nil {
		t.Fatal("OnLost got a nil cause")
	}
	for _, p := range []*Provider{a, b} {
		if isClosed(p.Lost()) || isClosed(p.Fenced()) {
			t.Fatalf("reporting member %s lost its id (%v) or was fenced (%v)", p.MemberID(), p.LostCause(), p.FenceCause())
		}
	}
	if isClosed(x.Fenced()) {
		t.Fatalf("a lost member was fenced: %v", x.FenceCause())
	}
}

// An isolated member blocked the two others while it was cut off, and they blocked it; at the
// heal every member sees the others live again. The isolated one reports its blocks, but
// without a majority: the two others keep their ids, and the isolated one loses its own,
// because it works with one of three.
func TestAMinorityNeverLosesTheMajority(t *testing.T) {
	t.Parallel()
	ps, tops := startTrio(t, "minority")
	a, b, x := ps[0], ps[1], ps[2]
	tops[2].block(a.MemberID())
	tops[2].block(b.MemberID())
	waitClosed(t, x.Lost(), 5*time.Second, "the isolated member to lose its id")
	if cause := x.LostCause(); !strings.Contains(cause.Error(), "works with 1 of the 3 live silos") {
		t.Fatalf("cause %v", cause)
	}
	// x's notices (no majority) reach a and b for a while: neither loses its id.
	time.Sleep(10 * 50 * time.Millisecond)
	for _, p := range []*Provider{a, b} {
		if isClosed(p.Lost()) {
			t.Fatalf("member %s lost its id to a minority's notice: %v", p.MemberID(), p.LostCause())
		}
	}
}

// One peer with a majority that blocked a member is enough: it never accepts that id again,
// so the member must take a new one even though it blocked nobody and the third member still
// accepts it. The peer that blocked it keeps its own id.
func TestOneMajorityPeerIsEnough(t *testing.T) {
	t.Parallel()
	ps, tops := startTrio(t, "one-peer")
	a, b, x := ps[0], ps[1], ps[2]
	tops[2].block(a.MemberID())
	waitClosed(t, a.Lost(), 5*time.Second, "a member blocked by a peer with a majority to lose its id")
	if cause := a.LostCause(); !strings.Contains(cause.Error(), x.MemberID()) || !strings.Contains(cause.Error(), "2 of the 3") {
		t.Fatalf("cause %v does not name the peer and its majority", cause)
	}
	time.Sleep(10 * 50 * time.Millisecond)
	if isClosed(x.Lost()) || isClosed(b.Lost()) {
		t.Fatalf("a member that kept a majority lost its id: %v %v", x.LostCause(), b.LostCause())
	}
}

// Two members that blocked each other each work with one of two: both lose their ids, so
// neither side stays blocked forever.
func TestATieLosesBothSides(t *testing.T) {
	t.Parallel()
	a, aTop := startFake(t, ProviderConfig{}, "tie", false)
	b, bTop := startFake(t, ProviderConfig{Seeds: []string{a.GossipAddress()}}, "tie", false)
	testkit.Eventually(t, 5*time.Second, "two members", func() bool {
		ids, _ := aTop.snapshot()
		return len(ids) == 2
	})
	aTop.block(b.MemberID())
	bTop.block(a.MemberID())
	waitClosed(t, a.Lost(), 5*time.Second, "a to lose its id")
	waitClosed(t, b.Lost(), 5*time.Second, "b to lose its id")
}

func TestLostWhenSelfBlocked(t *testing.T) {
	t.Parallel()
	p, top := startFake(t, ProviderConfig{}, "self-blocked", false)
	testkit.Eventually(t, 2*time.Second, "a topology", func() bool { _, n := top.snapshot(); return n > 0 })
	top.block(p.MemberID())
	waitClosed(t, p.Lost(), 2*time.Second, "a self-blocked member to lose its id")
	if !strings.Contains(p.LostCause().Error(), "block list") {
		t.Fatalf("cause %v", p.LostCause())
	}
	if isClosed(p.Fenced()) {
		t.Fatal("a self-blocked member was fenced")
	}
}

func TestLostWhenDroppedFromTopology(t *testing.T) {
	t.Parallel()
	p, top := startFake(t, ProviderConfig{}, "dropped", false)
	testkit.Eventually(t, 2*time.Second, "itself in the topology", func() bool {
		ids, _ := top.snapshot()
		return slices.Contains(ids, p.MemberID())
	})
	if isClosed(p.Lost()) {
		t.Fatal("lost while in the topology")
	}
	top.setDropSelf()
	waitClosed(t, p.Lost(), 2*time.Second, "a member dropped from the topology to lose its id")
	if !strings.Contains(p.LostCause().Error(), "dropped out") {
		t.Fatalf("cause %v", p.LostCause())
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

// A silo that announces it drains (before its graceful stop) is listed draining by its peers,
// by silo id; nobody else is.
func TestADrainingSiloIsAnnounced(t *testing.T) {
	t.Parallel()
	ps, _ := startTrio(t, "draining")
	a, b, x := ps[0], ps[1], ps[2]
	if got := a.DrainingSilos(); len(got) != 0 {
		t.Fatalf("draining before anyone drains: %v", got)
	}
	x.SetDraining()
	for _, p := range []*Provider{a, b} {
		testkit.Eventually(t, 5*time.Second, "the peers to list the draining silo", func() bool {
			return slices.Equal(p.DrainingSilos(), []uint64{x.SiloID()})
		})
	}
	if got := x.DrainingSilos(); len(got) != 0 {
		t.Fatalf("the draining silo lists %v, want none (itself is not a peer)", got)
	}
}
