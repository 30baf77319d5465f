package cluster

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
)

// startIdentity sets up the cluster-identity rule and the metadata to announce; start calls it
// before memberlist exists. seedless says that no seed names another node.
func (p *Provider) startIdentity(seedless bool) error {
	env := p.env
	p.metaBase = nodeMeta{
		Cluster: env.clusterName, ID: env.selfID, Host: env.host, Port: env.port,
		Kinds: env.kinds, Client: env.client,
	}
	p.form = formation{seedless: seedless, client: env.client}
	if !env.client {
		if slices.Contains(p.cfg.Retired, p.cfg.SiloID) {
			return errRetired(p.cfg.SiloID, p.cfg.ClusterID)
		}
		p.metaBase.Silo = hexID(p.cfg.SiloID)
		p.metaBase.Build = p.cfg.Build
		p.metaBase.MutualTLS = p.cfg.MutualTLS
		p.metaBase.ApplyVersion = p.cfg.ApplyVersion
		p.form.silo, p.form.clusterID = p.cfg.SiloID, p.cfg.ClusterID
		p.form.expect = p.cfg.BootstrapExpect
		if p.form.expect == 0 && seedless {
			p.form.expect = 1
		}
	}
	// The largest metadata this node may announce must fit now, not when it takes a cluster id.
	largest := p.metaBase
	largest.ClusterID, largest.Expect = hexID(^uint64(0)), p.form.expect
	if _, err := encodeMeta(largest); err != nil {
		return err
	}
	p.clusterID.Store(p.form.clusterID)
	return p.announce()
}

// announce renders the metadata for the node's current identity: the cluster id once known,
// BootstrapExpect before (founding silos count only those announcing the same value).
func (p *Provider) announce() error {
	meta := p.metaBase
	meta.ClusterID = hexID(p.form.clusterID)
	meta.Draining = p.draining.Load()
	if p.form.clusterID == 0 {
		meta.Expect = p.form.expect
	}
	buf, err := encodeMeta(meta)
	if err != nil {
		return err
	}
	p.meta.Store(&buf)
	return nil
}

// formStep applies the cluster-identity rule to the live peers until it opens the gate
// (true), waits or refuses (false). It runs on the run goroutine.
func (p *Provider) formStep(view []viewNode) bool {
	peers := make([]formationPeer, len(view))
	for {
		// Whether a peer was reached depends on the cluster id, which a step may just have
		// taken: look again at each step (a peer reached once stays reached).
		for i, v := range view {
			peers[i] = v.meta.peer()
			peers[i].confirmed = p.reached(v)
		}
		step := p.form.next(peers)
		switch step.action {
		case formOpen:
			p.setWaiting("")
			p.openGate(step.reason)
			return true
		case formWait:
			p.setWaiting(step.reason)
			return false
		case formRefuse:
			p.refuse(step.err)
			return false
		case formAdopt:
			if !p.takeClusterID(step.clusterID, false) {
				return false
			}
		case formMint:
			id, err := randomID()
			if err != nil {
				p.refuse(fmt.Errorf("create a cluster id: %w", err))
				return false
			}
			if !p.takeClusterID(id, true) {
				return false
			}
		}
	}
}

// reached reports whether this silo reached v itself, when v is another silo of this node's
// cluster: the only peers the gate may open on, since a view merged from another node's (a
// client that outlived every silo, say) can hold silos that are gone. It probes v at each
// call until v answers once.
func (p *Provider) reached(v viewNode) bool {
	if p.env.client || p.form.clusterID == 0 || v.meta.Client || uint64(v.meta.ClusterID) != p.form.clusterID {
		return false
	}
	if uint64(v.meta.Silo) == p.form.silo {
		return false // an earlier incarnation of this silo, maybe at this very address
	}
	if p.reachedPeers[v.meta.ID] {
		return true
	}
	probe := p.probe
	if p.probePeer != nil {
		probe = p.probePeer
	}
	if !probe(*v.node) {
		return false // probed again at the next sync
	}
	if p.reachedPeers == nil {
		p.reachedPeers = map[string]bool{}
	}
	p.reachedPeers[v.meta.ID] = true
	return true
}

// probe reaches node over TCP: a state exchange with its address (memberlist's push/pull, as a
// join), which only a live node answers. Not a UDP ping: memberlist piggybacks its queued
// broadcasts on every packet it sends, so a ping right after this node announced its cluster id
// spent that announcement's few transmissions on the pinged node and its answer, and a third
// silo never learned the id.
func (p *Provider) probe(node memberlistNode) bool {
	n, err := p.ml.Join([]string{node.Address()})
	return err == nil && n > 0
}

// takeClusterID makes id this node's cluster id: a member hands it to OnClusterID (to persist
// it) first, then announces it. A failed OnClusterID refuses the node.
func (p *Provider) takeClusterID(id uint64, minted bool) bool {
	what := "adopted the cluster id of its peers"
	if minted {
		what = "created a new cluster"
	}
	if !p.env.client && p.cfg.OnClusterID != nil {
		if err := p.cfg.OnClusterID(id, minted); err != nil {
			p.refuse(fmt.Errorf("record cluster id %s: %w", FormatID(id), err))
			return false
		}
	}
	p.form.clusterID, p.form.minted = id, minted
	p.clusterID.Store(id)
	p.logger.Info(what, slog.String("member", p.env.selfID), slog.String("silo_id", FormatID(p.form.silo)),
		slog.String("cluster_id", FormatID(id)))
	if p.env.client {
		return true
	}
	if err := p.announce(); err != nil { // cannot fail: start checked the largest metadata
		p.refuse(err)
		return false
	}
	if err := p.ml.UpdateNode(p.cfg.ResyncInterval); err != nil {
		p.logger.Debug("announcing the cluster id", slog.String("member", p.env.selfID), slog.Any("error", err))
	}
	// The broadcast has only a few transmissions, and memberlist piggybacks them on whatever it
	// sends first (a probe and its answer can spend them all), so a peer may never hear of the
	// id; a state exchange with every live node carries it for sure.
	var addresses []string
	for _, v := range p.view() {
		addresses = append(addresses, v.node.Address())
	}
	if len(addresses) > 0 {
		if _, err := p.ml.Join(addresses); err != nil {
			p.logger.Debug("pushing the cluster id", slog.String("member", p.env.selfID), slog.Any("error", err))
		}
	}
	return true
}

// Refused is closed when this node refuses to join: its cluster id differs from that of every
// live member it reached, the members it reached belong to several clusters, or OnClusterID
// failed. RefuseCause says which; NewMember and NewClient fail with it.
func (p *Provider) Refused() <-chan struct{} { return p.refused }

// RefuseCause is why Refused was closed, nil before that.
func (p *Provider) RefuseCause() error {
	if !p.isRefused() {
		return nil
	}
	return p.refuseCause
}

func (p *Provider) refuse(cause error) {
	p.refuseOnce.Do(func() {
		p.refuseCause = cause
		p.logger.Error("refusing to join", slog.String("member", p.env.selfID), slog.Any("cause", cause))
		close(p.refused)
	})
}

func (p *Provider) isRefused() bool {
	select {
	case <-p.refused:
		return true
	default:
		return false
	}
}

// setWaiting records what the rule waits for, logging each new reason.
func (p *Provider) setWaiting(reason string) {
	p.waitingMu.Lock()
	changed := reason != p.waiting
	p.waiting = reason
	p.waitingMu.Unlock()
	if changed && reason != "" {
		p.logger.Info("cluster membership waiting", slog.String("member", p.env.selfID), slog.String("waiting", reason))
	}
}

// waitingFor is what the cluster-identity rule waits for ("" once the gate opened, or before
// the first look at the peers).
func (p *Provider) waitingFor() string {
	p.waitingMu.Lock()
	defer p.waitingMu.Unlock()
	return p.waiting
}

// ClusterID is the id of the cluster this node belongs to: ProviderConfig.ClusterID, or the
// one it adopted or minted; 0 until it has one.
func (p *Provider) ClusterID() uint64 { return p.clusterID.Load() }

// SiloID is the silo id this member announces (ProviderConfig.SiloID or the random one it
// took); 0 for a client.
func (p *Provider) SiloID() uint64 {
	if p.isClient() {
		return 0
	}
	return p.cfg.SiloID
}

// SiloIDs maps each member id of the last published member set to the silo id it announces.
func (p *Provider) SiloIDs() map[string]uint64 {
	p.topologyMu.Lock()
	defer p.topologyMu.Unlock()
	return maps.Clone(p.silos)
}
