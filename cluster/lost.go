package cluster

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Lost is closed once this member id can no longer serve in its cluster although its silo can:
// protoactor blocks, for good, the id of a member that left its topology (one memberlist
// declared dead while it was paused or cut off), so the silo must come back under a new member
// id. It closes when
//   - this member's id is on its own protoactor block list, or dropped out of the topology it
//     publishes after having been in it;
//   - a peer that works with a strict majority of the live silos it sees reports that it has
//     blocked this member (the receiver was declared dead while paused or cut off);
//   - this member works with no strict majority of the live silos of its cluster it sees: those
//     it has blocked and those that reported blocking it are out of reach for this member id.
//
// A notice from a peer that is itself cut off (no majority) never closes Lost on a member that
// still works with a majority, so an isolated silo cannot stop the rest at the heal. Raft's
// term, not membership, fences writes: a member id that is lost has no safety consequence, only
// an availability one. The silo reacts by rejoining under a new member id with the same silo id
// and data (silo.Silo's rejoin); LostCause says why.
func (p *Provider) Lost() <-chan struct{} { return p.lost }

// LostCause is the reason Lost was closed, nil before that.
func (p *Provider) LostCause() error {
	select {
	case <-p.lost:
		return p.lostCause
	default:
		return nil
	}
}

// lose records the first cause and closes Lost; later causes are ignored.
func (p *Provider) lose(cause error) {
	p.lostOnce.Do(func() {
		p.lostCause = cause
		p.logger.Warn("member id lost: the cluster no longer accepts it; the silo rejoins under a new one",
			slog.String("member", p.env.selfID), slog.Any("cause", cause))
		close(p.lost)
		if p.cfg.OnLost != nil {
			go p.cfg.OnLost(cause)
		}
	})
}

func (p *Provider) isLost() bool {
	select {
	case <-p.lost:
		return true
	default:
		return false
	}
}

// checkSelf closes Lost when protoactor has blocked this member's id or when it has dropped out
// of the topology it publishes. Clients are never in the topology, so only the block check
// applies to them.
func (p *Provider) checkSelf(presentInTopology bool) {
	if p.env.blocked(p.env.selfID) {
		p.lose(fmt.Errorf("member %s is on its own protoactor block list", p.env.selfID))
		return
	}
	if presentInTopology {
		p.inTopology = true
		return
	}
	if p.inTopology {
		p.lose(fmt.Errorf("member %s dropped out of the published topology", p.env.selfID))
	}
}

// noticeTTL is how long a peer's notice that it blocked this member counts toward reach: the
// peer repeats it every resync interval while it sees this member live.
func (p *Provider) noticeTTL() time.Duration { return 3 * p.cfg.ResyncInterval }

// reach is how much of its cluster a member id can work with, as one sync sees it.
type reach struct {
	// live counts the live silos of the cluster (this one included); working those this member
	// works with (this one included): live less blocked and blockedBy.
	live, working int
	// blocked are live peers this member has blocked; blockedBy those that reported blocking it
	// (and that it has not blocked).
	blocked, blockedBy []string
}

// majority reports whether the member works with a strict majority of the live silos.
func (r reach) majority() bool { return 2*r.working > r.live }

func (r reach) String() string {
	return fmt.Sprintf("works with %d of the %d live silos (blocked by it: %v; reported blocking it: %v)",
		r.working, r.live, r.blocked, r.blockedBy)
}

// reachOf computes this member's reach over the live silo peers of its cluster (members'
// peers), forgetting the notices of peers no longer live and expired ones.
func (p *Provider) reachOf(peers map[string]*memberlistNode) reach {
	now := time.Now()
	p.noticeMu.Lock()
	for id, at := range p.noticedBy {
		if _, live := peers[id]; !live || now.Sub(at) > p.noticeTTL() {
			delete(p.noticedBy, id)
		}
	}
	noticed := make(map[string]bool, len(p.noticedBy))
	for id := range p.noticedBy {
		noticed[id] = true
	}
	p.noticeMu.Unlock()
	r := reach{live: 1 + len(peers), working: 1}
	for id := range peers {
		switch {
		case p.env.blocked(id):
			r.blocked = append(r.blocked, id)
		case noticed[id]:
			r.blockedBy = append(r.blockedBy, id)
		default:
			r.working++
		}
	}
	slices.Sort(r.blocked)
	slices.Sort(r.blockedBy)
	return r
}

// checkReach closes Lost when this member works with no strict majority of the live silos
// because of blocks (a member that merely sees few peers, its others dead, is not lost: there
// is nobody to rejoin).
func (p *Provider) checkReach(r reach) {
	if p.env.client || r.majority() || len(r.blocked)+len(r.blockedBy) == 0 {
		return
	}
	p.lose(fmt.Errorf("member %s %s", p.env.selfID, r))
}

// noticeBlocked tells every live peer whose id protoactor has blocked that it is out, at most
// once per resync interval per peer (memberlist user message over UDP; repeated, so a lost
// packet only delays it), saying whether this member works with a majority. A member whose id
// is lost or fenced says nothing: its own view is no longer trusted.
func (p *Provider) noticeBlocked(peers map[string]*memberlistNode, r reach) {
	for id := range p.lastNotice {
		if _, live := peers[id]; !live {
			delete(p.lastNotice, id)
		}
	}
	if p.isFenced() || p.isLost() || p.env.client {
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
		msg := encodeNotice(blockedNotice{Cluster: p.env.clusterName, ID: id, From: p.env.selfID,
			Majority: r.majority(), Working: r.working, Live: r.live})
		if err := p.ml.SendBestEffort(node, msg); err != nil {
			p.logger.Warn("could not notify a blocked member", slog.String("member", id), slog.Any("error", err))
			continue
		}
		p.logger.Info("notified a live member that it is blocked", slog.String("member", id),
			slog.String("address", node.Address()), slog.Bool("majority", r.majority()))
	}
}

// onNotice handles a memberlist user message (from memberlist's goroutines; never blocks). A
// notice from a peer with a majority closes Lost at once; any notice counts toward reach, which
// the next sync judges.
func (p *Provider) onNotice(buf []byte) {
	notice, ok := decodeNotice(buf)
	if !ok || notice.Cluster != p.env.clusterName || notice.ID != p.env.selfID || notice.From == "" {
		return
	}
	if notice.Majority {
		p.lose(fmt.Errorf("member %s, which works with %d of the %d live silos it sees, reports that it has blocked member %s",
			notice.From, notice.Working, notice.Live, notice.ID))
		return
	}
	p.noticeMu.Lock()
	_, known := p.noticedBy[notice.From]
	p.noticedBy[notice.From] = time.Now()
	p.noticeMu.Unlock()
	if !known {
		p.logger.Info("a member without a majority reports that it has blocked this member; it decides nothing alone",
			slog.String("member", p.env.selfID), slog.String("from", notice.From),
			slog.String("reach", strings.TrimSpace(fmt.Sprintf("%d of %d", notice.Working, notice.Live))))
	}
	p.signal()
}
