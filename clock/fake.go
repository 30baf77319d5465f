package clock

import (
	"sync"
	"time"
)

// Fake is a Clock that moves only when told to. Advance and AdvanceTo fire the timers that
// fall due, in instant order (ties in creation order), each on the advancing goroutine with
// Now reading the timer's own instant, and with no lock held, so a callback may use the clock
// (re-arm, stop timers). A timer created with d ≤ 0 is due at once and fires on the next
// Advance (Advance(0) suffices). Fake is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer // pending, unordered; there are few
	seq    uint64
}

type fakeTimer struct {
	clock *Fake
	at    time.Time
	seq   uint64
	f     func()
	done  bool
}

// NewFake returns a Fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake instant.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f at Now()+d.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d < 0 {
		d = 0
	}
	c.seq++
	t := &fakeTimer{clock: c, at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

// Stop cancels the timer.
func (t *fakeTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	c.remove(t)
	return true
}

// Advance moves the clock forward by d, firing every timer due on the way.
func (c *Fake) Advance(d time.Duration) {
	c.AdvanceTo(c.Now().Add(d))
}

// AdvanceTo moves the clock to target (never backward), firing every timer due at or before
// it, including timers that fired callbacks create on the way.
func (c *Fake) AdvanceTo(target time.Time) {
	for {
		c.mu.Lock()
		next := c.earliest()
		if next == nil || next.at.After(target) {
			if target.After(c.now) {
				c.now = target
			}
			c.mu.Unlock()
			return
		}
		if next.at.After(c.now) {
			c.now = next.at
		}
		next.done = true
		c.remove(next)
		c.mu.Unlock()
		next.f()
	}
}

// Next returns the instant of the earliest pending timer; ok is false when none is pending.
func (c *Fake) Next() (at time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.earliest(); t != nil {
		return t.at, true
	}
	return time.Time{}, false
}

// Pending reports how many timers are waiting to fire.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// earliest returns the pending timer that fires first; the caller holds mu.
func (c *Fake) earliest() *fakeTimer {
	var first *fakeTimer
	for _, t := range c.timers {
		if first == nil || t.at.Before(first.at) || (t.at.Equal(first.at) && t.seq < first.seq) {
			first = t
		}
	}
	return first
}

// remove drops t from the pending list; the caller holds mu.
func (c *Fake) remove(t *fakeTimer) {
	for i, p := range c.timers {
		if p == t {
			c.timers[i] = c.timers[len(c.timers)-1]
			c.timers = c.timers[:len(c.timers)-1]
			return
		}
	}
}
