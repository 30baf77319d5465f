package partition

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// Registry tracks a silo's live partition activations so a graceful shutdown can stop them,
// and with them answer what they hold before the Host closes (protoactor's
// ActorSystem.Shutdown stops no actors).
type Registry struct {
	mu   sync.Mutex
	pids map[string]*actor.PID
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{pids: map[string]*actor.PID{}} }

func (r *Registry) add(pid *actor.PID) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pids[pid.String()] = pid
}

func (r *Registry) remove(pid *actor.PID) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pids, pid.String())
}

// Len reports how many activations are live.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pids)
}

// StopAll stops every live activation and waits for each to stop (protoactor bounds each wait
// at 10 s).
func (r *Registry) StopAll(system *actor.ActorSystem) {
	r.mu.Lock()
	pids := make([]*actor.PID, 0, len(r.pids))
	for _, pid := range r.pids {
		pids = append(pids, pid)
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, pid := range pids {
		wg.Go(func() { _ = system.Root.StopFuture(pid).Wait() })
	}
	wg.Wait()
}
