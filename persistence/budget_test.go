package persistence

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/grains/kv"
)

func budgetFixture(t *testing.T) *kv.Memory {
	t.Helper()
	m := kv.NewMemory()
	for i := range 10 {
		_ = m.Set(fmt.Appendf(nil, "k%d", i), []byte("0123456789")) // 12 bytes a record
	}
	return m
}

func TestBudgetReaderStopsWithoutSilentTruncation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		budget ReadBudget
		want   int
	}{
		{"records", ReadBudget{MaxRecords: 3}, 3},
		{"bytes", ReadBudget{MaxBytes: 40}, 3},
		{"first record always", ReadBudget{MaxBytes: 5}, 1},
	} {
		r := NewBudgetReader(context.Background(), budgetFixture(t), tc.budget)
		seen := 0
		err := r.Scan(nil, nil, func(_, _ []byte) (bool, error) { seen++; return true, nil })
		if !errors.Is(err, ErrBudgetExhausted) || seen != tc.want || r.Records() != tc.want {
			t.Errorf("%s: err %v after %d records (counted %d), want ErrBudgetExhausted after %d",
				tc.name, err, seen, r.Records(), tc.want)
		}
	}
	r := NewBudgetReader(context.Background(), budgetFixture(t), ReadBudget{})
	if got := collect(t, r, nil, nil); len(got) != 10 || r.Bytes() != 120 {
		t.Errorf("unlimited budget: %d records, %d bytes", len(got), r.Bytes())
	}
}

func TestBudgetReaderHonoursTheContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	r := NewBudgetReader(ctx, budgetFixture(t), ReadBudget{})
	seen := 0
	err := r.Scan(nil, nil, func(_, _ []byte) (bool, error) {
		seen++
		if seen == 2 {
			cancel()
		}
		return true, nil
	})
	if !errors.Is(err, orrery.ErrUnavailable) || !errors.Is(err, context.Canceled) || seen != 2 {
		t.Errorf("cancelled scan: %v after %d records", err, seen)
	}
	expired, stop := context.WithTimeout(context.Background(), 0)
	defer stop()
	if _, _, err := NewBudgetReader(expired, budgetFixture(t), ReadBudget{}).Get([]byte("k1")); !errors.Is(err, orrery.ErrDeadlineExceeded) {
		t.Errorf("Get past the deadline: %v", err)
	}
}

func TestViewBudgetOverBadger(t *testing.T) {
	t.Parallel()
	s := openState(t, t.TempDir(), quietOptions())
	update(t, s, func(txn *Txn) error {
		for i := range 10 {
			if err := txn.Set(fmt.Appendf(nil, "k%d", i), []byte("v")); err != nil {
				return err
			}
		}
		return nil
	})
	var last string
	err := s.ViewBudget(context.Background(), ReadBudget{MaxRecords: 4}, func(r *BudgetReader) error {
		return r.Scan(nil, nil, func(key, _ []byte) (bool, error) { last = string(key); return true, nil })
	})
	if !errors.Is(err, ErrBudgetExhausted) || last != "k3" {
		t.Errorf("ViewBudget: %v, last key %q (want ErrBudgetExhausted after k3)", err, last)
	}
}
