package client

import (
	"context"
	"sync"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// maxAcksPerCommand bounds one batched ack command.
const maxAcksPerCommand = 256

// acker batches a worker's acks for one partition: at most
// one ack command is in flight, and acks that arrive meanwhile form the next one. Each ack is
// its own mutation, so one stale lease token fails alone. Callers wait for their own result.
type acker struct {
	c         *Client
	partition int
	timeout   time.Duration // bounds one ack command, retries included
	mu        sync.Mutex
	pending   []*pendingAck
	inFlight  bool
}

type pendingAck struct {
	m    *Message
	done chan error
}

func newAckers(c *Client, timeout time.Duration) []*acker {
	ackers := make([]*acker, c.Partitions())
	for i := range ackers {
		ackers[i] = &acker{c: c, partition: i, timeout: timeout}
	}
	return ackers
}

// ack queues m's ack and waits for its outcome (or ctx).
func (a *acker) ack(ctx context.Context, m *Message) error {
	p := &pendingAck{m: m, done: make(chan error, 1)}
	a.mu.Lock()
	a.pending = append(a.pending, p)
	start := !a.inFlight
	a.inFlight = true
	a.mu.Unlock()
	if start {
		flushCtx := context.WithoutCancel(ctx)
		go a.flush(flushCtx)
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flush sends batches until no ack is pending.
func (a *acker) flush(ctx context.Context) {
	for {
		a.mu.Lock()
		n := min(len(a.pending), maxAcksPerCommand)
		if n == 0 {
			a.inFlight = false
			a.mu.Unlock()
			return
		}
		batch := a.pending[:n:n]
		a.pending = append([]*pendingAck(nil), a.pending[n:]...)
		a.mu.Unlock()
		a.send(ctx, batch)
	}
}

// send acks a batch in one command and hands each caller its result.
func (a *acker) send(ctx context.Context, batch []*pendingAck) {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	mutations := make([]*orreryv1.Mutation, len(batch))
	for i, p := range batch {
		mutations[i] = &orreryv1.Mutation{Kind: &orreryv1.Mutation_Ack{Ack: &orreryv1.Ack{Lane: p.m.Lane(), Id: p.m.ID(), LeaseToken: p.m.LeaseToken()}}}
	}
	receipt, _, err := a.c.Batch(ctx, a.partition, mutations)
	for i, p := range batch {
		switch {
		case err != nil:
			p.done <- err
		case i < len(receipt.GetResults()):
			p.done <- orrery.FromProto(receipt.GetResults()[i].GetError())
		default:
			p.done <- orrery.Errorf(orrery.CodeInternal, "ack receipt has %d results for %d acks", len(receipt.GetResults()), len(batch))
		}
	}
}
