package actors

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPoolReusesAGoroutineForSequentialWork(t *testing.T) {
	t.Parallel()
	p := NewPool(4, time.Minute)
	var ran atomic.Int32
	for range 100 {
		done := make(chan struct{})
		p.Go(func() { ran.Add(1); close(done) })
		<-done
		waitFor(t, func() bool { return p.Idle() == 1 }) // back in the pool before the next
	}
	if ran.Load() != 100 {
		t.Fatalf("ran %d functions, want 100", ran.Load())
	}
	if got := p.Started(); got != 1 {
		t.Errorf("started %d goroutines for sequential work, want 1", got)
	}
}

func TestPoolNeverQueuesBehindBusyGoroutines(t *testing.T) {
	t.Parallel()
	p := NewPool(2, time.Minute)
	const n = 50
	var arrived sync.WaitGroup
	arrived.Add(n)
	release := make(chan struct{})
	for range n {
		p.Go(func() { arrived.Done(); <-release })
	}
	arrived.Wait() // every function runs at once, though only two goroutines may wait idle
	close(release)
	waitFor(t, func() bool { return p.Idle() == 2 })
	if got := p.Started(); got != n {
		t.Errorf("started %d goroutines, want %d", got, n)
	}
}

func TestPoolGoroutinesExitAfterIdling(t *testing.T) {
	t.Parallel()
	p := NewPool(8, 20*time.Millisecond)
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range 5 {
		wg.Add(1)
		p.Go(func() { defer wg.Done(); <-release })
	}
	close(release)
	wg.Wait()
	waitFor(t, func() bool { return p.Idle() == 5 })
	waitFor(t, func() bool { return p.Idle() == 0 })
	done := make(chan struct{})
	p.Go(func() { close(done) }) // after the idle ones left, work still runs
	<-done
}

func TestPoolDispatcherRunsMailboxTurns(t *testing.T) {
	t.Parallel()
	d := NewPool(1, time.Minute).Dispatcher(7)
	if d.Throughput() != 7 {
		t.Errorf("Throughput = %d, want 7", d.Throughput())
	}
	done := make(chan struct{})
	d.Schedule(func() { close(done) })
	<-done
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}
