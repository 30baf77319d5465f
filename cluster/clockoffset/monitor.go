package clockoffset

import (
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/orreryhq/orrery/clock"
)

// Defaults of Config.
const (
	// DefaultInterval is how often the Monitor probes every live peer.
	DefaultInterval = 2 * time.Second
	// DefaultMaxOffset is the bound silo.Config.MaxClockOffset defaults to.
	DefaultMaxOffset = 500 * time.Millisecond
)

// staleIntervals is how many intervals an estimate counts after it was taken, and a probe
// waits for its reply: a peer whose probes go unanswered that long drops out of the verdict.
const staleIntervals = 3

// unmeasuredSpeedup divides the interval before the next round while a peer first seen live
// less than staleIntervals intervals ago has not answered yet, so that a silo that just
// started, or just saw a peer, judges within a fraction of the interval (and one that never
// answers, an older build, is not probed faster for long).
const unmeasuredSpeedup = 8

// Config configures a Monitor. Zero fields take their defaults.
type Config struct {
	// Wall is the silo's wall clock, the one its leaders stamp logged time from: probes carry
	// its reading and answers give it (required).
	Wall clock.Clock
	// Mono times the round trips, the estimates' freshness and the probe timer: a clock that
	// does not jump (default clock.Real(), whose readings carry Go's monotonic clock).
	Mono clock.Clock
	// MaxOffset is the bound: beyond it from most of its peers this silo is Unfit. 0 disables
	// the judgment (the verdict is always Fit); offsets are still measured.
	MaxOffset time.Duration
	// Interval is the probe period (default DefaultInterval).
	Interval time.Duration
	// Peers returns the live peer silos, this one excluded, each with the identity of its
	// current incarnation: a value that changes whenever the peer starts again or rejoins (the
	// silo gives its member id). An estimate and a reported verdict belong to the incarnation
	// that answered: a peer that restarted counts as not measured until its new incarnation
	// answers (required).
	Peers func() map[uint64]string
	// Send sends probe number probe, carrying this silo's wall time sentWall, to peer to; the
	// reply comes back through Observe, or never (required). It must not block.
	Send func(to, probe uint64, sentWall time.Time)
	// OnChange, when set, is called after each change of the verdict's Fitness, with the
	// verdict current when it runs (one call at a time, on the goroutine that judged the
	// change, with no lock of the Monitor's held; a call may repeat the previous one's Fitness).
	OnChange func(Verdict)
	// Log receives one WARN when the silo becomes Unfit and one INFO when it stops being so
	// (default slog.Default()).
	Log *slog.Logger
}

// Peer is what the Monitor knows of one peer: its latest estimate and the fitness the peer
// last reported of itself.
type Peer struct {
	// Incarnation is the incarnation of the peer (Config.Peers) that answered.
	Incarnation string
	Estimate    Estimate
	// Reported is the peer's own verdict, as its last answer carried it.
	Reported Fitness
	// Fresh reports whether the estimate is recent enough to count (staleIntervals intervals).
	Fresh bool
}

// Monitor probes a silo's live peers every Interval and judges the silo's clock from the
// replies (Judge). It is safe for concurrent use.
type Monitor struct {
	cfg Config

	// notifyMu serializes the OnChange calls.
	notifyMu sync.Mutex

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]probe // by probe number
	peers   map[uint64]Peer
	// seen is when each live peer's incarnation was first seen live (forgotten once it is
	// not).
	seen    map[uint64]seenAt
	verdict Verdict
	timer   clock.Timer
	stopped bool
}

// probe is a probe in flight.
type probe struct {
	to          uint64
	incarnation string // to's, when sent
	sentWall    time.Time
	sentMono    time.Time
}

// seenAt is when an incarnation of a peer was first seen live.
type seenAt struct {
	incarnation string
	at          time.Time
}

// New validates cfg and returns a Monitor that has judged nothing yet: Unjudged (Fit when the
// bound is 0), whatever Peers says now, since a silo that has not joined its cluster yet sees
// no peer and would judge itself a lone silo, and its answers would tell its peers it may
// lead. Start begins the probes; its first round judges (a silo that is alone then is Fit at
// once).
func New(cfg Config) (*Monitor, error) {
	switch {
	case cfg.Wall == nil:
		return nil, errors.New("clockoffset: Config.Wall is required")
	case cfg.Peers == nil:
		return nil, errors.New("clockoffset: Config.Peers is required")
	case cfg.Send == nil:
		return nil, errors.New("clockoffset: Config.Send is required")
	case cfg.MaxOffset < 0:
		return nil, errors.New("clockoffset: Config.MaxOffset must not be negative")
	}
	if cfg.Mono == nil {
		cfg.Mono = clock.Real()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	m := &Monitor{cfg: cfg, pending: map[uint64]probe{}, peers: map[uint64]Peer{}, seen: map[uint64]seenAt{}}
	m.verdict = Verdict{Fitness: Unjudged, Bound: cfg.MaxOffset}
	if cfg.MaxOffset == 0 {
		m.verdict.Fitness = Fit
	}
	return m, nil
}

// Start sends the first probes at once and then every Interval (an eighth of it while a peer
// just seen has not answered yet), until Stop.
func (m *Monitor) Start() { m.round() }

// Stop ends the probes; replies that arrive later are ignored.
func (m *Monitor) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = true
	if m.timer != nil {
		m.timer.Stop()
	}
}

// round judges again (estimates age out, peers leave), probes every live peer and arms the
// next round.
func (m *Monitor) round() {
	peers := m.cfg.Peers()
	now := m.cfg.Mono.Now()
	wall := m.cfg.Wall.Now()
	type send struct{ to, id uint64 }
	var sends []send
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	for id, p := range m.pending {
		if now.Sub(p.sentMono) > m.stale() {
			delete(m.pending, id)
		}
	}
	for _, to := range slices.Sorted(maps.Keys(peers)) {
		m.nextID++
		m.pending[m.nextID] = probe{to: to, incarnation: peers[to], sentWall: wall, sentMono: now}
		sends = append(sends, send{to, m.nextID})
	}
	change, _ := m.judgeLocked(peers, now)
	next := m.cfg.Interval
	for id, seen := range m.seen {
		if incarnation, live := peers[id]; !live || incarnation != seen.incarnation {
			delete(m.seen, id)
		}
	}
	for id, incarnation := range peers {
		first, ok := m.seen[id]
		if !ok {
			first = seenAt{incarnation: incarnation, at: now}
			m.seen[id] = first
		}
		if _, measured := m.peers[id]; !measured && now.Sub(first.at) < m.stale() {
			next = m.cfg.Interval / unmeasuredSpeedup // a peer just seen: judge soon
		}
	}
	m.timer = m.cfg.Mono.AfterFunc(next, m.round)
	m.mu.Unlock()
	m.changed(change)
	for _, s := range sends {
		m.cfg.Send(s.to, s.id, wall)
	}
}

// stale is how long an estimate counts and a probe waits.
func (m *Monitor) stale() time.Duration { return staleIntervals * m.cfg.Interval }

// Answer is what this silo answers a peer's probe with: its wall time now and its verdict.
func (m *Monitor) Answer() (wall time.Time, fitness Fitness) {
	wall = m.cfg.Wall.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	return wall, m.verdict.Fitness
}

// Observe takes peer from's answer to probe number probeID: its wall time and its own
// verdict. An answer to no probe in flight (already answered, expired, from another silo than
// the one probed) is ignored.
func (m *Monitor) Observe(from, probeID uint64, peerWall time.Time, reported Fitness) {
	live := m.cfg.Peers()
	now := m.cfg.Mono.Now()
	m.mu.Lock()
	p, ok := m.pending[probeID]
	if !ok || p.to != from || m.stopped {
		m.mu.Unlock()
		return
	}
	delete(m.pending, probeID)
	if incarnation, ok := live[from]; !ok || incarnation != p.incarnation {
		// Sent to an incarnation no longer live: what answered may not be the one it measures.
		m.mu.Unlock()
		return
	}
	m.peers[from] = Peer{Incarnation: p.incarnation, Estimate: Measure(p.sentWall, now.Sub(p.sentMono), peerWall, now), Reported: reported}
	change, _ := m.judgeLocked(live, now)
	m.mu.Unlock()
	m.changed(change)
}

// judgeLocked forgets the peers no longer live and those that started again since they
// answered, judges the fresh estimates of the others and reports whether the fitness changed;
// the caller holds mu.
func (m *Monitor) judgeLocked(live map[uint64]string, now time.Time) (changed bool, v Verdict) {
	for id, p := range m.peers {
		if incarnation, ok := live[id]; !ok || incarnation != p.Incarnation {
			delete(m.peers, id)
		}
	}
	var fresh []Estimate
	for id := range live {
		if p, ok := m.peers[id]; ok && now.Sub(p.Estimate.At) <= m.stale() {
			fresh = append(fresh, p.Estimate)
		}
	}
	v = Judge(fresh, len(live), m.cfg.MaxOffset)
	changed = v.Fitness != m.verdict.Fitness
	before := m.verdict
	m.verdict = v
	if changed {
		switch {
		case v.Fitness == Unfit:
			m.cfg.Log.Warn("clock offset beyond the bound from most peers: this silo is clock-unfit, hands over and takes no leadership",
				"largest_offset", v.Largest, "max_clock_offset", v.Bound, "peers_beyond", v.Far, "peers_measured", v.Measured)
		case before.Fitness == Unfit:
			m.cfg.Log.Info("clock offset back within the bound: this silo may lead again",
				"largest_offset", v.Largest, "max_clock_offset", v.Bound, "peers_beyond", v.Far, "peers_measured", v.Measured, "fitness", v.Fitness.String())
		}
	}
	return changed, v
}

// changed calls OnChange when the fitness changed, one call at a time and with the verdict
// current then, so that of two changes judged on two goroutines the last call carries the
// latest.
func (m *Monitor) changed(change bool) {
	if !change || m.cfg.OnChange == nil {
		return
	}
	m.notifyMu.Lock()
	defer m.notifyMu.Unlock()
	m.cfg.OnChange(m.Verdict())
}

// Verdict returns the latest verdict.
func (m *Monitor) Verdict() Verdict {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.verdict
}

// Peers returns what the Monitor knows of each live peer it has an estimate of.
func (m *Monitor) Peers() map[uint64]Peer {
	now := m.cfg.Mono.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := maps.Clone(m.peers)
	for id, p := range out {
		p.Fresh = now.Sub(p.Estimate.At) <= m.stale()
		out[id] = p
	}
	return out
}

// Forget drops what the Monitor knows of peer, its estimate and the verdict it reported, and
// the probes in flight to it: the silo lost its connection to the peer, whose process may have
// died and started again under the same incarnation as far as the live view yet knows. Until
// peer answers again it counts as not measured, and MayLead is false.
func (m *Monitor) Forget(peer uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.peers, peer)
	for id, p := range m.pending {
		if p.to == peer {
			delete(m.pending, id)
		}
	}
}

// MayLead reports whether a leadership may be handed to peer: the latest fresh answer of its
// live incarnation reported it Fit (an answer of an incarnation before its restart does not
// count); with the judgment disabled here (MaxOffset 0), unless it reported itself Unfit.
func (m *Monitor) MayLead(peer uint64) bool {
	incarnation, live := m.cfg.Peers()[peer]
	now := m.cfg.Mono.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.peers[peer]
	ok = ok && live && p.Incarnation == incarnation
	if m.cfg.MaxOffset == 0 {
		return !ok || p.Reported != Unfit
	}
	return ok && now.Sub(p.Estimate.At) <= m.stale() && p.Reported == Fit
}
