package retained

import (
	"errors"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

func account(t *testing.T, v kv.Reader) (uint64, uint64) {
	t.Helper()
	c, err := Load(v)
	if err != nil {
		t.Fatal(err)
	}
	return c.GetRecords(), c.GetBytes()
}

func size(t *testing.T, m *orreryv1.SagaRecord) uint64 {
	b, err := record.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(len(b))
}

func TestAccountTracksStoresAndDeletes(t *testing.T) {
	v, lim := kv.NewMemory(), input.DefaultLimits()
	a := &orreryv1.SagaRecord{SagaId: "a", StateJson: `{"x":1}`}
	b := &orreryv1.SagaRecord{SagaId: "b", StateJson: `{}`}
	if err := Store(v, lim, []byte("g/a"), a); err != nil {
		t.Fatal(err)
	}
	if err := Store(v, lim, []byte("g/b"), b); err != nil {
		t.Fatal(err)
	}
	if r, by := account(t, v); r != 2 || by != size(t, a)+size(t, b) {
		t.Fatalf("account %d records %d bytes", r, by)
	}
	a2 := &orreryv1.SagaRecord{SagaId: "a", StateJson: `{"x":1,"y":"longer state"}`}
	if err := Store(v, lim, []byte("g/a"), a2); err != nil {
		t.Fatal(err)
	}
	if r, by := account(t, v); r != 2 || by != size(t, a2)+size(t, b) {
		t.Fatalf("after update %d records %d bytes", r, by)
	}
	if err := Delete(v, []byte("g/b")); err != nil {
		t.Fatal(err)
	}
	if err := Delete(v, []byte("g/absent")); err != nil {
		t.Fatal(err)
	}
	if r, by := account(t, v); r != 1 || by != size(t, a2) {
		t.Fatalf("after delete %d records %d bytes", r, by)
	}
}

func TestLimitsRefuseGrowthBeforeWriting(t *testing.T) {
	lim := input.DefaultLimits()
	lim.MaxPartitionRecords = 1
	v := kv.NewMemory()
	if err := Store(v, lim, []byte("g/a"), &orreryv1.SagaRecord{SagaId: "a"}); err != nil {
		t.Fatal(err)
	}
	before := v.Clone()
	err := Store(v, lim, []byte("g/b"), &orreryv1.SagaRecord{SagaId: "b"})
	if !errors.Is(err, orrery.ErrQuotaExceeded) || orrery.AsError(err).Field != "partition" {
		t.Fatalf("second record: %v", err)
	}
	if !v.Equal(before) {
		t.Fatal("a refused store wrote")
	}
	// Updating the existing record is not growth in count.
	if err := Store(v, lim, []byte("g/a"), &orreryv1.SagaRecord{SagaId: "a", StateJson: "1"}); err != nil {
		t.Fatal(err)
	}
	lim.MaxPartitionRecords = 10
	lim.MaxPartitionRecordBytes = 20
	err = Store(v, lim, []byte("g/a"), &orreryv1.SagaRecord{SagaId: "a", StateJson: `"a state that is far too large"`})
	if !errors.Is(err, orrery.ErrQuotaExceeded) {
		t.Fatalf("byte limit: %v", err)
	}
	// Shrinking is always allowed, even above a lowered limit.
	lim.MaxPartitionRecordBytes = 1
	if err := Store(v, lim, []byte("g/a"), &orreryv1.SagaRecord{SagaId: "a"}); err != nil {
		t.Fatalf("shrink: %v", err)
	}
}
