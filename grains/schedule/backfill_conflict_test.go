package schedule

import (
	"errors"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
)

// TestABackfillMeetingAForeignMessageFails: from apply version 18 (queue.CompareOrReturn), a
// backfill instant whose id a client's message holds (not the occurrence: another origin)
// fails the backfill IdempotencyConflict on id and writes nothing — no instant of the command
// is enqueued or ledgered BACKFILLED for a message that is not its occurrence — while before
// it (queue.SameByID) the instant is taken as backfilled. Recurring and manual occurrences
// cannot meet such a message: clients may not enqueue under their ids.
func TestABackfillMeetingAForeignMessageFails(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(every(t0, hour)), 0, t0)
	lim := input.DefaultLimits()
	now := t0 + 30*hour
	id := BackfillID(scheduleID, 1, t0+hour)
	squat := &orreryv1.Enqueue{Lane: lane, Id: id, PayloadJson: `"mine"`}
	if res, err := queue.ApplyEnqueue(v, lim, squat, t0, queue.CompareOrReturn); err != nil || !res.GetCreated() {
		t.Fatalf("client enqueue under a backfill id: %v %v", res, err)
	}
	before := v.Clone()
	_, err := backfill(v, lim, t0, t0+2*hour, now)
	if !errors.Is(err, orrery.ErrIdempotencyConflict) || orrery.AsError(err).Field != "id" || !strings.Contains(err.Error(), id) {
		t.Fatalf("backfill: %v, want IdempotencyConflict on id naming %s", err, id)
	}
	// The mutation's buffer is discarded by the batch; applied straight to v it stops at the
	// conflicting instant: nothing of that instant is written.
	for _, e := range ledgerOf(t, v) {
		if e.GetBackfill() && e.GetNominalDueAtUnixMicros() == t0+hour {
			t.Fatalf("the conflicting instant was ledgered: %v", e)
		}
	}
	old := before.Clone()
	res, err := ApplyBackfill(old, lim, &orreryv1.BackfillSchedule{Lane: lane, ScheduleId: scheduleID, FromUnixMicros: t0, ToUnixMicros: t0 + 2*hour}, now, queue.SameByID)
	if err != nil || len(res.GetEnqueuedIds()) != 3 {
		t.Fatalf("backfill before version 18: %v %v, want the 3 instants taken", res, err)
	}
}
