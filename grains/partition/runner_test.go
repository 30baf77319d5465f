package partition

import (
	"slices"
	"testing"
	"time"
)

// TestRunnerRunsEachFunctionInTurnAndStopsAfterTheOutstandingOne: functions run one at a time
// in the order handed over, and stop lets the outstanding one finish.
func TestRunnerRunsEachFunctionInTurnAndStopsAfterTheOutstandingOne(t *testing.T) {
	r := startRunner()
	var order []int
	done := make(chan struct{})
	for i := range 5 {
		finished := make(chan struct{})
		r.run(func() { order = append(order, i); close(finished) })
		<-finished
	}
	release := make(chan struct{})
	r.run(func() { <-release; order = append(order, 5); close(done) })
	r.stop()
	close(release)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the outstanding function did not run after stop")
	}
	if want := []int{0, 1, 2, 3, 4, 5}; !slices.Equal(order, want) {
		t.Fatalf("ran %v, want %v", order, want)
	}
	runner(nil).stop() // a store that never opened has no runners
}
