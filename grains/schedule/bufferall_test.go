package schedule

import (
	"testing"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/kv"
)

// bufferAll is the overlap policy that fires every instant, one at a time.
const bufferAll = orreryv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ALL

// TestBufferAllFiresEveryInstantOneAtATime: while an occurrence is in flight a BUFFER_ALL
// series waits, passing nothing and out of the due index; each ack lets exactly the next
// instant go, so the instants that fell due meanwhile all fire, in order, none skipped.
func TestBufferAllFiresEveryInstantOneAtATime(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, policies(every(t0, minute), catchUp, bufferAll), 0, t0)
	if res := mustEmit(t, v, 1, t0); len(res.GetEnqueuedIds()) != 1 {
		t.Fatalf("first emit %v", res)
	}
	now := t0 + 5*minute + sec // ordinals 1..5 fall due while 0 is in flight
	if res := mustEmit(t, v, 1, now); len(res.GetEnqueuedIds()) != 0 || res.GetPassedWithoutMessage() != 0 {
		t.Fatalf("an emit while the slot is taken: %v", res)
	}
	if rec := mustLoad(t, v); rec.GetNextDueAtUnixMicros() != 0 || len(dueEntries(t, v)) != 0 {
		t.Fatalf("a held series is due at %d (%v), want out of the due index", rec.GetNextDueAtUnixMicros(), dueEntries(t, v))
	}
	for ordinal := uint64(0); ordinal < 5; ordinal++ {
		ackOccurrence(t, v, OccurrenceID(scheduleID, 1, ordinal), now)
		wantDue(t, v, t0+int64(ordinal+1)*minute, 1) // the next instant, due at once
		res := mustEmit(t, v, 1, now)
		if len(res.GetEnqueuedIds()) != 1 || res.GetEnqueuedIds()[0] != OccurrenceID(scheduleID, 1, ordinal+1) {
			t.Fatalf("after the ack of ordinal %d: %v", ordinal, res)
		}
	}
	for ordinal, outcome := range outcomesOf(t, v, 1) {
		if outcome != outEnqueued {
			t.Fatalf("ordinal %d was %v, want every instant enqueued", ordinal, outcome)
		}
	}
}

// TestBufferAllWaitsForAnExpiringHolder: a held series whose occurrence has a time to live is
// due again at its expiry, and goes on then.
func TestBufferAllWaitsForAnExpiringHolder(t *testing.T) {
	v := kv.NewMemory()
	def := policies(every(t0, minute), catchUp, bufferAll)
	def.Template.TimeToLiveMicros = 150 * sec
	configure(t, v, def, 0, t0)
	mustEmit(t, v, 1, t0)
	mustEmit(t, v, 1, t0+minute) // held: ordinal 1 waits
	wantDue(t, v, t0+150*sec, 1)
	res := mustEmit(t, v, 1, t0+150*sec)
	if len(res.GetEnqueuedIds()) != 1 || res.GetEnqueuedIds()[0] != OccurrenceID(scheduleID, 1, 1) {
		t.Fatalf("after the holder expired: %v", res)
	}
}
