package schedule

import (
	"testing"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

const (
	catchUp  = orreryv1.MisfirePolicy_MISFIRE_POLICY_CATCH_UP
	skipMis  = orreryv1.MisfirePolicy_MISFIRE_POLICY_SKIP
	coalesce = orreryv1.MisfirePolicy_MISFIRE_POLICY_COALESCE

	allowAll  = orreryv1.OverlapPolicy_OVERLAP_POLICY_ALLOW_ALL
	skipOver  = orreryv1.OverlapPolicy_OVERLAP_POLICY_SKIP
	bufferOne = orreryv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE

	outEnqueued  = orreryv1.LedgerOutcome_LEDGER_OUTCOME_ENQUEUED
	outOverlap   = orreryv1.LedgerOutcome_LEDGER_OUTCOME_SKIPPED_OVERLAP
	outMissed    = orreryv1.LedgerOutcome_LEDGER_OUTCOME_MISSED_CATCHUP_WINDOW
	outCoalesced = orreryv1.LedgerOutcome_LEDGER_OUTCOME_COALESCED_INTO
	outManual    = orreryv1.LedgerOutcome_LEDGER_OUTCOME_MANUAL
	outSuspended = orreryv1.LedgerOutcome_LEDGER_OUTCOME_SUSPENDED
	outSkipped   = orreryv1.LedgerOutcome_LEDGER_OUTCOME_SKIPPED_MISFIRE
	outBuffered  = orreryv1.LedgerOutcome_LEDGER_OUTCOME_BUFFERED
	outDropped   = orreryv1.LedgerOutcome_LEDGER_OUTCOME_DROPPED
	outPaused    = orreryv1.LedgerOutcome_LEDGER_OUTCOME_PAUSED
	outExpired   = orreryv1.LedgerOutcome_LEDGER_OUTCOME_EXPIRED
)

// TestMisfirePolicies: an Every-minute schedule whose ordinals 0..10 (t0..t0+10m) all fell due
// while nothing ran is emitted once at t0+10m.
func TestMisfirePolicies(t *testing.T) {
	cases := []struct {
		name     string
		misfire  orreryv1.MisfirePolicy
		window   int64
		enqueued []uint64 // ordinals with a message
		outcomes map[orreryv1.LedgerOutcome]int
		// for the last message under COALESCE: count and first nominal instant
		count, first int64
	}{
		{name: "catch-up fires all", misfire: catchUp, enqueued: seq(0, 10), outcomes: map[orreryv1.LedgerOutcome]int{outEnqueued: 11}},
		{name: "unspecified is catch-up", misfire: orreryv1.MisfirePolicy_MISFIRE_POLICY_UNSPECIFIED, enqueued: seq(0, 10), outcomes: map[orreryv1.LedgerOutcome]int{outEnqueued: 11}},
		{name: "catch-up window records older as missed", misfire: catchUp, window: 3*minute + 30*sec, enqueued: seq(7, 10),
			outcomes: map[orreryv1.LedgerOutcome]int{outMissed: 7, outEnqueued: 4}},
		{name: "skip fires only the most recent", misfire: skipMis, enqueued: []uint64{10}, outcomes: map[orreryv1.LedgerOutcome]int{outSkipped: 10, outEnqueued: 1}},
		{name: "skip with window", misfire: skipMis, window: 3 * minute, enqueued: []uint64{10},
			outcomes: map[orreryv1.LedgerOutcome]int{outMissed: 7, outSkipped: 3, outEnqueued: 1}},
		{name: "coalesce fires one carrying all", misfire: coalesce, enqueued: []uint64{10},
			outcomes: map[orreryv1.LedgerOutcome]int{outCoalesced: 10, outEnqueued: 1}, count: 11, first: t0},
		{name: "coalesce with window", misfire: coalesce, window: 3*minute + 30*sec, enqueued: []uint64{10},
			outcomes: map[orreryv1.LedgerOutcome]int{outMissed: 7, outCoalesced: 3, outEnqueued: 1}, count: 4, first: t0 + 7*minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := kv.NewMemory()
			def := policies(every(t0, minute), c.misfire, allowAll)
			def.CatchUpWindowMicros = c.window
			configure(t, v, def, 0, t0-hour)
			now := t0 + 10*minute
			ids := drain(t, v, 1, now)
			var want []string
			for _, o := range c.enqueued {
				want = append(want, OccurrenceID(scheduleID, 1, o))
			}
			if len(ids) != len(want) || (len(ids) > 0 && ids[len(ids)-1] != want[len(want)-1]) || len(messages(t, v)) != len(want) {
				t.Fatalf("enqueued %v, want %v", ids, want)
			}
			for i := range ids {
				if ids[i] != want[i] {
					t.Fatalf("enqueued %v, want %v", ids, want)
				}
			}
			if got := countOutcomes(t, v, 1); !sameCounts(got, c.outcomes) {
				t.Fatalf("ledger outcomes %v, want %v", got, c.outcomes)
			}
			rec := mustLoad(t, v)
			if rec.GetNextOrdinal() != 11 || rec.GetNextDueAtUnixMicros() != t0+11*minute {
				t.Fatalf("watermark %d due %d, want 11 at t0+11m", rec.GetNextOrdinal(), rec.GetNextDueAtUnixMicros())
			}
			wantDue(t, v, t0+11*minute, 1)
			last := messages(t, v)[want[len(want)-1]].GetOccurrence()
			if last.GetNominalDueAtUnixMicros() != t0+10*minute || last.GetCoalescedCount() != uint64(c.count) ||
				(c.count > 0 && (last.GetFirstNominalDueAtUnixMicros() != c.first || last.GetLastNominalDueAtUnixMicros() != t0+10*minute)) {
				t.Fatalf("last occurrence %v", last)
			}
			if c.misfire == coalesce {
				for _, e := range ledgerOf(t, v) {
					if e.GetOutcome() == outCoalesced && (e.GetCoalescedIntoOrdinal() != 10 || e.GetMessageId() != want[0]) {
						t.Fatalf("coalesced record %v", e)
					}
				}
			}
		})
	}
}

func seq(from, to uint64) []uint64 {
	var out []uint64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func sameCounts(a, b map[orreryv1.LedgerOutcome]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, n := range a {
		if b[k] != n {
			return false
		}
	}
	return true
}

// TestMisfireBacklogIsBoundedPerCommand: 3000 due ordinals; every emit passes at most 1024
// without a message and enqueues at most max, leaving the rest due.
func TestMisfireBacklogIsBoundedPerCommand(t *testing.T) {
	cases := []struct {
		name     string
		misfire  orreryv1.MisfirePolicy
		window   int64
		messages int
	}{
		{"skip", skipMis, 0, 1},
		{"coalesce: one occurrence per chunk of 1025", coalesce, 0, 3},
		{"catch-up window: missed ones too", catchUp, 10 * sec, 11},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := kv.NewMemory()
			def := policies(every(t0, sec), c.misfire, allowAll)
			def.CatchUpWindowMicros = c.window
			configure(t, v, def, 0, t0)
			now := t0 + 2999*sec
			res := mustEmit(t, v, 1, now)
			if res.GetPassedWithoutMessage() > 1024 || len(res.GetEnqueuedIds()) > 32 {
				t.Fatalf("first emit passed %d and enqueued %d", res.GetPassedWithoutMessage(), len(res.GetEnqueuedIds()))
			}
			if res.GetNextOrdinal() >= 3000 || res.GetNextDueAtUnixMicros() > now {
				t.Fatalf("the backlog must stay due: %v", res)
			}
			wantDue(t, v, res.GetNextDueAtUnixMicros(), 1)
			drain(t, v, 1, now)
			if got := len(messages(t, v)); got != c.messages {
				t.Fatalf("%d messages, want %d", got, c.messages)
			}
			if n := len(outcomesOf(t, v, 1)); n != 3000 {
				t.Fatalf("%d ledger records, want one per ordinal (3000)", n)
			}
			if rec := mustLoad(t, v); rec.GetNextOrdinal() != 3000 {
				t.Fatalf("watermark %d", rec.GetNextOrdinal())
			}
		})
	}
	// The pass bound is a limit.
	lim := input.DefaultLimits()
	lim.MaxPassedPerEmit = 5
	v := kv.NewMemory()
	configure(t, v, policies(every(t0, sec), skipMis, allowAll), 0, t0)
	res, err := ApplyEmit(v, lim, &orreryv1.EmitOccurrences{Lane: lane, ScheduleId: scheduleID, ExpectedGeneration: 1, Max: 32}, t0+99*sec)
	if err != nil || res.GetPassedWithoutMessage() != 5 || res.GetNextOrdinal() != 5 {
		t.Fatalf("bounded skip: %v %v", res, err)
	}
}
