package schedule

import (
	"slices"
	"testing"

	"github.com/orreryhq/orrery/grains/kv"
)

// TestEmitResultCarriesNominalsAndName checks that an emit's result names each enqueued
// occurrence's nominal instant, parallel to its ids, and the definition's name.
func TestEmitResultCarriesNominalsAndName(t *testing.T) {
	v := kv.NewMemory()
	def := definition(every(t0, hour))
	def.Name = "nightly report"
	configure(t, v, def, 0, t0-sec)
	res, err := emit(v, 1, 3, t0+2*hour)
	if err != nil {
		t.Fatalf("emit: %v", err)
	}
	wantIDs := []string{OccurrenceID(scheduleID, 1, 0), OccurrenceID(scheduleID, 1, 1), OccurrenceID(scheduleID, 1, 2)}
	if !slices.Equal(res.GetEnqueuedIds(), wantIDs) {
		t.Fatalf("enqueued %v, want %v", res.GetEnqueuedIds(), wantIDs)
	}
	if want := []int64{t0, t0 + hour, t0 + 2*hour}; !slices.Equal(res.GetEnqueuedNominalDueAtUnixMicros(), want) {
		t.Fatalf("nominals %v, want %v", res.GetEnqueuedNominalDueAtUnixMicros(), want)
	}
	if res.GetName() != "nightly report" {
		t.Fatalf("name %q, want %q", res.GetName(), "nightly report")
	}
}

// TestOccurrenceOrdinal checks that the ordinal an occurrence id names is read back, and that
// other ids are refused.
func TestOccurrenceOrdinal(t *testing.T) {
	for _, ordinal := range []uint64{0, 1, 0xabc, 1<<64 - 1} {
		if got, ok := OccurrenceOrdinal(OccurrenceID(scheduleID, 7, ordinal)); !ok || got != ordinal {
			t.Errorf("OccurrenceOrdinal(OccurrenceID(..., %d)) = %d, %v", ordinal, got, ok)
		}
	}
	for _, id := range []string{"", "m1", ManualID(scheduleID, 1, t0), "recurring-x-0000000000000001-000000000000000g", "recurring-0000000000000001"} {
		if _, ok := OccurrenceOrdinal(id); ok {
			t.Errorf("OccurrenceOrdinal(%q) accepted", id)
		}
	}
}
