package cluster

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orreryhq/orrery/internal/testkit"
)

// retiredRecord collects what a provider's OnRetired was called with.
type retiredRecord struct {
	mu   sync.Mutex
	last []uint64
}

func (r *retiredRecord) record(ids []uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = slices.Clone(ids)
	return nil
}

func (r *retiredRecord) get() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.last)
}

// TestARetiredSiloNeverServesAgain: a silo retired by one member is fenced at once; every
// member persists the retirement, a member joining later learns it from its first peer, the
// retired silo restarted with its stored ids is refused or fenced by whichever peer it reaches,
// and one whose store records its own retirement does not start.
func TestARetiredSiloNeverServesAgain(t *testing.T) {
	t.Parallel()
	const aID, bID, xID = 0xa, 0xb, 0x5
	aRec, bRec := &retiredRecord{}, &retiredRecord{}
	a, _ := startFake(t, ProviderConfig{SiloID: aID, OnRetired: aRec.record}, "retire", false)
	b, _ := startFake(t, ProviderConfig{SiloID: bID, Seeds: []string{a.GossipAddress()}, OnRetired: bRec.record}, "retire", false)
	x, _ := startFake(t, ProviderConfig{SiloID: xID, Seeds: []string{a.GossipAddress()}}, "retire", false)
	waitClosed(t, x.Ready(), 10*time.Second, "x to join")
	waitClosed(t, b.Ready(), 10*time.Second, "b to join")
	clusterID := a.ClusterID()

	if err := a.Retire(aID); err == nil {
		t.Error("a silo retired itself")
	}
	if err := a.Retire(xID); err != nil {
		t.Fatal(err)
	}
	if got := aRec.get(); !slices.Equal(got, []uint64{xID}) {
		t.Fatalf("a recorded %x before Retire returned, want [5]", got)
	}
	waitClosed(t, x.Fenced(), 10*time.Second, "the retired silo to be fenced")
	if cause := x.FenceCause(); !strings.Contains(cause.Error(), "silo 0000000000000005 was retired") {
		t.Errorf("fence cause %q does not say the silo was retired", cause)
	}
	testkit.Eventually(t, 10*time.Second, "b to record the retirement", func() bool { return slices.Equal(bRec.get(), []uint64{xID}) && b.Retired(xID) })
	if err := x.Shutdown(false); err != nil {
		t.Fatal(err)
	}

	// A member joining later learns it from the push/pull state of the peer it joins.
	c, _ := startFake(t, ProviderConfig{SiloID: 0xc, Seeds: []string{b.GossipAddress()}}, "retire", false)
	waitClosed(t, c.Ready(), 10*time.Second, "c to join")
	testkit.Eventually(t, 10*time.Second, "c to learn the retirement", func() bool { return c.Retired(xID) })

	// The retired silo restarted on its store, whose record predates its retirement.
	xRec := &retiredRecord{}
	again, _ := startFake(t, ProviderConfig{SiloID: xID, ClusterID: clusterID, Seeds: []string{c.GossipAddress()}, OnRetired: xRec.record}, "retire", false)
	testkit.Eventually(t, 10*time.Second, "the restarted retired silo to refuse or fence", func() bool {
		return isClosed(again.Refused()) || isClosed(again.Fenced())
	})
	if !slices.Equal(xRec.get(), []uint64{xID}) {
		t.Errorf("the restarted retired silo recorded %x, want its own id", xRec.get())
	}

	// Restarted again on a store that records it: it does not start.
	p, _, env := newFake(t, ProviderConfig{SiloID: xID, ClusterID: clusterID, Seeds: []string{a.GossipAddress()}, Retired: []uint64{xID}}, "retire", false)
	if err := p.start(env); err == nil || !strings.Contains(err.Error(), "was retired") {
		t.Errorf("start with its own retirement recorded: %v, want a refusal saying it was retired", err)
	}

	// A retired set from another cluster id is ignored.
	a.mergeRetired(retiredState{Cluster: "retire", ClusterID: hexID(clusterID + 1), Silos: []hexID{0x99}})
	if a.Retired(0x99) {
		t.Error("a took a retired set from another cluster id")
	}
}
