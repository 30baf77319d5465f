package partition

import (
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/grains/input"
)

// newFakeClockHarness is a harness whose host and grain run on one fake clock: time moves only
// when the test advances it.
func newFakeClockHarness(t *testing.T, mutate func(*Config)) (*harness, *clock.Fake) {
	fake := clock.NewFake(time.Now().Truncate(time.Second))
	h := newHostHarness(t, func(c *HostConfig) { c.Clock = fake }, func(c *Config) {
		c.Clock = fake
		if mutate != nil {
			mutate(c)
		}
	})
	return h, fake
}

// TestLongPollWaitEndsOnTheClock: a parked receive on an empty queue is answered, not visible,
// when the grain's clock passes its wait, and not a moment before; no real time passes for it.
func TestLongPollWaitEndsOnTheClock(t *testing.T) {
	h, fake := newFakeClockHarness(t, nil)
	out := h.send(command("r1", 30*time.Second, receive(1)))
	h.waitParked(1)
	fake.Advance(29 * time.Second)
	h.status() // the grain has handled whatever the clock's timers sent it before this
	select {
	case o := <-out:
		t.Fatalf("answered %v before its wait ended", o.reply)
	default:
	}
	fake.Advance(time.Second)
	reply := replyOf(t, out)
	if reply.GetVisible() || reply.GetError() != nil || len(reply.GetReceipt()) != 0 {
		t.Fatalf("a wait that ended answered %v, want not visible and no receipt", reply)
	}
}

// TestOwnEmissionFollowsTheClock: a schedule due an hour ahead on the grain's clock is emitted
// when the clock reaches its due instant, at a logged time (the Host's clock) not before it.
func TestOwnEmissionFollowsTheClock(t *testing.T) {
	h, fake := newFakeClockHarness(t, withOwnEmission)
	due := fake.Now().Add(time.Hour)
	receipt(t, h.do(command("configure", 0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
		Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: scheduleID, Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{
			Every: &orreryv1.EverySpec{IntervalMicros: 3600 * input.Second, FirstDueAtUnixMicros: due.UnixMicro()}}}}}}})))
	fake.Advance(59 * time.Minute)
	h.status()
	if msgs := h.lane(); len(msgs) != 0 {
		t.Fatalf("%d messages a minute before the due instant", len(msgs))
	}
	fake.AdvanceTo(due)
	deadline := time.Now().Add(10 * time.Second)
	for len(h.lane()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("nothing emitted once the clock reached the due instant")
		}
	}
	m := h.lane()[0]
	if m.GetOccurrence().GetNominalDueAtUnixMicros() != due.UnixMicro() || m.GetEnqueuedAtUnixMicros() < due.UnixMicro() {
		t.Fatalf("occurrence due %d enqueued at %d, want due %d and not before it", m.GetOccurrence().GetNominalDueAtUnixMicros(), m.GetEnqueuedAtUnixMicros(), due.UnixMicro())
	}
}
