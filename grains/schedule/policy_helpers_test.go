package schedule

import (
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
)

const minute = input.Minute

func cronSpec(expression, zone string) *orreryv1.ScheduleSpec {
	return &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Cron{Cron: &orreryv1.CronSpec{Expression: expression, TimeZone: zone}}}
}

// policies returns definition(spec) with the given policies.
func policies(spec *orreryv1.ScheduleSpec, misfire orreryv1.MisfirePolicy, overlap orreryv1.OverlapPolicy) *orreryv1.ScheduleDefinition {
	def := definition(spec)
	def.Misfire, def.Overlap = misfire, overlap
	return def
}

// utc parses an RFC 3339 instant into Unix microseconds.
func utc(t *testing.T, s string) int64 {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return at.UnixMicro()
}

// mustEmit emits (max 32) and fails the test on error.
func mustEmit(t *testing.T, v kv.View, generation uint64, now int64) *orreryv1.ScheduleResult {
	t.Helper()
	res, err := emit(v, generation, 32, now)
	if err != nil {
		t.Fatalf("emit at %d: %v", now, err)
	}
	return res
}

// drain emits until an emit changes nothing, and returns every id it enqueued.
func drain(t *testing.T, v kv.View, generation uint64, now int64) []string {
	t.Helper()
	var ids []string
	for range 10_000 {
		before := mustLoad(t, v).GetRevision()
		res := mustEmit(t, v, generation, now)
		ids = append(ids, res.GetEnqueuedIds()...)
		if res.GetRevision() == before {
			return ids
		}
	}
	t.Fatal("emit never settled")
	return nil
}

// ledgerOf reads a schedule's whole ledger, oldest first, in pages of 7 (exercising the
// continuation).
func ledgerOf(t *testing.T, v kv.Reader) []*orreryv1.LedgerRecord {
	t.Helper()
	var all []*orreryv1.LedgerRecord
	var after []byte
	for {
		page, next, err := ReadLedger(v, lane, scheduleID, LedgerQuery{FromMicros: 0, ToMicros: input.MaxInstantMicros, MaxRecords: 7, After: after})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if next == nil {
			break
		}
		after = next
	}
	for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
		all[i], all[j] = all[j], all[i]
	}
	return all
}

// outcomesOf maps the ordinals of one generation to their ledger outcomes.
func outcomesOf(t *testing.T, v kv.Reader, generation uint64) map[uint64]orreryv1.LedgerOutcome {
	t.Helper()
	out := map[uint64]orreryv1.LedgerOutcome{}
	for _, e := range ledgerOf(t, v) {
		if e.GetGeneration() == generation && !e.GetManual() && !e.GetBackfill() {
			if _, dup := out[e.GetOrdinal()]; dup {
				t.Fatalf("ordinal %d has two ledger records", e.GetOrdinal())
			}
			out[e.GetOrdinal()] = e.GetOutcome()
		}
	}
	return out
}

// countOutcomes counts a generation's ledger outcomes by kind.
func countOutcomes(t *testing.T, v kv.Reader, generation uint64) map[orreryv1.LedgerOutcome]int {
	t.Helper()
	n := map[orreryv1.LedgerOutcome]int{}
	for _, o := range outcomesOf(t, v, generation) {
		n[o]++
	}
	return n
}

// ackOccurrence receives every visible message of the lane's queue and acks the one with id,
// releasing the overlap slot as the batch dispatcher does. Others are released again.
func ackOccurrence(t *testing.T, v kv.View, id string, now int64) {
	t.Helper()
	lim := input.DefaultLimits()
	got, err := queue.ApplyReceive(v, lim, &orreryv1.Receive{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Max: 100, Owner: "w"}, now)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range got.GetMessages() {
		if m.GetId() != id {
			if _, err := queue.ApplyRelease(v, lim, &orreryv1.Release{Lane: m.GetLane(), Id: m.GetId(), LeaseToken: m.GetLease().GetToken()}, now); err != nil {
				t.Fatal(err)
			}
			continue
		}
		found = true
		_, acked, err := queue.ApplyAck(v, lim, &orreryv1.Ack{Lane: m.GetLane(), Id: id, LeaseToken: m.GetLease().GetToken()}, now)
		if err != nil {
			t.Fatal(err)
		}
		if err := ReleaseSlot(v, lim, acked); err != nil {
			t.Fatal(err)
		}
	}
	if !found {
		t.Fatalf("message %s was not received", id)
	}
}
