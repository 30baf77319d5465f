package client

import (
	"context"
	"sync"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// PutGrant replaces the grant of m.Principal on every partition (docs/design.md §8: grants are
// partition state) and returns once every partition has applied it. The command carries one
// command id to every partition, so a call retried after an unknown outcome (every partition
// retries like any command) applies at most once per partition. The client's principal needs
// PolicyAdmin over the namespaces and queues of the old and new rules, or must be one of
// Orrery's own; a denial on any partition is the call's error (the partitions that applied keep
// the change: send it again, with the same command id, once the cause is fixed).
func (c *Client) PutGrant(ctx context.Context, m *orreryv1.PutGrant, opts ...CallOption) error {
	return c.everyPartition(ctx, &orreryv1.Mutation{Kind: &orreryv1.Mutation_PutGrant{PutGrant: m}}, c.callOptions(opts))
}

// DeleteGrant removes the grant of principal on every partition, like PutGrant.
func (c *Client) DeleteGrant(ctx context.Context, principal string, opts ...CallOption) error {
	return c.everyPartition(ctx, &orreryv1.Mutation{Kind: &orreryv1.Mutation_DeleteGrant{DeleteGrant: &orreryv1.DeleteGrant{Principal: principal}}}, c.callOptions(opts))
}

// everyPartition sends m under one command id to every partition at once and waits for them
// all. The error is the lowest partition's.
func (c *Client) everyPartition(ctx context.Context, m *orreryv1.Mutation, o callOptions) error {
	p := c.transport.Partitions()
	if p <= 0 {
		return orrery.Errorf(orrery.CodeUnavailable, "transport reports %d partitions", p)
	}
	o.receipt = nil // one call, P receipts
	errs := make([]error, p)
	var wg sync.WaitGroup
	for n := range p {
		wg.Go(func() {
			_, errs[n] = c.mutateOn(ctx, n, m, o)
		})
	}
	wg.Wait()
	for n, err := range errs {
		if err != nil {
			return orrery.Wrap(orrery.CodeOf(err), err, "partition %d of %d", n, p)
		}
	}
	return nil
}
