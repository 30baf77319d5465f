package actors

import (
	"testing"
	"time"
)

func TestBackoffSchedule(t *testing.T) {
	t.Parallel()
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2}
	// A recorded jitter source, as Call would draw from CallOptions.Jitter.
	samples := []float64{0, 0.5, 0.999, 0, 1, -3, 7}
	next := 0
	jitter := func() float64 { s := samples[next]; next++; return s }
	want := []time.Duration{
		50 * time.Millisecond,     // base 100 ms, jitter 0: half the base
		150 * time.Millisecond,    // base 200 ms, jitter 0.5: 100 + 50
		399800 * time.Microsecond, // base 400 ms, jitter 0.999: 200 + 199.8
		400 * time.Millisecond,    // base 800 ms, jitter 0
		time.Second,               // base capped at 1 s, jitter 1: the full base
		500 * time.Millisecond,    // negative jitter clamps to 0
		time.Second,               // jitter above 1 clamps to 1
	}
	for retry, w := range want {
		if got := b.Delay(retry, jitter()); got != w {
			t.Errorf("Delay(%d) = %v, want %v", retry, got, w)
		}
	}
	if got := b.Base(1000); got != time.Second {
		t.Errorf("Base(1000) = %v, want the 1 s cap", got)
	}
}

func TestBackoffDefaults(t *testing.T) {
	t.Parallel()
	var zero Backoff
	if got := zero.Base(0); got != DefaultBackoff.Initial {
		t.Errorf("zero Backoff Base(0) = %v", got)
	}
	if got := zero.Base(100); got != DefaultBackoff.Max {
		t.Errorf("zero Backoff Base(100) = %v", got)
	}
	flat := Backoff{Initial: 10 * time.Millisecond, Max: time.Second, Multiplier: 0.5}
	if got := flat.Base(5); got != 10*time.Millisecond {
		t.Errorf("multiplier below 1 must not shrink the base: %v", got)
	}
	inverted := Backoff{Initial: time.Second, Max: time.Millisecond}
	if got := inverted.Base(3); got != time.Second {
		t.Errorf("Max below Initial: Base = %v, want Initial", got)
	}
}
