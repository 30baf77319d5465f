package main

import "sync"

// cleanups holds what must be undone before the harness exits, whatever the reason: the
// servers it started and their temporary dirs.
type cleanups struct {
	mu   sync.Mutex
	next int
	fns  map[int]func()
}

// add registers f and returns a function that runs f (once) and unregisters it.
func (c *cleanups) add(f func()) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fns == nil {
		c.fns = map[int]func(){}
	}
	id := c.next
	c.next++
	var once sync.Once
	run := func() { once.Do(f) }
	c.fns[id] = run
	return func() {
		c.mu.Lock()
		delete(c.fns, id)
		c.mu.Unlock()
		run()
	}
}

// runAll runs every registered function, the latest first.
func (c *cleanups) runAll() {
	for {
		c.mu.Lock()
		latest, f := -1, func() {}
		for id, fn := range c.fns {
			if id > latest {
				latest, f = id, fn
			}
		}
		delete(c.fns, latest)
		c.mu.Unlock()
		if latest < 0 {
			return
		}
		f()
	}
}
