package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"
)

// Retired silos. A silo whose replicas the cluster removes because it has been missing longer
// than the dead bound is retired for good: its id never serves again, however its process
// comes back (restarted on the same data dir, resumed after a pause). The retiring leader
// records the id (Retire) before it proposes the removal; the set of retired ids only grows,
// every silo persists what it learns (ProviderConfig.OnRetired) and gossips it: to every live
// peer when an id is added, in memberlist's push/pull state (so a node joining or rejoining
// learns it from the first peer it reaches, and every node converges within a push/pull
// interval), and to every live peer whose silo is retired, at most once per resync interval.
// A silo that learns its own id is retired refuses to join or, once joined, fences itself;
// one whose store records its id refuses to start. Placement never places a replica on a
// retired silo. Clients neither keep nor pass on the set.

// retiredState is the retired set as gossiped (JSON): a memberlist user message and the
// push/pull state. Receivers accept it only from their own cluster name and cluster id.
type retiredState struct {
	// Type is always noticeRetired.
	Type string `json:"t"`
	// Cluster is the sender's cluster name and ClusterID its cluster id.
	Cluster   string `json:"c"`
	ClusterID hexID  `json:"ci"`
	// Silos are the retired silo ids.
	Silos []hexID `json:"r"`
}

const noticeRetired = "retired"

func encodeRetired(s retiredState) []byte {
	s.Type = noticeRetired
	buf, _ := json.Marshal(s) // strings and ids only: cannot fail
	return buf
}

func decodeRetired(buf []byte) (retiredState, bool) {
	var s retiredState
	if err := json.Unmarshal(buf, &s); err != nil || s.Type != noticeRetired || s.ClusterID == 0 || slices.Contains(s.Silos, 0) {
		return retiredState{}, false
	}
	return s, true
}

// errRetired is why a silo whose id is retired does not serve.
func errRetired(silo, clusterID uint64) error {
	return fmt.Errorf("silo %s was retired by cluster %s: the cluster removed its replicas after it had been missing longer than the dead bound, "+
		"and a retired silo never serves again with this data dir; delete the data dir to join as a new silo", FormatID(silo), FormatID(clusterID))
}

// Retire records that silo is retired from the cluster: persisted through OnRetired before it
// returns nil, then told to every live silo of the cluster name (receivers check the cluster
// id). Retiring a retired silo does nothing.
func (p *Provider) Retire(silo uint64) error {
	switch {
	case p.env == nil || p.env.client:
		return errors.New("retire: only a started silo retires silos")
	case silo == 0 || silo == p.cfg.SiloID:
		return fmt.Errorf("retire: silo %s is not another silo", FormatID(silo))
	}
	if p.Retired(silo) {
		return nil
	}
	if err := p.saveRetired(silo); err != nil {
		return err
	}
	p.logger.Warn("silo retired: missing longer than the dead bound, its replicas are removed and it never serves again",
		slog.String("member", p.env.selfID), slog.String("retired_silo", FormatID(silo)))
	peers := map[string]*memberlistNode{}
	for _, v := range p.view() {
		if !v.meta.Client { // a peer whose cluster id has not reached this node yet included
			peers[v.meta.ID] = v.node
		}
	}
	go p.sendRetired(peers)
	return nil
}

// saveRetired persists the retired set with the ids learned from peers and extra
// (OnRetired), and on success counts them as saved. Saves are serialized by p.saveMu; the set
// itself is locked only around reading and updating it, so memberlist's goroutines never wait
// for a write.
func (p *Provider) saveRetired(extra ...uint64) error {
	p.saveMu.Lock()
	defer p.saveMu.Unlock()
	p.retiredMu.Lock()
	next := maps.Clone(p.retired)
	maps.Copy(next, p.learned)
	for _, id := range extra {
		next[id] = true
	}
	p.retiredMu.Unlock()
	if p.cfg.OnRetired != nil {
		if err := p.cfg.OnRetired(slices.Sorted(maps.Keys(next))); err != nil {
			return fmt.Errorf("record the retired silos: %w", err)
		}
	}
	p.retiredMu.Lock()
	for id := range next {
		if p.learned[id] {
			delete(p.learned, id)
			p.logger.Warn("learned that a silo is retired", slog.String("member", p.env.selfID), slog.String("retired_silo", FormatID(id)))
		}
		p.retired[id] = true
	}
	p.retiredMu.Unlock()
	return nil
}

// Retired reports whether silo is retired from the cluster, as this node knows.
func (p *Provider) Retired(silo uint64) bool {
	p.retiredMu.Lock()
	defer p.retiredMu.Unlock()
	return p.retired[silo] || p.learned[silo]
}

// RetiredSilos returns the retired silos this node knows, ascending.
func (p *Provider) RetiredSilos() []uint64 {
	p.retiredMu.Lock()
	defer p.retiredMu.Unlock()
	all := maps.Clone(p.retired)
	maps.Copy(all, p.learned)
	return slices.Sorted(maps.Keys(all))
}

// retiredBuf is the retired set to gossip, nil when there is nothing to say (a client, no
// cluster id yet, none retired).
func (p *Provider) retiredBuf() []byte {
	clusterID := p.ClusterID()
	if p.env == nil || p.env.client || clusterID == 0 {
		return nil
	}
	silos := p.RetiredSilos()
	if len(silos) == 0 {
		return nil
	}
	s := retiredState{Cluster: p.env.clusterName, ClusterID: hexID(clusterID)}
	for _, id := range silos {
		s.Silos = append(s.Silos, hexID(id))
	}
	return encodeRetired(s)
}

// mergeRetired takes a peer's retired set (from memberlist's goroutines; never blocks on
// I/O): ids not known yet wait in learned for the run goroutine to persist them. A member
// with no cluster id yet (forming, or adopting one) keeps the sets it hears by cluster id
// until it takes one.
func (p *Provider) mergeRetired(s retiredState) {
	if p.env == nil || p.env.client || s.Cluster != p.env.clusterName {
		return
	}
	clusterID := p.ClusterID()
	added := false
	p.retiredMu.Lock()
	switch uint64(s.ClusterID) {
	case clusterID:
		for _, id := range s.Silos {
			if !p.retired[uint64(id)] && !p.learned[uint64(id)] {
				p.learned[uint64(id)] = true
				added = true
			}
		}
	default:
		if clusterID == 0 && p.heard != nil {
			heard := p.heard[uint64(s.ClusterID)]
			if heard == nil {
				heard = map[uint64]bool{}
				p.heard[uint64(s.ClusterID)] = heard
			}
			for _, id := range s.Silos {
				heard[uint64(id)] = true
			}
		}
	}
	p.retiredMu.Unlock()
	if added {
		p.signal()
	}
}

// settleRetired runs on the run goroutine at each sync: it persists the ids learned from
// peers and reports whether this silo's own id is retired.
func (p *Provider) settleRetired() (selfRetired bool) {
	if p.env.client {
		return false
	}
	p.retiredMu.Lock()
	if clusterID := p.ClusterID(); clusterID != 0 && p.heard != nil {
		for id := range p.heard[clusterID] {
			if !p.retired[id] {
				p.learned[id] = true
			}
		}
		p.heard = nil
	}
	unsaved := len(p.learned) > 0
	p.retiredMu.Unlock()
	if unsaved {
		if err := p.saveRetired(); err != nil {
			p.logger.Error("could not record the retired silos peers reported; retrying", slog.String("member", p.env.selfID), slog.Any("error", err))
		}
	}
	return p.Retired(p.cfg.SiloID)
}

// noticeRetiredPeers tells every live peer whose silo is retired so, at most once per resync
// interval per peer: it may have come back not knowing (its store predates the retirement).
func (p *Provider) noticeRetiredPeers(peers map[string]*memberlistNode, silos map[string]uint64) {
	now := time.Now()
	for id := range p.lastRetiredNotice {
		if _, live := peers[id]; !live {
			delete(p.lastRetiredNotice, id)
		}
	}
	due := map[string]*memberlistNode{}
	for id, node := range peers {
		if !p.Retired(silos[id]) {
			continue
		}
		if last, ok := p.lastRetiredNotice[id]; ok && now.Sub(last) < p.cfg.ResyncInterval {
			continue
		}
		p.lastRetiredNotice[id] = now
		due[id] = node
	}
	if len(due) > 0 {
		go p.sendRetired(due)
	}
}

// sendRetired sends the retired set to peers over memberlist's reliable (TCP) user messages.
func (p *Provider) sendRetired(peers map[string]*memberlistNode) {
	buf := p.retiredBuf()
	if buf == nil {
		return
	}
	p.mu.Lock()
	ml := p.ml
	p.mu.Unlock()
	if ml == nil {
		return
	}
	for id, node := range peers {
		if err := ml.SendReliable(node, buf); err != nil {
			p.logger.Debug("could not tell a peer the retired silos", slog.String("member", id), slog.Any("error", err))
		}
	}
}
