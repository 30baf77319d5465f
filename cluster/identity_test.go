package cluster

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/orreryhq/orrery/internal/testkit"
)

// gossipPort returns a loopback port whose TCP and UDP twins were free a moment ago, below the
// usual ephemeral range so that no outgoing connection takes it meanwhile.
func gossipPort(t *testing.T) int {
	t.Helper()
	for range 200 {
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

// recorded collects the cluster ids a provider's OnClusterID was called with.
type recorded struct {
	mu     sync.Mutex
	ids    []uint64
	minted int
}

func (r *recorded) record(id uint64, minted bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, id)
	if minted {
		r.minted++
	}
	return nil
}

func (r *recorded) mints() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.minted
}

func (r *recorded) get() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ids)
}

// TestFoundersFormOneCluster: three silos with empty stores started at the same moment, each
// with the same seed list (all three) and BootstrapExpect 3, form one cluster: one cluster id,
// minted by one of them and recorded by each, and every topology holds all three. Five rounds.
func TestFoundersFormOneCluster(t *testing.T) {
	t.Parallel()
	for round := range 5 {
		name := fmt.Sprintf("founders-%d", round)
		var seeds []string
		ports := make([]int, 3)
		for i := range ports {
			ports[i] = gossipPort(t)
			seeds = append(seeds, fmt.Sprintf("127.0.0.1:%d", ports[i]))
		}
		providers := make([]*Provider, 3)
		tops := make([]*fakeTopology, 3)
		envs := make([]*environment, 3)
		records := make([]*recorded, 3)
		for i := range providers {
			records[i] = &recorded{}
			providers[i], tops[i], envs[i] = newFake(t, ProviderConfig{
				BindPort: ports[i], Seeds: seeds, BootstrapExpect: 3, OnClusterID: records[i].record,
			}, name, false)
		}
		release := make(chan struct{})
		errs := make(chan error, 3)
		for i := range providers {
			go func() {
				<-release
				errs <- providers[i].start(envs[i])
			}()
		}
		close(release)
		for range providers {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: start: %v", round, err)
			}
		}
		for i, p := range providers {
			waitClosed(t, p.Ready(), 15*time.Second, fmt.Sprintf("round %d: founder %d to be ready", round, i))
		}
		id := providers[0].ClusterID()
		var want []string
		mints := 0
		for _, r := range records {
			mints += r.mints()
		}
		if mints != 1 {
			t.Fatalf("round %d: %d founders were told they minted the cluster id, want exactly 1", round, mints)
		}
		for i, p := range providers {
			want = append(want, p.MemberID())
			if p.ClusterID() != id || id == 0 {
				t.Fatalf("round %d: founder %d is in cluster %016x, founder 0 in %016x", round, i, p.ClusterID(), id)
			}
			if got := records[i].get(); !slices.Equal(got, []uint64{id}) {
				t.Fatalf("round %d: founder %d recorded cluster ids %x, want once %016x", round, i, got, id)
			}
		}
		slices.Sort(want)
		for i, top := range tops {
			testkit.Eventually(t, 10*time.Second, fmt.Sprintf("round %d: founder %d to publish all three", round, i), func() bool {
				ids, _ := top.snapshot()
				return slices.Equal(ids, want)
			})
		}
		minters := 0
		for _, p := range providers {
			_ = p.Shutdown(false)
			if p.form.minted { // the run goroutine has stopped
				minters++
			}
		}
		if minters != 1 {
			t.Fatalf("round %d: %d founders minted a cluster id, want 1", round, minters)
		}
		t.Logf("round %d: cluster %s", round, FormatID(id))
	}
}

// TestStoredClusterIDRefusesAnotherCluster: a silo whose store belongs to cluster X, whose
// seeds belong to cluster A, refuses to join, naming both ids; A never lists it.
func TestStoredClusterIDRefusesAnotherCluster(t *testing.T) {
	t.Parallel()
	a, aTop := startFake(t, ProviderConfig{}, "refuse", false)
	b, _ := startFake(t, ProviderConfig{Seeds: []string{a.GossipAddress()}}, "refuse", false)
	waitClosed(t, b.Ready(), 10*time.Second, "b to join a")
	const stored = 0x5707ed0000000001
	rec := &recorded{}
	x, xTop := startFake(t, ProviderConfig{Seeds: []string{a.GossipAddress()}, ClusterID: stored, OnClusterID: rec.record}, "refuse", false)
	waitClosed(t, x.Refused(), 10*time.Second, "the silo of another cluster to refuse")
	cause := x.RefuseCause()
	for _, want := range []string{"belongs to cluster " + FormatID(stored), "cluster " + FormatID(a.ClusterID()) + ": members"} {
		if !strings.Contains(cause.Error(), want) {
			t.Errorf("refusal %q lacks %q", cause, want)
		}
	}
	if isClosed(x.Ready()) || x.ClusterID() != stored || len(rec.get()) != 0 {
		t.Fatalf("the refused silo: ready %v, cluster %016x, recorded %x", isClosed(x.Ready()), x.ClusterID(), rec.get())
	}
	if ids, n := xTop.snapshot(); n != 0 {
		t.Fatalf("the refused silo published %v", ids)
	}
	want := []string{a.MemberID(), b.MemberID()}
	slices.Sort(want)
	time.Sleep(200 * time.Millisecond) // four resync intervals with x live in a's memberlist
	if ids, _ := aTop.snapshot(); !slices.Equal(ids, want) {
		t.Fatalf("a publishes %v, want %v (not the silo of another cluster)", ids, want)
	}
}

// TestRestartedSiloRejoins: a silo restarted with its stored silo and cluster ids and the same
// seeds (a new member id) rejoins without recording a cluster id again, and its peers list its
// silo id under the new member id.
func TestRestartedSiloRejoins(t *testing.T) {
	t.Parallel()
	a, aTop := startFake(t, ProviderConfig{}, "restart", false)
	b, _ := startFake(t, ProviderConfig{Seeds: []string{a.GossipAddress()}}, "restart", false)
	seeds := []string{a.GossipAddress(), b.GossipAddress()}
	const siloID = 0x00c0ffee00000001
	rec := &recorded{}
	c, _ := startFake(t, ProviderConfig{Seeds: seeds, SiloID: siloID, OnClusterID: rec.record}, "restart", false)
	waitClosed(t, c.Ready(), 10*time.Second, "c to join")
	clusterID := a.ClusterID()
	if c.ClusterID() != clusterID || b.ClusterID() != clusterID || !slices.Equal(rec.get(), []uint64{clusterID}) {
		t.Fatalf("cluster ids a %016x b %016x c %016x, c recorded %x", clusterID, b.ClusterID(), c.ClusterID(), rec.get())
	}
	testkit.Eventually(t, 10*time.Second, "a to list c's silo id", func() bool { return a.SiloIDs()[c.MemberID()] == siloID })

	if err := c.Shutdown(false); err != nil { // as after SIGKILL: no leave
		t.Fatal(err)
	}
	again := &recorded{}
	restarted, _ := startFake(t, ProviderConfig{Seeds: seeds, SiloID: siloID, ClusterID: clusterID, OnClusterID: again.record}, "restart", false)
	waitClosed(t, restarted.Ready(), 10*time.Second, "the restarted silo to rejoin")
	if restarted.MemberID() == c.MemberID() || restarted.ClusterID() != clusterID || len(again.get()) != 0 {
		t.Fatalf("restarted: member %s (before %s), cluster %016x, recorded %x", restarted.MemberID(), c.MemberID(), restarted.ClusterID(), again.get())
	}
	want := []string{a.MemberID(), b.MemberID(), restarted.MemberID()}
	slices.Sort(want)
	testkit.Eventually(t, 15*time.Second, "a to publish the restarted silo and drop its old member id", func() bool {
		ids, _ := aTop.snapshot()
		return slices.Equal(ids, want)
	})
	if got := a.SiloIDs()[restarted.MemberID()]; got != siloID {
		t.Fatalf("a lists silo %016x under the new member id, want %016x", got, uint64(siloID))
	}
}

// TestFreshSiloAdoptsAStoredCluster: a silo with a stored cluster id and seeds never mints; a
// join-only silo with an empty store adopts its cluster id, and then both publish both. Two
// join-only silos with empty stores never create a cluster and say why.
func TestFreshSiloAdoptsAStoredCluster(t *testing.T) {
	t.Parallel()
	xPort, yPort := gossipPort(t), gossipPort(t)
	xAddr, yAddr := fmt.Sprintf("127.0.0.1:%d", xPort), fmt.Sprintf("127.0.0.1:%d", yPort)
	const stored = 0x5707ed0000000002
	x, _ := startFake(t, ProviderConfig{BindPort: xPort, Seeds: []string{xAddr, yAddr}, ClusterID: stored, BootstrapExpect: 2}, "adopt", false)
	time.Sleep(200 * time.Millisecond)
	if isClosed(x.Ready()) || x.ClusterID() != stored {
		t.Fatalf("a silo with a stored id and unreachable seeds: ready %v, cluster %016x", isClosed(x.Ready()), x.ClusterID())
	}
	if w := x.waitingFor(); !strings.Contains(w, "waiting for a live peer of cluster "+FormatID(stored)) {
		t.Errorf("waiting for %q", w)
	}
	rec := &recorded{}
	y, _ := startFake(t, ProviderConfig{BindPort: yPort, Seeds: []string{xAddr, yAddr}, OnClusterID: rec.record}, "adopt", false)
	waitClosed(t, y.Ready(), 10*time.Second, "the fresh silo to adopt")
	waitClosed(t, x.Ready(), 10*time.Second, "the stored silo to see a peer of its cluster")
	if y.ClusterID() != stored || !slices.Equal(rec.get(), []uint64{stored}) || x.ClusterID() != stored {
		t.Fatalf("x in %016x, y in %016x recorded %x; want both in %016x", x.ClusterID(), y.ClusterID(), rec.get(), uint64(stored))
	}

	p, _ := startFake(t, ProviderConfig{}, "join-only", false) // mints: a seedless silo creates its cluster
	_ = p.Shutdown(false)
	q, _ := startFake(t, ProviderConfig{Seeds: []string{unreachableSeed}}, "join-only", false)
	r, _ := startFake(t, ProviderConfig{Seeds: []string{q.GossipAddress()}}, "join-only", false)
	testkit.Eventually(t, 10*time.Second, "the join-only silos to see each other", func() bool { return len(r.ml.Members()) == 2 })
	time.Sleep(200 * time.Millisecond)
	for _, s := range []*Provider{q, r} {
		if isClosed(s.Ready()) || s.ClusterID() != 0 {
			t.Fatalf("a join-only silo: ready %v, cluster %016x", isClosed(s.Ready()), s.ClusterID())
		}
		if w := s.waitingFor(); !strings.Contains(w, "BootstrapExpect 0") {
			t.Errorf("join-only silo waiting for %q", w)
		}
	}
}

// packetDropper is memberlist's network transport with every outgoing packet (UDP: probes,
// acks and the gossip that carries broadcasts) dropped; streams (TCP state exchanges) pass.
type packetDropper struct{ *memberlist.NetTransport }

func (d packetDropper) WriteTo([]byte, string) (time.Time, error) { return time.Now(), nil }

func (d packetDropper) WriteToAddress([]byte, memberlist.Address) (time.Time, error) {
	return time.Now(), nil
}

// noPeriodicExchange makes memberlist's periodic state exchange too rare to happen in a test.
func noPeriodicExchange(mc *memberlist.Config) error {
	mc.PushPullInterval = time.Hour
	return nil
}

// A member announces a cluster id it adopts by a broadcast, which memberlist piggybacks on a
// few packets; when those are lost its peers must still hear of it, by a state exchange, not
// only at the next periodic one. The joining member here sends no packet at all.
func TestAnAdoptedClusterIDReachesPeersWhosePacketsAreLost(t *testing.T) {
	t.Parallel()
	a, aTop := startFake(t, ProviderConfig{tuneMemberlist: noPeriodicExchange}, "adopt-lost", false)
	b, _ := startFake(t, ProviderConfig{Seeds: []string{a.GossipAddress()}, tuneMemberlist: func(mc *memberlist.Config) error {
		nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{mc.BindAddr}})
		if err != nil {
			return err
		}
		mc.Transport = packetDropper{nt}
		mc.BindPort, mc.AdvertisePort = nt.GetAutoBindPort(), nt.GetAutoBindPort()
		return noPeriodicExchange(mc)
	}}, "adopt-lost", false)
	testkit.Eventually(t, 3*time.Second, "the first member to list the one that adopted its cluster id", func() bool {
		ids, _ := aTop.snapshot()
		return slices.Contains(ids, b.MemberID())
	})
	if b.ClusterID() != a.ClusterID() {
		t.Fatalf("cluster ids %s and %s", FormatID(b.ClusterID()), FormatID(a.ClusterID()))
	}
}

// TestAStoredSiloOpensOnlyOnAPeerItReachedItself: a silo with a stored cluster id does not
// open its gate on a peer of its cluster it has only heard of (a view merged from another
// node's can list silos that are gone: a client that outlived every silo gossips them as
// alive for a while); it says so while it waits, and opens once its own probe of the peer is
// answered. With the real probe, a live peer is reached at once.
func TestAStoredSiloOpensOnlyOnAPeerItReachedItself(t *testing.T) {
	t.Parallel()
	a, _ := startFake(t, ProviderConfig{}, "reached", false)
	waitClosed(t, a.Ready(), 10*time.Second, "a to create the cluster")
	clusterID := a.ClusterID()

	stale, _, env := newFake(t, ProviderConfig{Seeds: []string{a.GossipAddress()}, SiloID: 0x00c0ffee00000002, ClusterID: clusterID}, "reached", false)
	var answers atomic.Bool
	var probes atomic.Int64
	stale.probePeer = func(memberlistNode) bool { probes.Add(1); return answers.Load() }
	if err := stale.start(env); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the silo to probe the peer it heard of", func() bool { return probes.Load() >= 2 })
	if isClosed(stale.Ready()) {
		t.Fatal("the gate opened on a peer that never answered the silo's probe")
	}
	if why := stale.waitingFor(); !strings.Contains(why, "none answered this silo's probe") {
		t.Fatalf("waiting for %q, want it to say no peer answered its probe", why)
	}
	answers.Store(true)
	waitClosed(t, stale.Ready(), 10*time.Second, "the gate to open once the peer answered")

	live, _ := startFake(t, ProviderConfig{Seeds: []string{a.GossipAddress()}, SiloID: 0x00c0ffee00000003, ClusterID: clusterID}, "reached", false)
	waitClosed(t, live.Ready(), 10*time.Second, "a silo probing for real to reach its live peer")
}

// isolatable is memberlist's network transport that, while cut, drops every packet it would
// send or receive and refuses every stream either way, as a silo cut off by a firewall.
type isolatable struct {
	*memberlist.NetTransport
	cut     atomic.Bool
	packets chan *memberlist.Packet
	streams chan net.Conn
	stop    chan struct{}
}

func newIsolatable(mc *memberlist.Config) (*isolatable, error) {
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{mc.BindAddr}})
	if err != nil {
		return nil, err
	}
	i := &isolatable{NetTransport: nt, packets: make(chan *memberlist.Packet), streams: make(chan net.Conn), stop: make(chan struct{})}
	go func() {
		for {
			select {
			case p := <-nt.PacketCh():
				if i.cut.Load() {
					continue
				}
				select {
				case i.packets <- p:
				case <-i.stop:
					return
				}
			case c := <-nt.StreamCh():
				if i.cut.Load() {
					c.Close()
					continue
				}
				select {
				case i.streams <- c:
				case <-i.stop:
					c.Close()
					return
				}
			case <-i.stop:
				return
			}
		}
	}()
	mc.Transport = i
	mc.BindPort, mc.AdvertisePort = nt.GetAutoBindPort(), nt.GetAutoBindPort()
	return i, nil
}

func (i *isolatable) PacketCh() <-chan *memberlist.Packet { return i.packets }
func (i *isolatable) StreamCh() <-chan net.Conn           { return i.streams }

func (i *isolatable) WriteTo(b []byte, addr string) (time.Time, error) {
	return i.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (i *isolatable) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if i.cut.Load() {
		return time.Now(), nil
	}
	return i.NetTransport.WriteToAddress(b, a)
}

func (i *isolatable) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return i.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (i *isolatable) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if i.cut.Load() {
		return nil, errors.New("isolated")
	}
	return i.NetTransport.DialAddressTimeout(a, timeout)
}

// Shutdown stops the forwarding, then memberlist's listeners, which wait until what they
// received is taken: it is discarded meanwhile.
func (i *isolatable) Shutdown() error {
	close(i.stop)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-i.NetTransport.PacketCh():
			case c := <-i.NetTransport.StreamCh():
				c.Close()
			case <-done:
				return
			}
		}
	}()
	err := i.NetTransport.Shutdown()
	close(done)
	return err
}

// A member cut off long enough for its peers to declare it dead, but too briefly to declare
// them dead itself (its probes are slow: it still counts them live), hears of its death only
// from a state exchange, memberlist's periodic push/pull: it must come soon after the heal,
// not up to 15 s later (memberlist's local default), for its peers to list it again.
func TestAHealedMemberThatStillSawItsPeersIsListedAgainSoon(t *testing.T) {
	t.Parallel()
	a, aTop := startFake(t, ProviderConfig{}, "healed", false)
	_, bTop := startFake(t, ProviderConfig{Seeds: []string{a.GossipAddress()}}, "healed", false)
	var cut *isolatable
	x, _ := startFake(t, ProviderConfig{Seeds: []string{a.GossipAddress()},
		// It probes once a minute: it never suspects its peers during the cut.
		ProbeInterval: time.Minute, ProbeTimeout: time.Second,
		tuneMemberlist: func(mc *memberlist.Config) error {
			var err error
			cut, err = newIsolatable(mc)
			return err
		}}, "healed", false)
	listed := func(top *fakeTopology) bool {
		ids, _ := top.snapshot()
		return slices.Contains(ids, x.MemberID())
	}
	testkit.Eventually(t, 10*time.Second, "both peers to list the third member", func() bool { return listed(aTop) && listed(bTop) })

	cut.cut.Store(true)
	testkit.Eventually(t, 20*time.Second, "both peers to drop the cut-off member", func() bool { return !listed(aTop) && !listed(bTop) })
	// The cut lasts on until the peers' gossip of the death is spent, as in a cut of seconds.
	time.Sleep(3 * time.Second)
	if x.alone() {
		t.Fatal("the cut-off member declared its peers dead: the test needs one that still counts them live")
	}
	cut.cut.Store(false)
	healed := time.Now()
	testkit.Eventually(t, 3*time.Second+DefaultPushPullInterval, "both peers to list the healed member again", func() bool { return listed(aTop) && listed(bTop) })
	t.Logf("listed by both peers %v after the heal", time.Since(healed).Round(time.Millisecond))
}
