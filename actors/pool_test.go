package actors

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/orreryhq/orrery/internal/testkit"
)

// TestPoolKeepsAtMostMaxIdleGoroutines: goroutines that finished wait for more work, up to the
// bound, and the next functions run on them instead of new goroutines.
func TestPoolKeepsAtMostMaxIdleGoroutines(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	release := make(chan struct{})
	var started sync.WaitGroup
	for range 5 {
		started.Add(1)
		p.Go(func() { started.Done(); <-release })
	}
	started.Wait()
	if n := p.Idle(); n != 0 {
		t.Fatalf("%d idle goroutines while all five run", n)
	}
	close(release)
	testkit.Eventually(t, 10*time.Second, "three idle goroutines", func() bool { return p.Idle() == 3 })
	time.Sleep(20 * time.Millisecond)
	if n := p.Idle(); n != 3 {
		t.Fatalf("%d idle goroutines, want the bound of 3", n)
	}
	// Three functions at once take the three idle goroutines.
	block := make(chan struct{})
	var ran sync.WaitGroup
	for range 3 {
		ran.Add(1)
		p.Go(func() { ran.Done(); <-block })
	}
	ran.Wait()
	if n := p.Idle(); n != 0 {
		t.Errorf("%d idle goroutines while three functions run on them", n)
	}
	close(block)
	testkit.Eventually(t, 10*time.Second, "the goroutines back", func() bool { return p.Idle() == 3 })
}

// TestPoolDispatcherRunsAMailbox: an actor whose props use the pool's dispatcher gets its
// messages in order.
func TestPoolDispatcherRunsAMailbox(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	p := NewPool(2)
	defer p.Close()
	var mu sync.Mutex
	var got []int
	pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if n, ok := ctx.Message().(int); ok {
			mu.Lock()
			got = append(got, n)
			mu.Unlock()
		}
	}, actor.WithDispatcher(p.Dispatcher(2))))
	for i := range 100 {
		system.Root.Send(pid, i)
	}
	testkit.Eventually(t, 10*time.Second, "100 messages", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 100 })
	for i, n := range got {
		if n != i {
			t.Fatalf("message %d is %d: out of order", i, n)
		}
	}
	testkit.Eventually(t, 10*time.Second, "an idle pool goroutine", func() bool { return p.Idle() > 0 })
}

// TestPoolCloseEndsItsGoroutines: Close ends the idle goroutines (the package's goleak check
// would fail otherwise), and a function handed to the pool afterwards still runs.
func TestPoolCloseEndsItsGoroutines(t *testing.T) {
	p := NewPool(4)
	// The four functions hold their goroutines until all four run, so the pool starts four:
	// a function that returned at once could leave its goroutine idle for the next Go, and
	// fewer than four would ever be idle.
	var started sync.WaitGroup
	release := make(chan struct{})
	for range 4 {
		started.Add(1)
		p.Go(func() {
			started.Done()
			<-release
		})
	}
	started.Wait()
	close(release)
	testkit.Eventually(t, 10*time.Second, "four idle goroutines", func() bool { return p.Idle() == 4 })
	p.Close()
	testkit.Eventually(t, 10*time.Second, "no idle goroutine after Close", func() bool { return p.Idle() == 0 })
	ran := make(chan struct{})
	p.Go(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("a function handed to a closed pool never ran")
	}
	testkit.Eventually(t, 10*time.Second, "no idle goroutine after a closed pool ran one", func() bool { return p.Idle() == 0 })
}
