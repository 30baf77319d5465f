// Package clockoffset owns a silo's view of how far its wall clock is from its peers': the
// estimate one probe exchange gives (NTP's, with half the round trip as its uncertainty), the
// latest estimate per peer, the fitness verdict drawn from them against the bound
// (Config.MaxOffset), and the Monitor that probes the live peers on a timer. A silo whose
// verdict is Unfit leads no partition, since the logged time its leaders stamp comes from its
// wall clock (docs/architecture.md, "Clock offset").
//
// The estimate and the verdict are pure (Measure, Judge); the Monitor is their driver: it reads
// the wall clock and a monotonic one through the clock seam and sends probes through a
// function the silo gives it (the Raft transport between silos), so tests drive it with fake
// clocks and an in-memory exchange.
package clockoffset

import "time"

// Estimate is one probe exchange's estimate of a peer's wall clock relative to this silo's.
type Estimate struct {
	// Offset is the peer's wall time minus this silo's at the same instant: positive when the
	// peer's clock is ahead.
	Offset time.Duration
	// Uncertainty bounds the error of Offset, given that the peer read its clock at some
	// instant of the round trip: half the round trip.
	Uncertainty time.Duration
	// At is when the reply arrived, on the Monitor's monotonic clock.
	At time.Time
}

// Measure is the estimate of a probe sent when this silo's wall clock read sentWall, answered
// with the peer's wall time peerWall, whose reply arrived roundTrip later on a monotonic clock:
// the peer's reading is taken to be at the middle of the round trip, sentWall + roundTrip/2,
// give or take roundTrip/2. A negative roundTrip counts as zero.
func Measure(sentWall time.Time, roundTrip time.Duration, peerWall time.Time, at time.Time) Estimate {
	roundTrip = max(roundTrip, 0)
	half := roundTrip / 2
	return Estimate{Offset: peerWall.Sub(sentWall.Add(half)), Uncertainty: half, At: at}
}

// Beyond reports whether the estimate puts the peer's clock more than bound away from this
// silo's whatever its error: |Offset| − Uncertainty > bound.
func (e Estimate) Beyond(bound time.Duration) bool {
	return abs(e.Offset)-e.Uncertainty > bound
}

// Fitness is a silo's verdict on its own clock, which it also tells the peers that probe it.
type Fitness int

// Fitness values; their numbers are those of the wire's ClockFitness.
const (
	// Unjudged: the silo has not measured enough of its live peers to tell (it has just
	// started or rejoined, or its probes go unanswered), or its view is split evenly. It may
	// lead; its peers hand it no leadership until it has judged itself Fit.
	Unjudged Fitness = 0
	// Fit: the silo's clock is within the bound of a strict majority of the silos it sees,
	// itself counted (or the bound is 0: disabled).
	Fit Fitness = 1
	// Unfit: the silo's clock is beyond the bound from a strict majority of the silos it
	// sees, itself counted on its own side: it leads no partition.
	Unfit Fitness = 2
)

// String names the fitness as the admin JSON and the logs write it.
func (f Fitness) String() string {
	switch f {
	case Fit:
		return "fit"
	case Unfit:
		return "unfit"
	default:
		return "unjudged"
	}
}

// Verdict is a silo's judgment of its own clock from its estimates of its live peers' clocks.
type Verdict struct {
	Fitness Fitness
	// Measured counts the live peers with a fresh estimate; Far those of them beyond the bound.
	Measured, Far int
	// Largest is the offset of largest magnitude among the fresh estimates (0 when none).
	Largest time.Duration
	// Bound is the bound the verdict was judged against (0: disabled).
	Bound time.Duration
}

// Judge returns the verdict of the fresh estimates of the live peers (livePeers of them,
// measured or not) against bound. Counting the silos of its view, itself among those within:
// this silo is Unfit when those beyond the bound are a strict majority (2 × far > silos), even
// if every peer not measured yet is within; Fit when those within are a strict majority even
// if every peer not measured yet is beyond; Unjudged otherwise, a tie included (nobody can
// tell whose clock is wrong: of two silos whose clocks disagree, neither is judged unfit, and
// neither is handed a leadership). A lone silo is Fit; the bound 0 disables the judgment
// (always Fit).
func Judge(estimates []Estimate, livePeers int, bound time.Duration) Verdict {
	v := Verdict{Measured: len(estimates), Bound: bound}
	for _, e := range estimates {
		if abs(e.Offset) > abs(v.Largest) {
			v.Largest = e.Offset
		}
		if e.Beyond(bound) {
			v.Far++
		}
	}
	unmeasured := max(livePeers-len(estimates), 0)
	silos := len(estimates) + unmeasured + 1
	switch {
	case bound <= 0:
		v.Fitness = Fit
		v.Far = 0
	case 2*v.Far > silos:
		v.Fitness = Unfit
	case 2*(v.Far+unmeasured) < silos:
		v.Fitness = Fit
	default:
		v.Fitness = Unjudged
	}
	return v
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
