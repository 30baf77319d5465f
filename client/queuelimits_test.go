package client_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/client/clienttest"
)

// TestStaticShareSplitsTheLimitsExactly: the static split gives each of p partitions its part,
// one more to the first (limit mod p), 0 to some when the limit is below p, and the parts sum to
// the limits (leases, and thousandths of a lease a second).
func TestStaticShareSplitsTheLimitsExactly(t *testing.T) {
	for _, c := range []struct{ k, r, p int }{{2, 0, 4}, {10, 3, 4}, {7, 1, 7}, {0, 5, 3}, {10000, 1000000, 16}} {
		var leased, milli uint64
		for i := range c.p {
			k, r := client.StaticShare(c.k, c.r, c.p, i)
			if want := uint32(c.k / c.p); k != want && k != want+1 {
				t.Fatalf("%v: partition %d gets %d leases", c, i, k)
			}
			leased, milli = leased+uint64(k), milli+r
		}
		if leased != uint64(c.k) || milli != uint64(c.r)*1000 {
			t.Fatalf("%v: the shares sum to %d leases and %d milli-leases/s", c, leased, milli)
		}
	}
	if k, _ := client.StaticShare(2, 0, 4, 2); k != 0 {
		t.Fatalf("partition 2 of 4 under a cap of 2 gets %d, want 0", k)
	}
}

// TestQueueLimitsCapLeasesAcrossPartitions: with SetQueueLimits(2, 0) over 4 partitions, eight
// concurrent receivers polling every partition never hold more than 2 leases at once (counted
// from each receive's return to just before its ack), and handle every message of the
// partitions whose share is not 0; QueueStats shows each partition's share; RemoveQueueLimits
// lifts the cap.
func TestQueueLimitsCapLeasesAcrossPartitions(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	b.enqueueSpread(ctx, 24)
	if err := b.c.SetQueueLimits(ctx, testNamespace, testQueue, 2, 0); err != nil {
		t.Fatal(err)
	}
	stats, err := b.c.QueueStats(ctx, testNamespace, testQueue, "")
	if err != nil {
		t.Fatal(err)
	}
	reachable := uint64(0) // messages on the partitions with a share
	for _, s := range stats {
		want, _ := client.StaticShare(2, 0, 4, s.Partition)
		if s.Stats.GetShare().GetShareLeased() != want || s.Stats.GetShare().GetPolicy().GetMaxLeased() != 2 {
			t.Fatalf("partition %d's share %v, want %d of 2", s.Partition, s.Stats.GetShare(), want)
		}
		if want > 0 {
			reachable += s.Stats.GetVisible()
		}
	}
	var held, most, handled atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for p := w % 4; handled.Load() < int64(reachable); p = (p + 1) % 4 {
				msgs, err := b.c.Receive(ctx, p, &orreryv1.Receive{Namespace: testNamespace, Queue: testQueue, Max: 5}, 0)
				if err != nil {
					t.Error(err)
					return
				}
				now := held.Add(int64(len(msgs)))
				for old := most.Load(); now > old && !most.CompareAndSwap(old, now); old = most.Load() {
				}
				for _, m := range msgs {
					held.Add(-1)
					if _, err := b.c.Ack(ctx, m.GetLane(), m.GetId(), m.GetLease().GetToken()); err != nil {
						t.Error(err)
						return
					}
					handled.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if most.Load() > 2 || most.Load() == 0 {
		t.Fatalf("at most %d leases held at once, want 1..2", most.Load())
	}
	if err := b.c.RemoveQueueLimits(ctx, testNamespace, testQueue); err != nil {
		t.Fatal(err)
	}
	got := 0
	for p := range 4 {
		msgs, err := b.c.Receive(ctx, p, &orreryv1.Receive{Namespace: testNamespace, Queue: testQueue, Max: 50}, 0)
		if err != nil {
			t.Fatal(err)
		}
		got += len(msgs)
	}
	if got != 24-int(reachable) {
		t.Fatalf("without the cap leased %d, want the %d left", got, 24-int(reachable))
	}
}

// TestSetQueueLimitsRefusesBadLimitsAndConflicts: negative or too large limits, and both 0, are
// Validation naming the argument; a SetQueueShare comparing against a share another mover
// changed since it read it fails RevisionConflict.
func TestSetQueueLimitsRefusesBadLimitsAndConflicts(t *testing.T) {
	b := setup(t, 2)
	ctx := ctxFor(t)
	for _, c := range []struct {
		k, r  int
		field string
	}{{-1, 0, "max_leased"}, {10001, 0, "max_leased"}, {0, 1000001, "per_second"}, {0, 0, "max_leased"}} {
		if err := b.c.SetQueueLimits(ctx, testNamespace, testQueue, c.k, c.r); !errors.Is(err, orrery.ErrValidation) || orrery.AsError(err).Field != c.field {
			t.Fatalf("SetQueueLimits(%d, %d): %v, want Validation on %s", c.k, c.r, err, c.field)
		}
	}
	if err := b.c.SetQueueLimits(ctx, testNamespace, testQueue, 4, 2); err != nil {
		t.Fatal(err)
	}
	stats, err := b.c.QueueStatsOn(ctx, 0, testNamespace, testQueue)
	if err != nil {
		t.Fatal(err)
	}
	// Another mover lowers partition 0 after the read SetQueueLimits would make.
	stale := &orreryv1.SetQueueShare{Namespace: testNamespace, Queue: testQueue, Policy: stats.GetShare().GetPolicy(), ShareLeased: 1,
		Compare: true, ExpectedSetAtUnixMicros: stats.GetShare().GetSetAtUnixMicros()}
	if _, err := b.c.SetQueueShare(ctx, 0, stale); err != nil {
		t.Fatal(err)
	}
	if _, err := b.c.SetQueueShare(ctx, 0, stale); !errors.Is(err, orrery.ErrRevisionConflict) {
		t.Fatalf("a compare-and-set against a share changed since: %v, want RevisionConflict", err)
	}
}

// TestSetQueueLimitsStartsOverWhenSharesMoved: a set refused RevisionConflict (a rebalancer
// moved units since the call read the shares) makes SetQueueLimits read again and finish; one
// refused every time fails, after its attempts, with a PartitionsError of RevisionConflict.
func TestSetQueueLimitsStartsOverWhenSharesMoved(t *testing.T) {
	b := setup(t, 2)
	ctx := ctxFor(t)
	var conflicts atomic.Int32
	var always atomic.Bool
	b.tr.SetFaultHook(func(p int, req *orreryv1.CommandRequest) (clienttest.Fault, error) {
		if p == 1 && req.GetBatch().GetMutations()[0].GetSetQueueShare() != nil && (always.Load() || conflicts.Load() == 0) {
			conflicts.Add(1)
			return clienttest.FaultFailBeforeApply, orrery.FieldErrorf(orrery.CodeRevisionConflict, "expected_set_at_unix_micros", "moved in this test")
		}
		return clienttest.FaultNone, nil
	})
	if err := b.c.SetQueueLimits(ctx, testNamespace, testQueue, 3, 0); err != nil || conflicts.Load() != 1 {
		t.Fatalf("SetQueueLimits after one conflict: %v (%d conflicts)", err, conflicts.Load())
	}
	for p := range 2 {
		s, err := b.c.QueueStatsOn(ctx, p, testNamespace, testQueue)
		if want, _ := client.StaticShare(3, 0, 2, p); err != nil || s.GetShare().GetShareLeased() != want {
			t.Fatalf("partition %d: %v (%v), want a share of %d", p, s.GetShare(), err, want)
		}
	}
	always.Store(true)
	err := b.c.SetQueueLimits(ctx, testNamespace, testQueue, 4, 0)
	var missed *client.PartitionsError
	if !errors.As(err, &missed) || orrery.CodeOf(err) != orrery.CodeRevisionConflict {
		t.Fatalf("SetQueueLimits conflicting every time: %v, want a PartitionsError of RevisionConflict", err)
	}
}
