package cluster

import (
	"fmt"
	"log/slog"
	"time"
)

// Fenced is closed once this member must stop serving: its id is on its own protoactor block
// list, its id vanished from the topology it publishes after having been in it, or a peer
// reported that it has blocked this member (this member was declared dead while paused or cut
// off, and protoactor never lets a blocked id back). The silo should close its partitions and
// exit; a restarted process joins with a new id. FenceCause says why.
func (p *Provider) Fenced() <-chan struct{} { return p.fenced }

// FenceCause is the reason Fenced was closed, nil before that.
func (p *Provider) FenceCause() error {
	select {
	case <-p.fenced:
		return p.fenceCause
	default:
		return nil
	}
}

// fence records the first cause and closes Fenced; later causes are ignored.
func (p *Provider) fence(cause error) {
	p.fenceOnce.Do(func() {
		p.fenceCause = cause
		p.logger.Error("member fenced: it is no longer part of the cluster",
			slog.String("member", p.env.selfID), slog.Any("cause", cause))
		close(p.fenced)
		if p.cfg.OnFenced != nil {
			go p.cfg.OnFenced(cause)
		}
	})
}

func (p *Provider) isFenced() bool {
	select {
	case <-p.fenced:
		return true
	default:
		return false
	}
}

// checkSelf fences this member when protoactor has blocked its id or when it has dropped out
// of the topology it publishes. Clients are never in the topology, so only the block check
// applies to them.
func (p *Provider) checkSelf(presentInTopology bool) {
	if p.env.blocked(p.env.selfID) {
		p.fence(fmt.Errorf("member %s is on its own protoactor block list", p.env.selfID))
		return
	}
	if presentInTopology {
		p.inTopology = true
		return
	}
	if p.inTopology {
		p.fence(fmt.Errorf("member %s dropped out of the published topology", p.env.selfID))
	}
}

// noticeBlocked tells every live peer whose id protoactor has blocked that it is out, at most
// once per resync interval per peer (memberlist user message over UDP; repeated, so a lost
// packet only delays it). A fenced member says nothing: its own view is no longer trusted.
func (p *Provider) noticeBlocked(peers map[string]*memberlistNode) {
	for id := range p.lastNotice {
		if _, live := peers[id]; !live {
			delete(p.lastNotice, id)
		}
	}
	if p.isFenced() || p.env.client {
		return
	}
	now := time.Now()
	for id, node := range peers {
		if !p.env.blocked(id) {
			continue
		}
		if last, ok := p.lastNotice[id]; ok && now.Sub(last) < p.cfg.ResyncInterval {
			continue
		}
		p.lastNotice[id] = now
		msg := encodeNotice(blockedNotice{Cluster: p.env.clusterName, ID: id, From: p.env.selfID})
		if err := p.ml.SendBestEffort(node, msg); err != nil {
			p.logger.Warn("could not notify a blocked member", slog.String("member", id), slog.Any("error", err))
			continue
		}
		p.logger.Warn("notified a live member that it is blocked", slog.String("member", id), slog.String("address", node.Address()))
	}
}

// onNotice handles a memberlist user message (from memberlist's goroutines; never blocks).
func (p *Provider) onNotice(buf []byte) {
	notice, ok := decodeNotice(buf)
	if !ok || notice.Cluster != p.env.clusterName || notice.ID != p.env.selfID {
		return
	}
	p.fence(fmt.Errorf("member %s reports that it has blocked member %s", notice.From, notice.ID))
}
