package silo

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/cluster/clockoffset"
	"github.com/orreryhq/orrery/cluster/placement"
	"github.com/orreryhq/orrery/replication"
)

// placementEvery is how often the placement loop looks at the groups this silo leads.
const placementEvery = 500 * time.Millisecond

// balanceEvery spaces this silo's leadership transfers made to even out leaderships, so that
// each one's effect is seen before the next is decided.
const balanceEvery = 2 * time.Second

// placer is the silo's replica placement loop (docs/architecture.md, "Replicas"): for each partition this silo
// leads, it performs the step package placement decides from the group's configuration and the
// membership, one step per group per look; and it moves leaderships to even them out. A
// retired silo (cluster.Provider.Retire) counts as gone, never live; a replica removed because
// its silo has been missing beyond Config.DeadAfter retires that silo first.
type placer struct {
	s       *Silo
	started time.Time
	// lastSeen is when each silo was last in the topology.
	lastSeen     map[uint64]time.Time
	lastTransfer time.Time
	// handedOver is when handOver last asked each partition's group to transfer its
	// leadership: it asks again only after handOverEvery.
	handedOver map[int]time.Time
}

// handOverEvery spaces a clock-unfit silo's requests to hand one partition's leadership over:
// longer than Raft takes to abandon a transfer its target did not take (an election timeout).
const handOverEvery = 2 * time.Second

func newPlacer(s *Silo) *placer {
	return &placer{s: s, started: time.Now(), lastSeen: map[uint64]time.Time{}, handedOver: map[int]time.Time{}}
}

// run looks every placementEvery until ctx ends, and checks each time whether the cluster has
// removed this silo.
func (p *placer) run(ctx context.Context) {
	tick := time.NewTicker(placementEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p.look(time.Now())
		p.s.checkRemoved()
	}
}

// look performs one round of placement steps at now.
func (p *placer) look(now time.Time) {
	s := p.s
	live := make([]uint64, 0, 8)
	for id := range s.liveSilos() {
		if s.member().provider.Retired(id) {
			continue // in the topology until it learns it is retired and stops
		}
		p.lastSeen[id] = now
		live = append(live, id)
	}
	slices.Sort(live)
	membership := placement.Membership{Live: live, Gone: func(id uint64) bool {
		if s.member().provider.Retired(id) {
			return true
		}
		seen, ok := p.lastSeen[id]
		if !ok {
			seen = p.started // a silo not seen since this one started gets the whole bound
		}
		return now.Sub(seen) > s.cfg.DeadAfter
	}}
	leads := map[uint64]int{}
	for n := range s.cfg.Partitions {
		if st, ok := s.host.Status(n); ok && st.Leader != 0 {
			leads[st.Leader]++
		}
	}
	self := s.SiloID()
	draining := s.member().provider.DrainingSilos()
	unfit := s.offsets.Verdict().Fitness == clockoffset.Unfit
	if unfit {
		p.handOver(now, live, draining, leads)
	}
	for n := range s.cfg.Partitions {
		st, ok := s.host.Status(n)
		if !ok || !st.CanPropose || st.ConfChangePending {
			continue
		}
		g := placement.Group{Partition: n, Leader: self, Voters: st.Voters, Learners: st.Learners, CaughtUp: map[uint64]bool{}}
		for id, pr := range st.Progress {
			// A replica that stopped answering (paused, cut off), whose silo left the live
			// view (Raft's activity lags it by up to an election timeout, and a leadership
			// moved there stalls the group's proposals until the transfer gives up), or whose
			// silo is draining before it stops, is no place to move a leadership or promote a
			// learner to, however far its log had come.
			g.CaughtUp[id] = pr.CaughtUp && pr.Active && slices.Contains(live, id) && !slices.Contains(draining, id)
		}
		// A leadership goes only where the clock is judged fit (mayLeadOn): the same group,
		// with the other silos counted as not caught up, decides transfers.
		leadable := g
		leadable.CaughtUp = map[uint64]bool{}
		for id, ok := range g.CaughtUp {
			leadable.CaughtUp[id] = ok && s.mayLeadOn(id)
		}
		step := placement.Next(g, membership, s.cfg.Replicas)
		if step.Action == placement.Transfer {
			step = placement.Next(leadable, membership, s.cfg.Replicas)
		}
		if unfit && step.Action == placement.Transfer {
			continue // handOver moves a clock-unfit silo's leaderships
		}
		if !unfit && step.Action == placement.None && now.Sub(p.lastTransfer) >= balanceEvery {
			if to := placement.Balance(leadable, leads); to != 0 {
				step = placement.Step{Action: placement.Transfer, Replica: to}
			}
		}
		if step.Action == placement.None {
			continue
		}
		if step.Action == placement.Remove && !slices.Contains(live, step.Replica) && membership.Gone(step.Replica) {
			// Missing beyond the bound: retired for good before its replica goes, so that no
			// group adds it back should its process return on the same data dir.
			if err := s.member().provider.Retire(step.Replica); err != nil {
				s.log.Warn("could not retire a silo missing beyond the dead bound; its replica stays", "partition", n,
					"replica", cluster.FormatID(step.Replica), "err", err)
				continue
			}
		}
		if err := p.perform(n, step); err != nil {
			if !errors.Is(err, replication.ErrConfChangePending) && !errors.Is(err, replication.ErrNotLeader) {
				s.log.Warn("replica placement step failed", "partition", n, "step", step.Action.String(),
					"replica", cluster.FormatID(step.Replica), "err", err)
			}
			continue
		}
		s.log.Info("replica placement", "partition", n, "step", step.Action.String(), "replica", cluster.FormatID(step.Replica),
			"voters", formatIDs(st.Voters), "learners", formatIDs(st.Learners))
		if step.Action == placement.Transfer {
			p.lastTransfer = now
			leads[self]--
			leads[step.Replica]++
		}
	}
}

// handOver hands the leadership of every partition this clock-unfit silo leads with another
// voter to a fit one (Config.MaxClockOffset): live, active, not draining, judged fit by its own
// clock verdict, caught up if one is (Raft brings the one it hands to up to date first), the
// one leading fewest partitions (leads), lowest id among equals. A transfer under way to the
// same voter is left to finish; Raft abandons one the target does not take within an election
// timeout, and the next look tries again.
func (p *placer) handOver(now time.Time, live, draining []uint64, leads map[uint64]int) {
	s := p.s
	self := s.SiloID()
	for n := range s.cfg.Partitions {
		st, ok := s.host.Status(n)
		if !ok || st.Leader != self || len(st.Voters) < 2 || now.Sub(p.handedOver[n]) < handOverEvery {
			continue
		}
		var to uint64
		toCaughtUp := false
		for _, v := range st.Voters {
			pr := st.Progress[v]
			if v == self || !pr.Active || !slices.Contains(live, v) || slices.Contains(draining, v) || !s.mayLeadOn(v) {
				continue
			}
			better := to == 0 || (pr.CaughtUp && !toCaughtUp) ||
				(pr.CaughtUp == toCaughtUp && (leads[v] < leads[to] || (leads[v] == leads[to] && v < to)))
			if better {
				to, toCaughtUp = v, pr.CaughtUp
			}
		}
		if to == 0 {
			continue
		}
		if err := s.host.TransferLeadership(n, to); err != nil {
			if !errors.Is(err, replication.ErrNotLeader) {
				s.log.Warn("could not hand a leadership over while clock-unfit", "partition", n, "replica", cluster.FormatID(to), "err", err)
			}
			continue
		}
		p.handedOver[n] = now
		s.log.Info("replica placement", "partition", n, "step", placement.Transfer.String(), "replica", cluster.FormatID(to),
			"reason", "clock-unfit")
		leads[self]--
		leads[to]++
	}
}

// perform proposes step in partition n's group.
func (p *placer) perform(n int, step placement.Step) error {
	h := p.s.host
	switch step.Action {
	case placement.AddLearner:
		return h.AddLearner(n, step.Replica)
	case placement.Promote:
		return h.PromoteLearner(n, step.Replica)
	case placement.Remove:
		return h.RemoveReplica(n, step.Replica)
	case placement.Transfer:
		return h.TransferLeadership(n, step.Replica)
	}
	return nil
}

// hasPeers reports whether live (the live silos) holds a silo other than self.
func hasPeers(live map[uint64]string, self uint64) bool {
	for id := range live {
		if id != self {
			return true
		}
	}
	return false
}

// drainTimeout bounds how long a graceful stop waits for this silo's leaderships to move.
const drainTimeout = 5 * time.Second

// drain hands each leadership this silo holds to a caught-up voter on another silo, and waits
// until it leads none or drainTimeout passed: the partitions are served by their new leaders
// without waiting for an election timeout once this silo is gone.
//
// A partition whose only voter is this silo has nobody to take it and is not waited for, and a
// silo with no live peer (nobody can be handing it a leadership either) does not wait for the
// announcement to spread: a lone silo stops at once.
func (s *Silo) drain() {
	self := s.SiloID()
	if hasPeers(s.liveSilos(), self) {
		// Peers move no leadership here once they have heard the announcement: give it one
		// placement period to spread and for every look that began before it to end, so that a
		// leadership a peer was about to hand here is handed before this silo hands its own over.
		s.member().provider.SetDraining()
		time.Sleep(placementEvery)
	}
	deadline := time.Now().Add(drainTimeout)
	draining := s.member().provider.DrainingSilos()
	for {
		led := 0
		for n := range s.cfg.Partitions {
			st, ok := s.host.Status(n)
			if !ok || st.Leader != self || !slices.ContainsFunc(st.Voters, func(v uint64) bool { return v != self }) {
				continue
			}
			led++
			// A voter whose clock is judged fit first; failing one (peers that do not answer
			// clock probes: an older build in a rolling upgrade), any other: one that is
			// clock-unfit or unjudged refuses the transfer, and the group elects once this
			// silo is gone.
			var to uint64
			toFit := false
			for _, v := range st.Voters {
				_, live := s.liveSilos()[v]
				if pr := st.Progress[v]; v != self && pr.Active && pr.CaughtUp && live && !slices.Contains(draining, v) {
					fit := s.mayLeadOn(v)
					if to == 0 || (fit && !toFit) || (fit == toFit && v < to) {
						to, toFit = v, fit
					}
				}
			}
			if to != 0 {
				_ = s.host.TransferLeadership(n, to)
			}
		}
		if led == 0 {
			return
		}
		if time.Now().After(deadline) {
			s.log.Warn("stopping while still leading partitions", "count", led)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
