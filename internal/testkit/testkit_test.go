package testkit

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTB records the failure instead of failing the real test, and stops the calling
// goroutine as t.Fatalf would.
type fakeTB struct {
	testing.TB
	failed  bool
	message string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = true
	f.message = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls Eventually with a fakeTB on its own goroutine, as the testing package runs a test,
// and reports whether it returned and what the fakeTB saw.
func run(within time.Duration, cond func() bool) (returned bool, fake *fakeTB) {
	fake = &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Eventually(fake, within, "the thing", cond)
		returned = true
	}()
	<-done
	return returned, fake
}

func TestEventuallyReturnsOnceCondHolds(t *testing.T) {
	var calls atomic.Int32
	returned, fake := run(5*time.Second, func() bool { return calls.Add(1) >= 3 })
	if !returned || fake.failed {
		t.Fatalf("Eventually did not return (failed %v: %q)", fake.failed, fake.message)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("cond called %d times, want 3 (stop as soon as it holds)", n)
	}
}

func TestEventuallyChecksFirstWithoutWaiting(t *testing.T) {
	took := Eventually(t, time.Second, "an immediate truth", func() bool { return true })
	if took > 100*time.Millisecond {
		t.Fatalf("Eventually took %v for a condition that held at once", took)
	}
}

func TestEventuallyFailsWhenCondNeverHolds(t *testing.T) {
	start := time.Now()
	returned, fake := run(200*time.Millisecond, func() bool { return false })
	if returned {
		t.Fatal("Eventually returned although cond never held")
	}
	if !fake.failed {
		t.Fatal("Eventually did not fail the test")
	}
	if want := "the thing: not within 200ms"; fake.message != want {
		t.Fatalf("failure message %q, want %q", fake.message, want)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Fatalf("Eventually gave up after %v, before its bound", took)
	}
}

// untilTaken calls UntilTaken with a fakeTB on its own goroutine, as run does for Eventually.
func untilTaken(within time.Duration, call func() error) (returned bool, fake *fakeTB) {
	fake = &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		UntilTaken(fake, within, "the command", call)
		returned = true
	}()
	<-done
	return returned, fake
}

// TestUntilTakenRetriesOnlyWhileTheApplyVersionRefuses: an "apply version" refusal is called
// again until the call succeeds; any other error fails at once, naming it.
func TestUntilTakenRetriesOnlyWhileTheApplyVersionRefuses(t *testing.T) {
	var calls atomic.Int32
	returned, fake := untilTaken(5*time.Second, func() error {
		if calls.Add(1) < 3 {
			return fmt.Errorf("mutations[0]: carries field 10 of orrery.v1.Enqueue, which apply version 19 does not take")
		}
		return nil
	})
	if !returned || fake.failed || calls.Load() != 3 {
		t.Fatalf("after two refusals: returned %v, failed %v (%q), %d calls; want a return after 3", returned, fake.failed, fake.message, calls.Load())
	}
	calls.Store(0)
	returned, fake = untilTaken(5*time.Second, func() error {
		calls.Add(1)
		return fmt.Errorf("priority: must be 0..9")
	})
	if returned || fake.message != "the command: priority: must be 0..9" || calls.Load() != 1 {
		t.Fatalf("another error: returned %v, message %q, %d calls; want a failure at the first", returned, fake.message, calls.Load())
	}
}
