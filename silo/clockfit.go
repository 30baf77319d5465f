package silo

import (
	"errors"
	"fmt"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/cluster/clockoffset"
)

// errClockUnfit is what /readyz answers, wrapped with the figures, while the silo is
// clock-unfit.
var errClockUnfit = errors.New("clock offset beyond the bound")

// newClockMonitor builds the silo's clock offset monitor (cluster/clockoffset): it probes the
// live peer silos over the Raft transport of the current member every
// clockoffset.DefaultInterval and tells the Host each change of its verdict: while unfit or
// unjudged the silo's replicas take no leadership a peer can take, and while unfit they stamp
// nothing where another voter can.
func (s *Silo) newClockMonitor() (*clockoffset.Monitor, error) {
	bound := s.cfg.MaxClockOffset
	if bound < 0 {
		bound = 0 // disabled: measured, never judged
	}
	return clockoffset.New(clockoffset.Config{
		Wall:      s.cfg.Clock,
		Mono:      clock.Real(),
		MaxOffset: bound,
		Peers:     s.clockPeers,
		Send: func(to, probe uint64, sentWall time.Time) {
			if m := s.member(); m != nil {
				m.raft.SendClockProbe(to, probe, sentWall)
			}
		},
		OnChange: func(v clockoffset.Verdict) {
			s.host.SetClockUnfit(v.Fitness == clockoffset.Unfit)
			s.host.SetClockUnjudged(v.Fitness == clockoffset.Unjudged)
		},
		Log: s.log,
	})
}

// clockPeers are the live silos other than this one and the retired, each with its member id
// (a new one each time it starts or rejoins: its incarnation).
func (s *Silo) clockPeers() map[uint64]string {
	self := s.SiloID()
	m := s.member()
	v := s.silos.Load()
	if v == nil {
		return nil
	}
	peers := make(map[uint64]string, len(v.members))
	for id, member := range v.members {
		if id != self && (m == nil || !m.provider.Retired(id)) {
			peers[id] = member
		}
	}
	return peers
}

// connectionLost forgets the clock of the live silo at actor address (its connection ended:
// its process may have died and be starting again, perhaps on another clock), so that no
// leadership is handed to it on what its earlier process answered (clockoffset.Monitor.Forget).
func (s *Silo) connectionLost(address string) {
	for id, a := range s.liveSilos() {
		if a == address && id != s.SiloID() {
			s.offsets.Forget(id)
		}
	}
}

// answerClockProbe is the Raft transport's OnClockProbe: this silo's wall time and verdict.
func (s *Silo) answerClockProbe(uint64) (time.Time, orreryv1.ClockFitness) {
	wall, fitness := s.offsets.Answer()
	return wall, orreryv1.ClockFitness(fitness)
}

// clockReading is the Raft transport's OnClockReading.
func (s *Silo) clockReading(from, probe uint64, wall time.Time, fitness orreryv1.ClockFitness) {
	s.offsets.Observe(from, probe, wall, clockoffset.Fitness(fitness))
}

// ClockVerdict is the silo's latest judgment of its wall clock against its live peers'
// (Config.MaxClockOffset): a silo whose verdict is clockoffset.Unfit leads no partition a fit
// silo can lead, and its /readyz answers 503.
func (s *Silo) ClockVerdict() clockoffset.Verdict { return s.offsets.Verdict() }

// clockUnfit returns the error /readyz answers while the silo is clock-unfit, nil otherwise.
func (s *Silo) clockUnfit() error {
	v := s.offsets.Verdict()
	if v.Fitness != clockoffset.Unfit {
		return nil
	}
	return fmt.Errorf("%w: this silo's clock is off %d of the %d peers it measured by more than --max-clock-offset %v (the largest offset measured: %v), so it leads no partition",
		errClockUnfit, v.Far, v.Measured, v.Bound, v.Largest)
}

// mayLeadOn reports whether a leadership may be handed to silo id: its clock is not judged
// unfit, nor unjudged while this silo judges clocks (clockoffset.Monitor.MayLead).
func (s *Silo) mayLeadOn(id uint64) bool { return s.offsets.MayLead(id) }

// durationMillis renders a duration as fractional milliseconds for the admin JSON.
func durationMillis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// clockJSON is this silo's clock verdict in the admin JSON (/v1/silos, /v1/partitions,
// /readyz when unfit): fitness ("fit", "unfit", "unjudged"), the bound (null: disabled), the
// peers measured and those beyond the bound, and the offset of largest magnitude measured.
func (s *Silo) clockJSON() map[string]any {
	v := s.offsets.Verdict()
	out := map[string]any{"fitness": v.Fitness.String(), "max_clock_offset_ms": nil,
		"peers_measured": v.Measured, "peers_beyond": v.Far, "largest_offset_ms": durationMillis(v.Largest)}
	if v.Bound > 0 {
		out["max_clock_offset_ms"] = durationMillis(v.Bound)
	}
	return out
}

// peerClockJSON is one row's clock in /v1/silos: for a peer, its clock's offset from this
// silo's (positive: ahead) with the uncertainty, whether the estimate is fresh, and the
// fitness it last reported of itself (null when not measured); for this silo, its own
// fitness.
func (s *Silo) peerClockJSON(id uint64, peers map[uint64]clockoffset.Peer) any {
	if id == s.SiloID() {
		return map[string]any{"fitness": s.offsets.Verdict().Fitness.String(), "offset_ms": 0.0, "uncertainty_ms": 0.0, "fresh": true}
	}
	p, ok := peers[id]
	if !ok {
		return nil
	}
	return map[string]any{"fitness": p.Reported.String(), "offset_ms": durationMillis(p.Estimate.Offset),
		"uncertainty_ms": durationMillis(p.Estimate.Uncertainty), "fresh": p.Fresh}
}
