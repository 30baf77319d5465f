package rebalance

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/client/clienttest"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/route"
)

// shares reads every partition's share of (ns, jobs): leases and milli-leases a second.
func shares(t *testing.T, c *client.Client) (leased []uint32, milli []uint64) {
	t.Helper()
	stats, err := c.QueueStats(context.Background(), "ns", "jobs", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		leased, milli = append(leased, s.Stats.GetShare().GetShareLeased()), append(milli, s.Stats.GetShare().GetShareMilliPerSecond())
	}
	return leased, milli
}

func sums(leased []uint32, milli []uint64) (uint64, uint64) {
	var k, r uint64
	for i := range leased {
		k, r = k+uint64(leased[i]), r+milli[i]
	}
	return k, r
}

// keyOn returns a key of queue jobs that routes to partition p of n.
func keyOn(p, n int) string {
	for i := 0; ; i++ {
		if key := fmt.Sprintf("k%d", i); route.Partition(&orreryv1.Lane{Namespace: "ns", Queue: "jobs", Key: key}, n) == p {
			return key
		}
	}
}

// TestRoundsMoveUnitsToDemandAndOweWhatTheyCouldNotPlace: against the client's twin of 4
// partitions, a queue capped at 4 leased and 2 a second (split 1,1,1,1 and 500 milli each) with
// its messages on one partition gets every unit there after a round; when its messages are
// cancelled and others land on another partition whose raise is refused, the round lowers the
// first, owes the units (the shares sum below the limits, never above) and the next round,
// once the raise goes through, places them: the sums are the limits again.
func TestRoundsMoveUnitsToDemandAndOweWhatTheyCouldNotPlace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const partitions = 4
	tr := clienttest.New(partitions, clienttest.WithGrants(grants.Everything("operator")))
	fast := client.RetryPolicy{Initial: time.Millisecond, Max: 5 * time.Millisecond, Jitter: func() float64 { return 0.5 }}
	operator := client.New(tr, client.Options{Principal: "operator", Retry: fast})
	silo := client.New(tr, client.Options{Principal: input.SystemPrincipalPrefix + "silo", Retry: fast})
	t.Cleanup(func() { _ = operator.Close() })
	enqueueOn := func(p int, ids ...string) {
		t.Helper()
		for _, id := range ids {
			if _, err := operator.Enqueue(ctx, &orreryv1.Enqueue{Lane: &orreryv1.Lane{Namespace: "ns", Queue: "jobs", Key: keyOn(p, partitions)}, Id: id, PayloadJson: `{}`}); err != nil {
				t.Fatal(err)
			}
		}
	}
	enqueueOn(2, "a", "b", "c")
	if err := operator.SetQueueLimits(ctx, "ns", "jobs", 4, 2); err != nil {
		t.Fatal(err)
	}
	r := New(Config{Client: silo, Leads: func() bool { return true }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r.Round(ctx)
	leased, milli := shares(t, operator)
	if leased[2] != 4 || milli[2] != 2000 {
		t.Fatalf("after a round with the demand on partition 2: %v leased, %v milli/s; want all on 2", leased, milli)
	}
	// The demand moves to partition 0, whose raise is refused once.
	for _, id := range []string{"a", "b", "c"} {
		if _, err := operator.CancelMessage(ctx, &orreryv1.Lane{Namespace: "ns", Queue: "jobs", Key: keyOn(2, partitions)}, id, ""); err != nil {
			t.Fatal(err)
		}
	}
	enqueueOn(0, "d", "e")
	var refused atomic.Int32
	tr.SetFaultHook(func(p int, req *orreryv1.CommandRequest) (clienttest.Fault, error) {
		if p == 0 && req.GetBatch().GetMutations()[0].GetSetQueueShare() != nil && refused.Add(1) == 1 {
			return clienttest.FaultFailBeforeApply, orrery.Errorf(orrery.CodeUnauthorized, "refused in this test")
		}
		return clienttest.FaultNone, nil
	})
	r.capped = nil // found again: the queue now holds messages on partition 0 only
	r.rounds = 0
	r.Round(ctx)
	leased, milli = shares(t, operator)
	if k, m := sums(leased, milli); refused.Load() != 1 || k != 0 || m != 0 || r.owed[queueName{"ns", "jobs"}].leased != 4 {
		t.Fatalf("a round whose raise was refused: %v leased, %v milli/s, owed %+v; want everything lowered and owed", leased, milli, r.owed)
	}
	r.Round(ctx)
	leased, milli = shares(t, operator)
	if leased[0] != 4 || milli[0] != 2000 || len(r.owed) != 0 {
		t.Fatalf("the next round: %v leased, %v milli/s, owed %+v; want all on partition 0", leased, milli, r.owed)
	}
}

// TestARoundFreesNoUnitALeaseHolds: a partition whose share is held by leases keeps it when
// the demand shifts (its lowering stops at its leases, so nothing is freed and nothing raised:
// the shares still sum to the cap); once the leases are acked, the next round moves the units.
func TestARoundFreesNoUnitALeaseHolds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const partitions = 4
	tr := clienttest.New(partitions, clienttest.WithGrants(grants.Everything("operator")))
	operator := client.New(tr, client.Options{Principal: "operator"})
	silo := client.New(tr, client.Options{Principal: input.SystemPrincipalPrefix + "silo"})
	t.Cleanup(func() { _ = operator.Close() })
	enqueueOn := func(p int, ids ...string) {
		t.Helper()
		for _, id := range ids {
			if _, err := operator.Enqueue(ctx, &orreryv1.Enqueue{Lane: &orreryv1.Lane{Namespace: "ns", Queue: "jobs", Key: keyOn(p, partitions)}, Id: id, PayloadJson: `{}`}); err != nil {
				t.Fatal(err)
			}
		}
	}
	enqueueOn(2, "a", "b", "c")
	if err := operator.SetQueueLimits(ctx, "ns", "jobs", 2, 0); err != nil {
		t.Fatal(err)
	}
	r := New(Config{Client: silo, Leads: func() bool { return true }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r.Round(ctx)
	held, err := operator.Receive(ctx, 2, &orreryv1.Receive{Namespace: "ns", Queue: "jobs", Max: 10}, 0)
	if err != nil || len(held) != 2 {
		t.Fatalf("partition 2 with the whole share of 2 leased %d (%v)", len(held), err)
	}
	enqueueOn(0, "d", "e")
	r.capped, r.rounds = nil, 0
	r.Round(ctx)
	if leased, _ := shares(t, operator); leased[2] != 2 || leased[0] != 0 {
		t.Fatalf("with 2 leases held on partition 2: shares %v; want them kept there", leased)
	}
	for _, m := range held {
		if _, err := operator.Ack(ctx, m.GetLane(), m.GetId(), m.GetLease().GetToken()); err != nil {
			t.Fatal(err)
		}
	}
	r.Round(ctx)
	if leased, _ := shares(t, operator); leased[2] != 1 || leased[0] != 1 {
		t.Fatalf("after the acks: shares %v; want 1 on partition 2 and 1 on partition 0", leased)
	}
}
