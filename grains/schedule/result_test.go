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
