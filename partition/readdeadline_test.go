package partition

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/clock"
)

// steppingClock is a real clock whose Now moves a step further than the last Now whenever
// step is set, so that each read of the grain's clock comes after the one before.
type steppingClock struct {
	clock.Clock
	step atomic.Int64 // a duration
	last atomic.Int64 // the last instant read, Unix ns
}

func (c *steppingClock) Now() time.Time {
	now := c.Clock.Now().UnixNano()
	if step := c.step.Load(); step > 0 {
		now = max(now, c.last.Load()+step)
	}
	c.last.Store(now)
	return time.Unix(0, now)
}

// TestAReadPastItsBudgetIsRefused: a read whose caller's budget has run out by the time the
// partition comes to it is answered DeadlineExceeded, and one within its budget is answered.
func TestAReadPastItsBudgetIsRefused(t *testing.T) {
	clk := &steppingClock{Clock: clock.Real()}
	h := newHarness(t, func(c *Config) { c.Clock = clk })
	read := func(budget time.Duration) *orreryv1.InspectReply {
		return request[*orreryv1.InspectReply](h.t, h.system, h.pid, &orreryv1.InspectRequest{Principal: "alice", BudgetMicros: budget.Microseconds(),
			Target: &orreryv1.InspectRequest_Lane{Lane: &orreryv1.InspectLane{Lane: lane, MaxMessages: 10}}})
	}
	if r := read(time.Minute); r.GetError() != nil {
		t.Fatalf("a read within its budget: %v", r.GetError())
	}
	clk.step.Store(int64(time.Second)) // the partition comes to the read a second after it arrived
	r := read(500 * time.Millisecond)
	if err := orrery.FromProto(r.GetError()); !errors.Is(err, orrery.ErrDeadlineExceeded) || len(r.GetMessages()) != 0 {
		t.Fatalf("a read past its budget: %v (%d messages), want DeadlineExceeded and no answer", err, len(r.GetMessages()))
	}
	if r := read(time.Minute); r.GetError() != nil {
		t.Fatalf("a read with a minute's budget: %v", r.GetError())
	}
}
