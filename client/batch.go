package client

import (
	"context"
	"fmt"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/route"
)

// Batch sends mutations as one atomic command to partition and returns its receipt and the
// receipt's exact bytes (byte-identical when the command id is replayed). Every mutation that
// names a lane must route to partition (Validation otherwise, before anything is sent).
//
// The error is nil when the partition produced a receipt whose batch was applied; per-mutation
// failures are then in receipt.Results and are not the call's error (decode them with
// orrery.FromProto). A batch the partition rolled back (QuotaExceeded, or any failure under
// WithAllOrNothing) returns its receipt, its bytes and the batch-level error together.
func (c *Client) Batch(ctx context.Context, partition int, mutations []*orreryv1.Mutation, opts ...CallOption) (*orreryv1.Receipt, []byte, error) {
	if err := c.checkPartition(partition); err != nil {
		return nil, nil, err
	}
	if len(mutations) == 0 {
		return nil, nil, orrery.Invalid("mutations", "must not be empty")
	}
	p := c.transport.Partitions()
	for i, m := range mutations {
		if m == nil {
			return nil, nil, orrery.Invalid(fmt.Sprintf("mutations[%d]", i), "is nil")
		}
		if lane := MutationLane(m); lane != nil {
			if got := route.Partition(lane, p); got != partition {
				return nil, nil, orrery.Invalid(fmt.Sprintf("mutations[%d].lane", i), "routes to partition %d, not %d", got, partition)
			}
		}
	}
	receipt, raw, err := c.command(ctx, partition, mutations, c.callOptions(opts), 0)
	if err != nil {
		return nil, nil, err
	}
	return receipt, raw, orrery.FromProto(receipt.GetError())
}

// MutationLane returns the lane a mutation addresses, or nil for mutations that address a
// partition as a whole (Receive, Housekeep). See route.MutationLane.
func MutationLane(m *orreryv1.Mutation) *orreryv1.Lane { return route.MutationLane(m) }

// mutate sends one mutation about lane to the lane's partition and returns its result. A
// batch-level error or the mutation's own error in the receipt is the call's error.
func (c *Client) mutate(ctx context.Context, lane *orreryv1.Lane, m *orreryv1.Mutation, opts []CallOption) (*orreryv1.MutationResult, error) {
	partition, err := c.partitionOf(lane)
	if err != nil {
		return nil, err
	}
	return c.mutateOn(ctx, partition, m, c.callOptions(opts))
}

// mutateOn is mutate on an explicit partition.
func (c *Client) mutateOn(ctx context.Context, partition int, m *orreryv1.Mutation, o callOptions) (*orreryv1.MutationResult, error) {
	receipt, _, err := c.command(ctx, partition, []*orreryv1.Mutation{m}, o, 0)
	if err != nil {
		return nil, err
	}
	return onlyResult(receipt)
}

// onlyResult is the result of a one-mutation command's receipt; a batch-level error or the
// mutation's own error is the error.
func onlyResult(receipt *orreryv1.Receipt) (*orreryv1.MutationResult, error) {
	if err := orrery.FromProto(receipt.GetError()); err != nil {
		return nil, err
	}
	if n := len(receipt.GetResults()); n != 1 {
		return nil, orrery.Errorf(orrery.CodeInternal, "receipt of command %q has %d results for 1 mutation", receipt.GetCommandId(), n)
	}
	result := receipt.GetResults()[0]
	if err := orrery.FromProto(result.GetError()); err != nil {
		return nil, err
	}
	return result, nil
}

// unexpected is the error for a result of the wrong kind.
func unexpected(want string, r *orreryv1.MutationResult) error {
	return orrery.Errorf(orrery.CodeInternal, "expected a %s result, got %T", want, r.GetResult())
}
