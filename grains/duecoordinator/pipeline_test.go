package duecoordinator

import (
	"context"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/duecoordinator/coordinatortest"
	"github.com/orreryhq/orrery/internal/testkit"
)

// TestARefFallingDueIsSentWhileAnEarlierReceiptIsAwaited: a partition answers a command only
// once it is durable, so a round must not wait for that answer before the next ref falls due.
// With the first schedule's command held, the second schedule, due a second later, is still
// sent on time; the held ref is not sent twice.
func TestARefFallingDueIsSentWhileAnEarlierReceiptIsAwaited(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	first, second := t0.Add(time.Minute), t0.Add(time.Minute+time.Second)
	b.apply(0, configure(lane("a"), scheduleID(1), at(first), 0), configure(lane("a"), scheduleID(2), at(second), 0))
	entered, release := make(chan struct{}, 1), make(chan struct{})
	b.twin.SetHooks(coordinatortest.Hooks{BeforeCommand: func(ctx context.Context, _ int, req *orreryv1.CommandRequest) error {
		for _, m := range req.GetBatch().GetMutations() {
			if m.GetEmitOccurrences().GetScheduleId() == scheduleID(1) {
				entered <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
		}
		return nil
	}})
	b.start(0)
	b.clock.AdvanceTo(first)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first schedule's command was not sent")
	}
	testkit.Eventually(t, 10*time.Second, "the timer at the second due instant", func() bool {
		s := b.c.Stats()
		return len(s.Partitions) == 1 && s.Partitions[0].TimerAt.Equal(second)
	})
	b.clock.AdvanceTo(second)
	testkit.Eventually(t, 10*time.Second, "the second schedule's occurrence", func() bool { return len(b.messages(0, lane("a"))) == 1 })
	checkOnTime(t, b.messages(0, lane("a")))
	close(release)
	b.settle()
	msgs := b.messages(0, lane("a"))
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want 2", len(msgs))
	}
	if s := b.c.Stats(); s.RefsDispatched != 2 || s.StaleIgnored != 0 {
		t.Errorf("stats %+v: want each ref sent once", s)
	}
}
