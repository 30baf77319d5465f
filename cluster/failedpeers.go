package cluster

import (
	"slices"
	"sync"
	"time"
)

// failedPeerHorizon is how long the join loop keeps contacting the address of a silo that
// memberlist declared dead and that was not seen again: long enough for any split or pause a
// cluster rides out without retiring the silo.
const failedPeerHorizon = 15 * time.Minute

// failedPeers remembers the gossip addresses of the silos of this node's cluster that memberlist
// declared dead (not those that left), until each is seen live again or failedPeerHorizon has
// passed, so that the join loop contacts them again (Provider.rejoinFailed). memberlist never
// probes, gossips to or exchanges state with a node it declared dead, and forgets it entirely
// once GossipToTheDeadTime has passed. When a split heals, each side holds the other dead and
// neither contacts the other: only a third node both sides still see (a client reaching both)
// could bring them together, at random, if ever. A join (memberlist's TCP state exchange) with
// such an address merges both ways: the contacted node learns it was declared dead and refutes,
// and the next exchange brings its new incarnation back.
type failedPeers struct {
	mu     sync.Mutex
	byAddr map[string]failedPeer
}

// failedPeer is one silo memberlist declared dead.
type failedPeer struct {
	silo uint64
	at   time.Time
}

// failed records that the silo at addr was declared dead at now.
func (f *failedPeers) failed(addr string, silo uint64, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byAddr == nil {
		f.byAddr = map[string]failedPeer{}
	}
	f.byAddr[addr] = failedPeer{silo: silo, at: now}
}

// seen forgets addr: a node there is live.
func (f *failedPeers) seen(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byAddr, addr)
}

// due returns, sorted, the addresses to contact at now: those declared dead within
// failedPeerHorizon whose silo is not retired. It forgets the others.
func (f *failedPeers) due(now time.Time, retired func(silo uint64) bool) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for addr, peer := range f.byAddr {
		if now.Sub(peer.at) > failedPeerHorizon || (retired != nil && retired(peer.silo)) {
			delete(f.byAddr, addr)
			continue
		}
		out = append(out, addr)
	}
	slices.Sort(out)
	return out
}
