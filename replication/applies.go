package replication

import "sync"

// applies tracks the committed entries a Driver handed to its StateMachine and that have not
// applied yet, per group: the barrier of each group. A group with entries still applying
// takes no part in a round (Groups.Ready leaves it out), so its next round, its Advance, its
// compaction and its snapshots all come after its own applies, while the other groups go on.
// The state machine reports each hand-over's end from whatever goroutine applied it.
type applies struct {
	mu      sync.Mutex
	pending map[int]int
	err     error // the first apply that failed: fatal to the driver
	wake    func()
}

func newApplies(wake func()) *applies {
	return &applies{pending: map[int]int{}, wake: wake}
}

// handOver counts one hand-over of group's entries and returns the callback that ends it.
// The callback may run at most once; it wakes the driver.
func (a *applies) handOver(group int) func(error) {
	a.mu.Lock()
	a.pending[group]++
	a.mu.Unlock()
	var once sync.Once
	return func(err error) {
		once.Do(func() {
			a.mu.Lock()
			if err != nil && a.err == nil {
				a.err = err
			}
			if a.pending[group]--; a.pending[group] <= 0 {
				delete(a.pending, group)
			}
			a.mu.Unlock()
			a.wake()
		})
	}
}

// busy reports whether group has entries handed over and not yet applied.
func (a *applies) busy(group int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pending[group] > 0
}

// busyGroups returns the groups with entries still applying (nil when none).
func (a *applies) busyGroups() map[int]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pending) == 0 {
		return nil
	}
	out := make(map[int]bool, len(a.pending))
	for g := range a.pending {
		out[g] = true
	}
	return out
}

// failed returns the error of the first apply that failed.
func (a *applies) failed() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}
