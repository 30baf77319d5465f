package queue

import (
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// rapidChooser draws from a rapid.T, so failures shrink to a minimal command sequence.
type rapidChooser struct{ t *rapid.T }

func (c rapidChooser) intRange(label string, lowest, highest int) int {
	return rapid.IntRange(lowest, highest).Draw(c.t, label)
}

// seededChooser draws from a seeded generator: a fixed, reproducible random sequence.
type seededChooser struct{ r *rand.Rand }

func (c seededChooser) intRange(_ string, lowest, highest int) int {
	return lowest + c.r.IntN(highest-lowest+1)
}

// TestQueueMachineProperty runs random enqueue (of random priorities), receive (under random
// priority steps), ack, release, extend, pause, resume, cancel, retry-policy and time steps: a
// receive leases what the reference model picks (the smallest visible time minus priority ×
// step among the visible messages, expectedReceive), no id is ever lost or duplicated, leases
// are exclusive, a paused queue delivers nothing, a cancelled message is never delivered again
// and its lease commands fail, a failed release is visible again when the model's backoff says
// or leaves its lane as the policy in force says once its attempts are used up (at once, or at
// the receive after an ended lease), refused commands write nothing, and counters always equal
// a recount.
func TestQueueMachineProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newMachine(t)
		c := rapidChooser{t}
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for range steps {
			m.step(c)
		}
		m.drain()
	})
}

// TestCountersExactAfterRandomSequence runs long fixed-seed random sequences and checks
// the counters and every id after each step.
func TestCountersExactAfterRandomSequence(t *testing.T) {
	for seed := range uint64(8) {
		m := newMachine(t)
		c := seededChooser{rand.New(rand.NewPCG(seed, 0x0e4e4a))}
		for range 400 {
			m.step(c)
		}
		m.drain()
	}
}
