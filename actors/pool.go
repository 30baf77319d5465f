package actors

import (
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// DefaultPoolIdle is how many idle goroutines a silo's Pool keeps.
const DefaultPoolIdle = 64

// Pool runs functions on goroutines it keeps once they are done, up to a number of idle ones.
//
// The code a silo runs per message is deep (a grain's Receive, a Badger read, protobuf), and a
// fresh goroutine starts with a small stack that then grows, by copying, to that depth. With
// a goroutine per mailbox turn (protoactor's default dispatcher) or per request, growing
// stacks (runtime.newstack, copystack) was 11 % of a silo's CPU at 1,000 occurrences a
// second. A kept goroutine keeps its grown stack (until a garbage collection finds it mostly
// unused and halves it).
//
// Its owner closes it (Close) when it stops: the idle goroutines end, and a function handed to
// it afterwards still runs, on a goroutine that ends with it.
type Pool struct {
	work      chan func()
	done      chan struct{}
	closeOnce sync.Once
	idle      atomic.Int32
	maxIdle   int32
}

// NewPool returns a pool that keeps at most maxIdle idle goroutines (at least one).
func NewPool(maxIdle int) *Pool {
	return &Pool{work: make(chan func()), done: make(chan struct{}), maxIdle: int32(max(maxIdle, 1))}
}

// Close ends the idle goroutines and keeps none from then on. It does not wait for functions
// running on the pool, and Go still runs what it is handed.
func (p *Pool) Close() {
	p.closeOnce.Do(func() { close(p.done) })
}

// Go runs fn on an idle goroutine of the pool, or on a new one when none is idle. It never
// blocks, and a panic in fn crashes the process as it would with the go statement.
func (p *Pool) Go(fn func()) {
	select {
	case p.work <- fn:
	default:
		go p.run(fn)
	}
}

// run runs fn, then whatever Go hands it, until the pool has enough idle goroutines or is
// closed.
func (p *Pool) run(fn func()) {
	for {
		fn()
		fn = nil
		if p.idle.Add(1) > p.maxIdle {
			p.idle.Add(-1)
			return
		}
		select {
		case fn = <-p.work:
			p.idle.Add(-1)
		case <-p.done:
			p.idle.Add(-1)
			return
		}
	}
}

// Idle reports how many goroutines wait for work.
func (p *Pool) Idle() int { return int(p.idle.Load()) }

// Dispatcher returns a protoactor dispatcher that runs mailboxes on the pool, at most
// throughput messages per turn (protoactor's default is 300).
func (p *Pool) Dispatcher(throughput int) actor.Dispatcher {
	return poolDispatcher{pool: p, throughput: throughput}
}

type poolDispatcher struct {
	pool       *Pool
	throughput int
}

// Schedule implements actor.Dispatcher.
func (d poolDispatcher) Schedule(fn func()) { d.pool.Go(fn) }

// Throughput implements actor.Dispatcher.
func (d poolDispatcher) Throughput() int { return d.throughput }
