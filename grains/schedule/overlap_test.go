package schedule

import (
	"testing"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
)

// TestOverlapPolicies: an Every-minute schedule emits ordinal 0 at t0 and is emitted again at
// t0+1m and t0+2m while ordinal 0 is un-acked; then ordinal 0 is acked at t0+2m30s and the
// schedule is emitted when next due.
func TestOverlapPolicies(t *testing.T) {
	id := func(o uint64) string { return OccurrenceID(scheduleID, 1, o) }
	cases := []struct {
		name             string
		overlap          orreryv1.OverlapPolicy
		whileHeld        []orreryv1.LedgerOutcome // ordinals 1 and 2
		dueAfterAck      int64                    // NextDueAt right after the ack
		enqueuedAfterAck []string                 // by the emit at dueAfterAck (or t0+2m30 if earlier)
	}{
		{"allow all", allowAll, []orreryv1.LedgerOutcome{outEnqueued, outEnqueued}, t0 + 3*minute, []string{id(3)}},
		{"skip", skipOver, []orreryv1.LedgerOutcome{outOverlap, outOverlap}, t0 + 3*minute, []string{id(3)}},
		{"buffer one keeps the first", bufferOne, []orreryv1.LedgerOutcome{outBuffered, outOverlap}, t0 + minute, []string{id(1)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := kv.NewMemory()
			configure(t, v, policies(every(t0, minute), catchUp, c.overlap), 0, t0)
			if res := mustEmit(t, v, 1, t0); len(res.GetEnqueuedIds()) != 1 {
				t.Fatalf("first emit %v", res)
			}
			mustEmit(t, v, 1, t0+minute)
			mustEmit(t, v, 1, t0+2*minute)
			got := outcomesOf(t, v, 1)
			if got[0] != outEnqueued || got[1] != c.whileHeld[0] || got[2] != c.whileHeld[1] {
				t.Fatalf("outcomes while held %v", got)
			}
			rec := mustLoad(t, v)
			if c.overlap != allowAll && rec.GetInFlightMessageId() != id(0) {
				t.Fatalf("slot holder %q, want ordinal 0", rec.GetInFlightMessageId())
			}
			if c.overlap == bufferOne && rec.GetBuffered().GetOrdinal() != 1 {
				t.Fatalf("buffered %v, want ordinal 1", rec.GetBuffered())
			}
			wantDue(t, v, t0+3*minute, 1) // while held, due at the next instant: no hot loop
			revision := rec.GetRevision()

			ackOccurrence(t, v, id(0), t0+2*minute+30*sec)
			rec = mustLoad(t, v)
			if c.overlap != allowAll && (rec.GetInFlightMessageId() != "" || rec.GetRevision() != revision+1) {
				t.Fatalf("after ack: holder %q revision %d (was %d)", rec.GetInFlightMessageId(), rec.GetRevision(), revision)
			}
			if rec.GetNextDueAtUnixMicros() != c.dueAfterAck {
				t.Fatalf("due %d after the ack, want %d", rec.GetNextDueAtUnixMicros(), c.dueAfterAck)
			}
			wantDue(t, v, c.dueAfterAck, 1)
			res := mustEmit(t, v, 1, max(c.dueAfterAck, t0+2*minute+30*sec))
			if len(res.GetEnqueuedIds()) != len(c.enqueuedAfterAck) || res.GetEnqueuedIds()[0] != c.enqueuedAfterAck[0] {
				t.Fatalf("after the ack enqueued %v, want %v", res.GetEnqueuedIds(), c.enqueuedAfterAck)
			}
			if c.overlap == bufferOne {
				rec := mustLoad(t, v)
				if outcomesOf(t, v, 1)[1] != outEnqueued || rec.GetBuffered() != nil || rec.GetInFlightMessageId() != id(1) {
					t.Fatalf("buffered flush: %v, record %v", outcomesOf(t, v, 1), rec)
				}
				if rec.GetNextDueAtUnixMicros() != t0+3*minute {
					t.Fatalf("after the flush due %d", rec.GetNextDueAtUnixMicros())
				}
			}
		})
	}
}

// TestOverlapSlotFreesWhenHolderExpiresOrIsDeadLettered: the slot is checked lazily at the
// next emit; while an occurrence is buffered the schedule is due at the holder's expiry.
func TestOverlapSlotFreesWhenHolderExpiresOrIsDeadLettered(t *testing.T) {
	t.Run("expired holder, buffered waits until its expiry", func(t *testing.T) {
		v := kv.NewMemory()
		def := policies(every(t0, minute), catchUp, bufferOne)
		def.Template.TimeToLiveMicros = 90 * sec
		configure(t, v, def, 0, t0)
		mustEmit(t, v, 1, t0)
		mustEmit(t, v, 1, t0+minute) // ordinal 1 buffered
		wantDue(t, v, t0+90*sec, 1)  // the holder's expiry comes before ordinal 2
		res := mustEmit(t, v, 1, t0+90*sec)
		if len(res.GetEnqueuedIds()) != 1 || res.GetEnqueuedIds()[0] != OccurrenceID(scheduleID, 1, 1) {
			t.Fatalf("after the holder expired: %v", res)
		}
	})
	t.Run("buffered occurrence expires while waiting", func(t *testing.T) {
		v := kv.NewMemory()
		def := policies(every(t0, minute), catchUp, bufferOne)
		def.Template.TimeToLiveMicros = 90 * sec
		configure(t, v, def, 0, t0)
		mustEmit(t, v, 1, t0)
		mustEmit(t, v, 1, t0+minute) // ordinal 1 buffered, expires at t0+150s
		// Nothing runs until t0+160s: the holder expired, the buffered one too; 2 goes.
		res := mustEmit(t, v, 1, t0+160*sec)
		if len(res.GetEnqueuedIds()) != 1 || res.GetEnqueuedIds()[0] != OccurrenceID(scheduleID, 1, 2) || res.GetPassedWithoutMessage() != 1 {
			t.Fatalf("late emit: %v", res)
		}
		if got := outcomesOf(t, v, 1); got[0] != outEnqueued || got[1] != outExpired || got[2] != outEnqueued {
			t.Fatalf("outcomes %v", got)
		}
	})
	t.Run("dead-lettered holder", func(t *testing.T) {
		v, lim := kv.NewMemory(), input.DefaultLimits()
		def := policies(every(t0, minute), catchUp, skipOver)
		def.Template.MaxDeliveries = 1
		configure(t, v, def, 0, t0)
		mustEmit(t, v, 1, t0)
		receive := &orreryv1.Receive{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Max: 1, LeaseDurationMicros: 10 * sec}
		if got, err := queue.ApplyReceive(v, lim, receive, t0+sec); err != nil || len(got.GetMessages()) != 1 {
			t.Fatalf("receive: %v %v", got, err)
		}
		// The lease ends unacked; the next receive moves the message to the dead-letter queue.
		if got, err := queue.ApplyReceive(v, lim, receive, t0+20*sec); err != nil || len(got.GetMessages()) != 0 {
			t.Fatalf("second receive: %v %v", got, err)
		}
		res := mustEmit(t, v, 1, t0+minute)
		if len(res.GetEnqueuedIds()) != 1 {
			t.Fatalf("a dead-lettered holder must free the slot: %v %v", res, outcomesOf(t, v, 1))
		}
	})
}

// TestAckOfOtherMessagesDoesNotReleaseTheSlot: a manual occurrence, an occurrence of another
// ordinal and a plain message leave the slot alone.
func TestAckOfOtherMessagesDoesNotReleaseTheSlot(t *testing.T) {
	v, lim := kv.NewMemory(), input.DefaultLimits()
	configure(t, v, policies(every(t0, minute), catchUp, skipOver), 0, t0)
	mustEmit(t, v, 1, t0)
	tr, err := ApplyTrigger(v, lim, &orreryv1.TriggerSchedule{Lane: lane, ScheduleId: scheduleID}, t0+sec)
	if err != nil || len(tr.GetEnqueuedIds()) != 1 {
		t.Fatalf("trigger while the slot is held: %v %v", tr, err)
	}
	revision := mustLoad(t, v).GetRevision()
	ackOccurrence(t, v, tr.GetEnqueuedIds()[0], t0+2*sec)
	if rec := mustLoad(t, v); rec.GetInFlightMessageId() != OccurrenceID(scheduleID, 1, 0) || rec.GetRevision() != revision {
		t.Fatalf("a manual ack touched the slot: %v", rec)
	}
	if err := ReleaseSlot(v, lim, &orreryv1.QueueMessage{Id: "x", Lane: lane}); err != nil {
		t.Fatal(err)
	}
	if got := outcomesOf(t, v, 1); len(got) != 1 {
		t.Fatalf("outcomes %v", got)
	}
}
