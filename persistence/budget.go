package persistence

import (
	"context"
	"errors"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/grains/kv"
)

// ErrBudgetExhausted is returned by a BudgetReader once its record or byte budget is spent.
// It is a signal, not a failure: the caller answers with a continuation token after the last
// key it received, never with a silently partial list.
var ErrBudgetExhausted = errors.New("read budget exhausted")

// ReadBudget bounds one read view. Zero fields are unlimited.
type ReadBudget struct {
	// MaxRecords is the most records Get and Scan may return in total.
	MaxRecords int
	// MaxBytes is the most key and value bytes they may return in total. The first record
	// is always returned, whatever its size, so a read always makes progress.
	MaxBytes int64
}

// BudgetReader is a kv.Reader that stops with ErrBudgetExhausted when its budget is spent and
// with the context's error (code DeadlineExceeded or Unavailable) when its context ends. It is
// not safe for concurrent use.
type BudgetReader struct {
	ctx     context.Context
	reader  kv.Reader
	budget  ReadBudget
	records int
	bytes   int64
}

var _ kv.Reader = (*BudgetReader)(nil)

// NewBudgetReader wraps r with budget and ctx.
func NewBudgetReader(ctx context.Context, r kv.Reader, budget ReadBudget) *BudgetReader {
	return &BudgetReader{ctx: ctx, reader: r, budget: budget}
}

// Records is how many records the reader has returned.
func (b *BudgetReader) Records() int { return b.records }

// Bytes is how many key and value bytes the reader has returned.
func (b *BudgetReader) Bytes() int64 { return b.bytes }

// Get implements kv.Reader; a found record counts against the budget.
func (b *BudgetReader) Get(key []byte) ([]byte, bool, error) {
	if err := b.admit(0); err != nil {
		return nil, false, err
	}
	value, found, err := b.reader.Get(key)
	if err != nil || !found {
		return value, found, err
	}
	if err := b.admit(len(key) + len(value)); err != nil {
		return nil, false, err
	}
	return value, true, nil
}

// Scan implements kv.Reader. When the budget runs out it returns ErrBudgetExhausted after the
// last record fn received.
func (b *BudgetReader) Scan(start, end []byte, fn func(key, value []byte) (bool, error)) error {
	if err := b.admit(0); err != nil {
		return err
	}
	return b.reader.Scan(start, end, func(key, value []byte) (bool, error) {
		if err := b.admit(len(key) + len(value)); err != nil {
			return false, err
		}
		return fn(key, value)
	})
}

// admit checks the context and, for size > 0, charges one record of size bytes.
func (b *BudgetReader) admit(size int) error {
	if err := b.ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return orrery.Wrap(orrery.CodeDeadlineExceeded, err, "read deadline exceeded")
		}
		return orrery.Wrap(orrery.CodeUnavailable, err, "read cancelled")
	}
	if size == 0 {
		return nil
	}
	if b.budget.MaxRecords > 0 && b.records >= b.budget.MaxRecords {
		return ErrBudgetExhausted
	}
	if b.budget.MaxBytes > 0 && b.records > 0 && b.bytes+int64(size) > b.budget.MaxBytes {
		return ErrBudgetExhausted
	}
	b.records++
	b.bytes += int64(size)
	return nil
}

// ViewBudget is View with its reader wrapped by NewBudgetReader(ctx, r, budget).
func (p *PartitionState) ViewBudget(ctx context.Context, budget ReadBudget, fn func(r *BudgetReader) error) error {
	return p.View(func(r kv.Reader) error { return fn(NewBudgetReader(ctx, r, budget)) })
}
