package cluster

import (
	"log/slog"
	"slices"
)

// SetDraining announces that this silo is handing its leaderships over before it stops
// (silo.Silo's graceful stop): its node metadata says so at the next sync, and peers'
// placement moves no leadership to it (DrainingSilos). It cannot be undone; the silo stops.
func (p *Provider) SetDraining() {
	if p.draining.CompareAndSwap(false, true) {
		p.signal()
	}
}

// announceDraining re-announces the metadata once SetDraining was called (run goroutine).
func (p *Provider) announceDraining() {
	if p.announcedDraining || !p.draining.Load() || p.env.client {
		return
	}
	p.announcedDraining = true
	if err := p.announce(); err != nil {
		p.logger.Warn("announcing that the silo drains", slog.Any("error", err))
		return
	}
	if err := p.ml.UpdateNode(p.cfg.ResyncInterval); err != nil {
		p.logger.Debug("announcing that the silo drains", slog.String("member", p.env.selfID), slog.Any("error", err))
	}
}

// DrainingSilos returns the silo ids of the live peers of this member's cluster that announce
// they are draining (SetDraining), ascending.
func (p *Provider) DrainingSilos() []uint64 {
	own := p.clusterID.Load()
	var out []uint64
	for _, v := range p.view() {
		if v.meta.Draining && !v.meta.Client && uint64(v.meta.ClusterID) == own && own != 0 {
			out = append(out, uint64(v.meta.Silo))
		}
	}
	slices.Sort(out)
	return out
}

// SiloBuilds returns what each live silo of this member's cluster announces of its build
// (ProviderConfig.Build), by silo id; a silo that announces none is absent.
func (p *Provider) SiloBuilds() map[uint64]string {
	own := p.clusterID.Load()
	out := map[uint64]string{}
	for _, v := range p.view() {
		if !v.meta.Client && v.meta.Build != "" && uint64(v.meta.ClusterID) == own && own != 0 {
			out[uint64(v.meta.Silo)] = v.meta.Build
		}
	}
	return out
}

// SiloApplyVersions returns the newest apply version each live silo of this member's cluster
// announces (ProviderConfig.ApplyVersion), by silo id, this one excepted; a silo of a release
// that announces none knows version 1.
func (p *Provider) SiloApplyVersions() map[uint64]uint32 {
	own := p.clusterID.Load()
	out := map[uint64]uint32{}
	for _, v := range p.view() {
		if !v.meta.Client && uint64(v.meta.ClusterID) == own && own != 0 {
			out[uint64(v.meta.Silo)] = max(v.meta.ApplyVersion, 1)
		}
	}
	return out
}

// SilosRequiringTLS returns the silo ids of the live silos that announce mutual TLS on their
// actor transport (ProviderConfig.MutualTLS), whatever cluster id they hold: what a client
// without a certificate checks once it joined, to refuse at once instead of timing out on
// every call. A silo of a version that announces nothing is not listed.
func (p *Provider) SilosRequiringTLS() []uint64 {
	var out []uint64
	for _, v := range p.view() {
		if !v.meta.Client && v.meta.MutualTLS {
			out = append(out, uint64(v.meta.Silo))
		}
	}
	slices.Sort(out)
	return out
}
