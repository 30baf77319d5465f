package saga

import (
	"math"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
)

func TestTimeoutMessageID(t *testing.T) {
	t.Parallel()
	cases := []struct {
		revision uint64
		want     string
	}{
		{1, "saga-timeout-0f8fad5bd9cb469fa16570867728950e-0000000000000001"},
		{0xdeadbeef, "saga-timeout-0f8fad5bd9cb469fa16570867728950e-00000000deadbeef"},
		{math.MaxUint64, "saga-timeout-0f8fad5bd9cb469fa16570867728950e-ffffffffffffffff"},
	}
	for _, tc := range cases {
		if got := TimeoutMessageID(sagaID, tc.revision); got != tc.want {
			t.Errorf("TimeoutMessageID(%q, %d) = %q, want %q", sagaID, tc.revision, got, tc.want)
		}
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	lim := input.DefaultLimits()
	mem := prepare(t, lim, waitingDeadline...)

	rec, found, err := Load(mem, sagaLane(), sagaID)
	if err != nil || !found || rec.GetRevision() != 1 || rec.GetCreator() != creator {
		t.Fatalf("Load = %v, %v, %v", rec, found, err)
	}
	rec, found, err = Load(mem, sagaLane(), otherSagaID)
	if err != nil || found || rec != nil {
		t.Fatalf("Load of an absent saga = %v, %v, %v", rec, found, err)
	}
	_, _, err = Load(mem, &orreryv1.Lane{Namespace: "orders", Queue: "sagas"}, sagaID)
	wantError(t, err, orrery.CodeValidation, "lane.key")
	_, _, err = Load(mem, sagaLane(), "nope")
	wantError(t, err, orrery.CodeValidation, "saga_id")

	if err := mem.Set(keys.SagaKey(sagaLane(), sagaID), []byte{0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	_, _, err = Load(mem, sagaLane(), sagaID)
	wantError(t, err, orrery.CodeInternal, "")
}
