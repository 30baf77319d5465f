package partition

// runner runs functions one at a time on one long-lived goroutine. An activation applies its
// groups on one and syncs on another: their stacks grow deep (Badger, protobuf), and a new
// goroutine per group grew its stack again every time (about 3 % of CPU at 10,000
// occurrences a second). The caller keeps at most one function outstanding, so run never
// blocks.
type runner chan func()

func startRunner() runner {
	r := make(runner, 1)
	go func() {
		for f := range r {
			f()
		}
	}()
	return r
}

// run hands f to the runner's goroutine.
func (r runner) run(f func()) { r <- f }

// stop ends the goroutine once the outstanding function, if any, has run. A nil runner (the
// store never opened) is fine.
func (r runner) stop() {
	if r != nil {
		close(r)
	}
}
