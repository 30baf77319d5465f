package cluster

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/orreryhq/orrery/internal/testkit"
)

// TestFailedPeersAreDueUntilSeenRetiredOrPastTheHorizon: a silo declared dead is contacted
// again until it is seen live, retired, or dead for longer than failedPeerHorizon.
func TestFailedPeersAreDueUntilSeenRetiredOrPastTheHorizon(t *testing.T) {
	t.Parallel()
	var f failedPeers
	at := time.Unix(1000, 0)
	f.failed("127.0.0.1:3", 3, at)
	f.failed("127.0.0.1:1", 1, at)
	f.failed("127.0.0.1:2", 2, at.Add(time.Minute))
	if got := f.due(at.Add(time.Second), nil); !slices.Equal(got, []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}) {
		t.Fatalf("due %v, want every address, sorted", got)
	}
	f.seen("127.0.0.1:1")
	retired := func(silo uint64) bool { return silo == 3 }
	if got := f.due(at.Add(time.Second), retired); !slices.Equal(got, []string{"127.0.0.1:2"}) {
		t.Fatalf("due %v, want only the silo neither seen nor retired", got)
	}
	if got := f.due(at.Add(time.Minute+failedPeerHorizon+time.Second), nil); len(got) != 0 {
		t.Fatalf("due %v past the horizon", got)
	}
}

// splitNet cuts the memberlist traffic between two sets of gossip addresses, both ways, while
// each side's nodes still reach each other: a network split.
type splitNet struct {
	mu   sync.Mutex
	side map[string]int // gossip address → side (0 or 1)
	on   atomic.Bool
}

// cuts reports whether traffic between addresses a and b is dropped.
func (s *splitNet) cuts(a, b string) bool {
	if !s.on.Load() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sa, okA := s.side[a]
	sb, okB := s.side[b]
	return okA && okB && sa != sb
}

// splitTransport is memberlist's network transport of one node behind a splitNet: it drops
// the packets it would send to, or receives from, the other side, and refuses to dial it.
type splitTransport struct {
	*memberlist.NetTransport
	net     *splitNet
	self    string
	packets chan *memberlist.Packet
	stop    chan struct{}
}

func newSplitTransport(mc *memberlist.Config, sn *splitNet, side int) (*splitTransport, error) {
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{mc.BindAddr}})
	if err != nil {
		return nil, err
	}
	port := nt.GetAutoBindPort()
	self := net.JoinHostPort(mc.BindAddr, fmt.Sprint(port))
	sn.mu.Lock()
	sn.side[self] = side
	sn.mu.Unlock()
	s := &splitTransport{NetTransport: nt, net: sn, self: self, packets: make(chan *memberlist.Packet), stop: make(chan struct{})}
	go func() {
		for {
			select {
			case p := <-nt.PacketCh():
				if sn.cuts(self, p.From.String()) {
					continue
				}
				select {
				case s.packets <- p:
				case <-s.stop:
					return
				}
			case <-s.stop:
				return
			}
		}
	}()
	mc.Transport = s
	mc.BindPort, mc.AdvertisePort = port, port
	return s, nil
}

func (s *splitTransport) PacketCh() <-chan *memberlist.Packet { return s.packets }

func (s *splitTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return s.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (s *splitTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if s.net.cuts(s.self, a.Addr) {
		return time.Now(), nil
	}
	return s.NetTransport.WriteToAddress(b, a)
}

func (s *splitTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return s.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (s *splitTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if s.net.cuts(s.self, a.Addr) {
		return nil, errors.New("split")
	}
	return s.NetTransport.DialAddressTimeout(a, timeout)
}

// Shutdown stops the forwarding, then memberlist's listeners, draining what they received.
func (s *splitTransport) Shutdown() error {
	close(s.stop)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-s.NetTransport.PacketCh():
			case <-done:
				return
			}
		}
	}()
	err := s.NetTransport.Shutdown()
	close(done)
	return err
}

// TestTheSidesOfAHealedSplitFindEachOtherAgain: four silos, split two from two until each side
// has declared the other dead and memberlist has forgotten it (past GossipToTheDeadTime); no
// client bridges the sides and neither side is alone, so nothing in memberlist ever makes them
// contact each other again. After the heal, every member lists all four within a few push/pull
// intervals: each contacts the addresses of the silos it saw fail.
func TestTheSidesOfAHealedSplitFindEachOtherAgain(t *testing.T) {
	t.Parallel()
	sn := &splitNet{side: map[string]int{}}
	cfg := func(side int, seeds ...string) ProviderConfig {
		return ProviderConfig{Seeds: seeds, PushPullInterval: 200 * time.Millisecond,
			tuneMemberlist: func(mc *memberlist.Config) error {
				mc.GossipToTheDeadTime = 500 * time.Millisecond
				_, err := newSplitTransport(mc, sn, side)
				return err
			}}
	}
	a1, a1Top := startFake(t, cfg(0), "healed-split", false)
	seed := a1.GossipAddress()
	a2, a2Top := startFake(t, cfg(0, seed), "healed-split", false)
	b1, b1Top := startFake(t, cfg(1, seed), "healed-split", false)
	b2, b2Top := startFake(t, cfg(1, seed), "healed-split", false)
	tops := []*fakeTopology{a1Top, a2Top, b1Top, b2Top}
	sees := func(n int) bool {
		for _, top := range tops {
			if ids, _ := top.snapshot(); len(ids) != n {
				return false
			}
		}
		return true
	}
	testkit.Eventually(t, 10*time.Second, "every member to list the four", func() bool { return sees(4) })
	for _, p := range []*Provider{a1, a2, b1, b2} {
		if p.ClusterID() == 0 {
			t.Fatalf("member %s has no cluster id", p.MemberID())
		}
	}
	sn.on.Store(true)
	testkit.Eventually(t, 20*time.Second, "each side to list only its own two", func() bool { return sees(2) })
	// Past GossipToTheDeadTime: memberlist has forgotten the other side.
	time.Sleep(2 * time.Second)
	sn.on.Store(false)
	healed := time.Now()
	testkit.Eventually(t, 10*time.Second, "every member to list the four again after the heal", func() bool { return sees(4) })
	t.Logf("every member lists the four %v after the heal", time.Since(healed).Round(time.Millisecond))
}

// TestARefutedDeathNeverLeavesTheTopology: a silo memberlist declares dead stays in the
// published member set for deadGrace, and one listed again meanwhile (it refuted a death
// relayed from nodes that could not reach it) never leaves it, so protoactor never blocks its
// member id; one that stays dead leaves after the grace, and one that announced that it drains
// leaves at once.
func TestARefutedDeathNeverLeavesTheTopology(t *testing.T) {
	t.Parallel()
	p, top := startFake(t, ProviderConfig{}, "refuted", false)
	testkit.Eventually(t, 5*time.Second, "the founder to have a cluster id", func() bool { return p.ClusterID() != 0 })
	peer := func(name string, port uint16, draining bool) *memberlist.Node {
		return fakePeer(t, "refuted", p.ClusterID(), name, port, draining)
	}
	listed := func(name string) bool { return top.lists(name) }
	ev := events{p}
	x := peer("peer-x", 1, false)
	ev.NotifyJoin(x)
	testkit.Eventually(t, 5*time.Second, "the founder to list peer-x", func() bool { return listed("peer-x") })

	ev.NotifyLeave(x) // a death relayed from the other side of a split
	_, before := top.snapshot()
	for deadline := time.Now().Add(p.deadGrace() / 2); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !listed("peer-x") {
			t.Fatal("peer-x left the topology at once: protoactor would block it for good")
		}
	}
	if _, after := top.snapshot(); after-before < 3 {
		t.Fatalf("only %d publishes while peer-x was declared dead", after-before)
	}
	ev.NotifyJoin(x) // refuted
	time.Sleep(p.deadGrace())
	if !listed("peer-x") {
		t.Fatal("peer-x, listed again within the grace, left the topology after it")
	}

	ev.NotifyLeave(x) // dead for good
	testkit.Eventually(t, p.deadGrace()+2*time.Second, "peer-x to leave once the grace passed", func() bool { return !listed("peer-x") })

	y := peer("peer-y", 2, false)
	ev.NotifyJoin(y)
	testkit.Eventually(t, 5*time.Second, "the founder to list peer-y", func() bool { return listed("peer-y") })
	ev.NotifyUpdate(peer("peer-y", 2, true))
	ev.NotifyLeave(peer("peer-y", 2, true))
	testkit.Eventually(t, p.deadGrace()/2, "peer-y, which drained, to leave at once", func() bool { return !listed("peer-y") })
}

// TestARestartedSiloSupersedesItsDeadMemberAtOnce: a member declared dead leaves the topology
// as soon as a node of another name is live at its address (the silo restarted on its ports
// under a new member id), without waiting out deadGrace, whichever of the two events memberlist
// reports first; a dead member at another address still waits out the grace.
func TestARestartedSiloSupersedesItsDeadMemberAtOnce(t *testing.T) {
	t.Parallel()
	p, top := startFake(t, ProviderConfig{}, "superseded", false)
	testkit.Eventually(t, 5*time.Second, "the founder to have a cluster id", func() bool { return p.ClusterID() != 0 })
	peer := func(name string, port uint16) *memberlist.Node {
		return fakePeer(t, "superseded", p.ClusterID(), name, port, false)
	}
	listed := func(name string) bool { return top.lists(name) }
	ev := events{p}
	for _, n := range []*memberlist.Node{peer("old-a", 1), peer("other", 2), peer("old-b", 3)} {
		ev.NotifyJoin(n)
	}
	testkit.Eventually(t, 5*time.Second, "the founder to list its peers", func() bool {
		return listed("old-a") && listed("other") && listed("old-b")
	})

	// Declared dead, then its address taken by a new member id.
	start := time.Now()
	ev.NotifyLeave(peer("old-a", 1))
	ev.NotifyLeave(peer("other", 2))
	ev.NotifyJoin(peer("new-a", 1))
	// A new member id live at the address first, the old one declared dead after.
	ev.NotifyJoin(peer("new-b", 3))
	ev.NotifyLeave(peer("old-b", 3))
	testkit.Eventually(t, p.deadGrace()/2, "the dead members superseded at their addresses to leave", func() bool {
		return !listed("old-a") && !listed("old-b") && listed("new-a") && listed("new-b")
	})
	if waited := time.Since(start); waited >= p.deadGrace()/2 {
		t.Fatalf("the superseded members left after %v, the grace is %v", waited, p.deadGrace())
	}
	if !listed("other") {
		t.Fatal("a dead member whose address nobody took left before its grace")
	}
	testkit.Eventually(t, p.deadGrace()+2*time.Second, "the other dead member to leave after its grace", func() bool { return !listed("other") })
}

// fakePeer is a memberlist node of cluster clusterName and id clusterID, as memberlist's events
// report a silo: member id name, gossip and silo id both port, at 127.0.0.1.
func fakePeer(t *testing.T, clusterName string, clusterID uint64, name string, port uint16, draining bool) *memberlist.Node {
	t.Helper()
	meta, err := encodeMeta(nodeMeta{Cluster: clusterName, ID: name, Host: "127.0.0.1", Port: int(port), Kinds: []string{"echo"},
		Silo: hexID(port), ClusterID: hexID(clusterID), Draining: draining})
	if err != nil {
		t.Fatal(err)
	}
	return &memberlist.Node{Name: name, Addr: net.ParseIP("127.0.0.1"), Port: port, Meta: meta}
}
