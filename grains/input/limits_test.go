package input

import (
	"reflect"
	"testing"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// TestLimitsRoundTripThroughTheirProto: every field of Limits has its PartitionLimits field
// and survives Proto and LimitsOf, so no limit is lost on its way into a partition's state.
func TestLimitsRoundTripThroughTheirProto(t *testing.T) {
	var lim Limits
	v := reflect.ValueOf(&lim).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if f.CanInt() {
			f.SetInt(int64(1000 + i))
		} else {
			f.SetUint(uint64(1000 + i))
		}
	}
	if got := LimitsOf(lim.Proto()); got != lim {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, lim)
	}
	if fields := (&orreryv1.PartitionLimits{}).ProtoReflect().Descriptor().Fields().Len(); fields != v.NumField() {
		t.Fatalf("PartitionLimits has %d fields, Limits %d", fields, v.NumField())
	}
}
