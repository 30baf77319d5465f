package clock

import (
	"sync"
	"testing"
	"time"
)

// driver moves a clock under test: Real sleeps, Fake advances.
type driver struct {
	name    string
	clock   Clock
	advance func(d time.Duration)
	// settle waits until fired callbacks have run (Real fires them on other goroutines).
	settle func()
}

func drivers() []func() driver {
	return []func() driver{
		func() driver {
			return driver{name: "real", clock: Real(), advance: time.Sleep, settle: func() { time.Sleep(20 * time.Millisecond) }}
		},
		func() driver {
			f := NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			return driver{name: "fake", clock: f, advance: f.Advance, settle: func() {}}
		},
	}
}

// recorder collects the order callbacks ran in.
type recorder struct {
	mu    sync.Mutex
	fired []string
}

func (r *recorder) add(name string) func() {
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.fired = append(r.fired, name)
	}
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.fired...)
}

// TestConformance runs the Clock contract against Real and Fake.
func TestConformance(t *testing.T) {
	for _, mk := range drivers() {
		d := mk()
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			start := d.clock.Now()
			rec := &recorder{}
			d.clock.AfterFunc(500*time.Millisecond, rec.add("late"))
			d.clock.AfterFunc(20*time.Millisecond, rec.add("early"))
			stopped := d.clock.AfterFunc(40*time.Millisecond, rec.add("stopped"))
			if !stopped.Stop() {
				t.Fatal("Stop of a pending timer reported false")
			}
			if stopped.Stop() {
				t.Fatal("second Stop reported true")
			}
			if got := rec.got(); len(got) != 0 {
				t.Fatalf("fired before the clock moved: %v", got)
			}
			d.advance(60 * time.Millisecond)
			d.settle()
			if got := rec.got(); len(got) != 1 || got[0] != "early" {
				t.Fatalf("after 60ms fired %v, want [early]", got)
			}
			d.advance(500 * time.Millisecond)
			d.settle()
			if got := rec.got(); len(got) != 2 || got[1] != "late" {
				t.Fatalf("after 560ms fired %v, want [early late]", got)
			}
			if elapsed := d.clock.Now().Sub(start); elapsed < 560*time.Millisecond {
				t.Fatalf("Now moved %v, want at least 560ms", elapsed)
			}
			fired := d.clock.AfterFunc(time.Millisecond, func() {})
			d.advance(5 * time.Millisecond)
			d.settle()
			if fired.Stop() {
				t.Fatal("Stop after firing reported true")
			}
		})
	}
}

func TestFakeFiresInOrderAtTimerInstant(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewFake(start)
	var seen []time.Duration
	chained := 0
	var chain func()
	chain = func() {
		seen = append(seen, c.Now().Sub(start))
		if chained++; chained < 3 {
			c.AfterFunc(time.Second, chain) // re-armed from inside a callback
		}
	}
	c.AfterFunc(time.Second, chain)
	c.AfterFunc(1500*time.Millisecond, func() { seen = append(seen, -c.Now().Sub(start)) })
	if at, ok := c.Next(); !ok || !at.Equal(start.Add(time.Second)) {
		t.Fatalf("Next = %v %v", at, ok)
	}
	c.Advance(10 * time.Second)
	want := []time.Duration{time.Second, -1500 * time.Millisecond, 2 * time.Second, 3 * time.Second}
	if len(seen) != len(want) {
		t.Fatalf("fired at %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("fired at %v, want %v", seen, want)
		}
	}
	if got := c.Now().Sub(start); got != 10*time.Second {
		t.Fatalf("Now after Advance = +%v, want +10s", got)
	}
	if c.Pending() != 0 {
		t.Fatalf("Pending = %d, want 0", c.Pending())
	}
	if _, ok := c.Next(); ok {
		t.Fatal("Next reports a timer after all fired")
	}
}

func TestFakeZeroDelayFiresOnNextAdvance(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	fired := false
	c.AfterFunc(-time.Second, func() { fired = true })
	if fired {
		t.Fatal("fired inside AfterFunc")
	}
	if c.Pending() != 1 {
		t.Fatalf("Pending = %d, want 1", c.Pending())
	}
	c.Advance(0)
	if !fired {
		t.Fatal("did not fire on Advance(0)")
	}
}

func TestFakeAdvanceToNeverGoesBack(t *testing.T) {
	start := time.Unix(100, 0)
	c := NewFake(start)
	c.AdvanceTo(start.Add(-time.Hour))
	if !c.Now().Equal(start) {
		t.Fatalf("Now = %v, want %v", c.Now(), start)
	}
}
