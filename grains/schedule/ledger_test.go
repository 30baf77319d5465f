package schedule

import (
	"bytes"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// TestLedgerRangeReadsAreBoundedAndResumable: 25 ordinals, read in pages of 10 over a time
// range: newest first, never silently partial, and the pages add up to the range exactly.
func TestLedgerRangeReadsAreBoundedAndResumable(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(every(t0, minute)), 0, t0)
	drain(t, v, 1, t0+24*minute)
	read := func(q LedgerQuery) ([]*orreryv1.LedgerRecord, []byte) {
		t.Helper()
		page, next, err := ReadLedger(v, lane, scheduleID, q)
		if err != nil {
			t.Fatal(err)
		}
		return page, next
	}
	var got []int64
	q := LedgerQuery{FromMicros: t0 + 3*minute, ToMicros: t0 + 20*minute, MaxRecords: 10}
	pages := 0
	for {
		page, next := read(q)
		pages++
		if len(page) > 10 {
			t.Fatalf("page of %d", len(page))
		}
		for _, e := range page {
			got = append(got, e.GetNominalDueAtUnixMicros())
		}
		if next == nil {
			break
		}
		q.After = next
	}
	if pages != 2 || len(got) != 18 || got[0] != t0+20*minute || got[17] != t0+3*minute {
		t.Fatalf("%d pages, instants %v", pages, got)
	}
	for i := 1; i < len(got); i++ {
		if got[i] != got[i-1]-minute {
			t.Fatalf("not newest first, or a gap: %v", got)
		}
	}
	// An exact fit says so: no continuation.
	if page, next := read(LedgerQuery{FromMicros: t0, ToMicros: t0 + 9*minute, MaxRecords: 10}); len(page) != 10 || next != nil {
		t.Fatalf("exact page: %d records, continuation %x", len(page), next)
	}
	// Bad queries.
	bad := []struct {
		q     LedgerQuery
		field string
	}{
		{LedgerQuery{ToMicros: t0, MaxRecords: 0}, "max_records"},
		{LedgerQuery{ToMicros: t0, MaxRecords: MaxLedgerRead + 1}, "max_records"},
		{LedgerQuery{FromMicros: t0 + 1, ToMicros: t0, MaxRecords: 1}, "from"},
		{LedgerQuery{FromMicros: -1, ToMicros: t0, MaxRecords: 1}, "from"},
		{LedgerQuery{ToMicros: t0, MaxRecords: 1, After: []byte("sl/elsewhere")}, "after"},
	}
	for _, b := range bad {
		_, _, err := ReadLedger(v, lane, scheduleID, b.q)
		wantCode(t, err, orrery.ErrValidation, b.field)
	}
}

// TestLedgerOneRecordPerOrdinalAndAgeIndex: an overwritten outcome (buffered → enqueued) keeps
// one record and one age entry; PruneLedger removes by age, bounded, oldest first.
func TestLedgerOneRecordPerOrdinalAndAgeIndex(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, policies(every(t0, minute), catchUp, bufferOne), 0, t0)
	mustEmit(t, v, 1, t0)
	mustEmit(t, v, 1, t0+minute)
	ackOccurrence(t, v, OccurrenceID(scheduleID, 1, 0), t0+90*sec)
	mustEmit(t, v, 1, t0+90*sec)
	count := func(prefix []byte) int {
		n := 0
		if err := kv.ScanPrefix(v, prefix, func(_, _ []byte) (bool, error) { n++; return true, nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if count(keys.Ledger) != 2 || count(keys.LedgerAge) != 2 {
		t.Fatalf("%d ledger records, %d age entries; want 2 and 2", count(keys.Ledger), count(keys.LedgerAge))
	}
	if got := outcomesOf(t, v, 1); got[1] != outEnqueued {
		t.Fatalf("outcomes %v", got)
	}
	// Ordinal 0 was written at t0, ordinal 1 last at t0+90s.
	removed, more, err := PruneLedger(v, t0, 10)
	if err != nil || removed != 1 || more {
		t.Fatalf("prune up to t0: %d %v %v", removed, more, err)
	}
	if got := outcomesOf(t, v, 1); len(got) != 1 || got[1] != outEnqueued {
		t.Fatalf("after pruning %v", got)
	}
	drain(t, v, 1, t0+10*minute)
	removed, more, err = PruneLedger(v, t0+input.Day, 3)
	if err != nil || removed != 3 || !more {
		t.Fatalf("bounded prune: %d %v %v", removed, more, err)
	}
	if removed, _, _ := PruneLedger(v, -5, 3); removed != 0 {
		t.Fatal("a negative cut-off pruned")
	}
	for count(keys.LedgerAge) > 0 {
		if _, _, err := PruneLedger(v, t0+input.Day, 3); err != nil {
			t.Fatal(err)
		}
	}
	if count(keys.Ledger) != 0 {
		t.Fatal("ledger records outlived their age entries")
	}
}

func TestLedgerKeysOrderNewestFirst(t *testing.T) {
	a := keys.LedgerKey(lane, scheduleID, t0, 1, false, 5)
	b := keys.LedgerKey(lane, scheduleID, t0+1, 1, false, 6)
	c := keys.LedgerKey(lane, scheduleID, t0, 2, false, 0)
	if bytes.Compare(b, a) >= 0 || bytes.Compare(c, a) >= 0 {
		t.Fatal("a later instant or generation must sort first")
	}
	age := keys.LedgerAgeKey(t0, a)
	if back, err := keys.LedgerFromAge(age); err != nil || !bytes.Equal(back, a) {
		t.Fatalf("age key round trip: %x %v", back, err)
	}
	if _, err := keys.LedgerFromAge([]byte("sla/x")); err == nil {
		t.Fatal("malformed age key decoded")
	}
}

// TestLegacyRecordIsUpgradedOnLoad: a record stored before next_nominal existed still emits
// the right instants.
func TestLegacyRecordIsUpgradedOnLoad(t *testing.T) {
	v := kv.NewMemory()
	configure(t, v, definition(every(t0, hour)), 0, t0)
	mustEmit(t, v, 1, t0+hour)
	tamper(t, v, func(r *orreryv1.ScheduleRecord) { r.NextNominalUnixMicros, r.SeriesEnded = 0, false })
	if rec := mustLoad(t, v); rec.GetNextNominalUnixMicros() != t0+2*hour {
		t.Fatalf("upgraded next nominal %d", rec.GetNextNominalUnixMicros())
	}
	res := mustEmit(t, v, 1, t0+2*hour)
	if len(res.GetEnqueuedIds()) != 1 || res.GetEnqueuedIds()[0] != OccurrenceID(scheduleID, 1, 2) {
		t.Fatalf("legacy emit %v", res)
	}
}
