// Package clock owns the time seam of the layers outside the deterministic core: the Clock
// interface (read the time, run a function later), Real, backed by package time, and Fake, a
// manually advanced twin whose timers fire in time order on the goroutine that advances it, so
// tests of timer-driven code are deterministic.
package clock

import "time"

// Clock tells the time and runs functions later. Implementations are safe for concurrent use.
type Clock interface {
	// Now returns the current instant.
	Now() time.Time
	// AfterFunc calls f, on a goroutine of the clock's choosing, once d has elapsed (at once
	// for d ≤ 0 on the Real clock; on the next Advance for the Fake). Stop cancels it.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop cancels the call; it reports false if the call already ran or was stopped.
	Stop() bool
}

// Real returns the wall clock of package time.
func Real() Clock { return wall{} }

// wall is the Clock of package time.
type wall struct{}

// Now returns time.Now().
func (wall) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (wall) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
