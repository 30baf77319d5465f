package actors

import "time"

// Backoff is an exponential retry schedule with "equal jitter": the delay before retry n
// (n = 0 for the wait after the first failed attempt) has a base of
// Initial × Multiplier^n, capped at Max, and the actual wait is uniformly spread over
// [base/2, base). Half the base keeps retries from collapsing to zero; the other half
// decorrelates callers that failed together.
type Backoff struct {
	// Initial is the base of the first wait (default 50 ms).
	Initial time.Duration
	// Max caps the base (default 1 s).
	Max time.Duration
	// Multiplier grows the base after each retry (default 2; values below 1 mean 1).
	Multiplier float64
}

// DefaultBackoff is the schedule Call uses when CallOptions.Backoff is zero.
var DefaultBackoff = Backoff{Initial: 50 * time.Millisecond, Max: time.Second, Multiplier: 2}

// withDefaults fills zero fields from DefaultBackoff.
func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = DefaultBackoff.Initial
	}
	if b.Max <= 0 {
		b.Max = DefaultBackoff.Max
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.Multiplier == 0 {
		b.Multiplier = DefaultBackoff.Multiplier
	}
	if b.Multiplier < 1 {
		b.Multiplier = 1
	}
	return b
}

// Base returns the un-jittered delay before retry n (zero fields take their defaults).
func (b Backoff) Base(retry int) time.Duration {
	b = b.withDefaults()
	base := float64(b.Initial)
	for i := 0; i < retry && base < float64(b.Max); i++ {
		base *= b.Multiplier
	}
	if base > float64(b.Max) {
		return b.Max
	}
	return time.Duration(base)
}

// Delay returns the wait before retry n given a jitter sample in [0, 1) (values outside are
// clamped): Base(n)/2 + jitter × Base(n)/2.
func (b Backoff) Delay(retry int, jitter float64) time.Duration {
	switch {
	case jitter < 0:
		jitter = 0
	case jitter > 1:
		jitter = 1
	}
	base := b.Base(retry)
	half := base / 2
	return half + time.Duration(jitter*float64(base-half))
}
