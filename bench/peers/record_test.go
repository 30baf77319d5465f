package main

import (
	"testing"
	"time"
)

// allHandled holds only once every expected occurrence was handled, whatever else was.
func TestAllHandledNeedsEveryExpectedOccurrence(t *testing.T) {
	r := newLatenessRecorder[int]()
	expected := []int{1, 2, 3}
	now := time.Now()
	for _, step := range []struct {
		record int
		want   bool
	}{{1, false}, {99, false}, {2, false}, {2, false}, {3, true}} {
		r.record(step.record, now, now)
		if got := r.allHandled(expected); got != step.want {
			t.Fatalf("after recording %d: allHandled %v, want %v", step.record, got, step.want)
		}
	}
}
