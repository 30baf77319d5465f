package actors

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Pool runs functions on goroutines it keeps for reuse. A goroutine that finishes a function
// waits up to the pool's idle time for the next one before it exits, and at most maxIdle
// goroutines wait at once; Go never blocks and never queues: with no goroutine waiting, it
// starts a new one.
//
// It exists because protoactor's default dispatcher starts a goroutine for every burst of a
// mailbox's messages, and a partition grain schedules thousands of bursts and group commits a
// second: each new goroutine grows its stack again through Badger's and protobuf's deep call
// chains, which cost about 5 % of a busy silo's CPU in stack copying. A reused goroutine keeps
// its grown stack.
type Pool struct {
	maxIdle int
	idleFor time.Duration

	mu   sync.Mutex
	idle []chan func() // LIFO: the most recently used goroutine, with the warmest stack, first

	started atomic.Uint64
}

// NewPool returns a pool keeping at most maxIdle goroutines waiting, each for at most idleFor.
func NewPool(maxIdle int, idleFor time.Duration) *Pool {
	return &Pool{maxIdle: maxIdle, idleFor: idleFor}
}

// Go runs fn on a waiting goroutine, or on a new one.
func (p *Pool) Go(fn func()) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		next := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		next <- fn // buffered: the goroutine is waiting for exactly this send
		return
	}
	p.mu.Unlock()
	p.started.Add(1)
	go p.loop(fn)
}

// Started reports how many goroutines the pool has started.
func (p *Pool) Started() uint64 { return p.started.Load() }

// Idle reports how many goroutines are waiting for work.
func (p *Pool) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

func (p *Pool) loop(fn func()) {
	next := make(chan func(), 1)
	timer := time.NewTimer(p.idleFor)
	defer timer.Stop()
	for {
		fn()
		p.mu.Lock()
		if len(p.idle) >= p.maxIdle {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, next)
		p.mu.Unlock()
		timer.Reset(p.idleFor)
		select {
		case fn = <-next:
			timer.Stop()
		case <-timer.C:
			p.mu.Lock()
			if i := slices.Index(p.idle, next); i >= 0 {
				p.idle = slices.Delete(p.idle, i, i+1)
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			fn = <-next // Go took this goroutine just as its wait ended: the send is on its way
		}
	}
}

// Dispatcher returns a protoactor dispatcher that runs mailboxes on the pool, processing up to
// throughput messages per turn.
func (p *Pool) Dispatcher(throughput int) actor.Dispatcher {
	return poolDispatcher{pool: p, throughput: throughput}
}

type poolDispatcher struct {
	pool       *Pool
	throughput int
}

func (d poolDispatcher) Schedule(fn func()) { d.pool.Go(fn) }
func (d poolDispatcher) Throughput() int    { return d.throughput }
