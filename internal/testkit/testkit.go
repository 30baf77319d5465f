// Package testkit owns the helpers the module's tests share, so that every package polls,
// waits and fails in the same way instead of keeping its own private copy.
package testkit

import (
	"strings"
	"testing"
	"time"
)

// Poll intervals of Eventually: the first retry comes after firstPoll, and each later one
// waits twice as long as the one before, up to maxPoll.
const (
	firstPoll = time.Millisecond
	maxPoll   = 50 * time.Millisecond
)

// Eventually polls cond until it returns true and returns how long that took. cond is called
// once straight away, then again after short pauses that back off from 1 ms to 50 ms. If cond
// has not held within the given time, Eventually fails the test with
// t.Fatalf("%s: not within %v", what, within); what names the awaited state, as in
// "the leader to be elected".
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	pause := firstPoll
	for !cond() {
		elapsed := time.Since(start)
		if elapsed > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		if left := within - elapsed; pause > left {
			time.Sleep(left + time.Millisecond) // one last look just past the bound
		} else {
			time.Sleep(pause)
		}
		if pause *= 2; pause > maxPoll {
			pause = maxPoll
		}
	}
	return time.Since(start)
}

// UntilTaken calls call until it returns nil, again after Eventually's pauses while its error
// says that the partition does not take the command at its apply version yet (the error names
// "apply version"; a partition's leader raises the version when it opens). Any other error, or
// one that lasts beyond within, fails the test with t.Fatalf("%s: %v", what, err).
func UntilTaken(t testing.TB, within time.Duration, what string, call func() error) {
	t.Helper()
	var err error
	Eventually(t, within, what+" once the partition takes its apply version", func() bool {
		if err = call(); err != nil && !strings.Contains(err.Error(), "apply version") {
			t.Fatalf("%s: %v", what, err)
		}
		return err == nil
	})
}
