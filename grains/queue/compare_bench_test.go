package queue

import (
	"fmt"
	"testing"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// BenchmarkMessageLifecycle measures one message's enqueue, receive and ack on an in-memory
// view, under each Idempotency in the same run: what compare-or-return adds to a queue's
// apply when no id is ever reused (the compared mark, and the digest computed for the
// tombstone at the ack). It reports messages/s. The store starts afresh every 256 messages.
func BenchmarkMessageLifecycle(b *testing.B) {
	for _, mode := range []struct {
		name        string
		idempotency Idempotency
	}{{"same-by-id", SameByID}, {"compare-or-return", CompareOrReturn}} {
		b.Run(mode.name, func(b *testing.B) {
			lim := input.DefaultLimits()
			store := kv.NewMemory()
			lane := &orreryv1.Lane{Namespace: "bench", Queue: "jobs", Key: "k"}
			now := int64(1_700_000_000) * input.Second
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%256 == 255 { // kv.Memory slows as tombstones pile up: measure the queue, not it
					b.StopTimer()
					store = kv.NewMemory()
					b.StartTimer()
				}
				id := fmt.Sprintf("m-%d", i)
				m := &orreryv1.Enqueue{Lane: lane, Id: id, PayloadJson: `{"invoice":12345,"customer":"customer-42"}`}
				if _, err := ApplyEnqueue(store, lim, m, now, mode.idempotency); err != nil {
					b.Fatal(err)
				}
				res, err := ApplyReceive(store, lim, &orreryv1.Receive{Namespace: "bench", Queue: "jobs", Max: 1, Owner: "w"}, now)
				if err != nil || len(res.GetMessages()) != 1 {
					b.Fatalf("receive: %v %v", res, err)
				}
				msg := res.GetMessages()[0]
				if _, _, err := ApplyAck(store, lim, &orreryv1.Ack{Lane: lane, Id: id, LeaseToken: msg.GetLease().GetToken()}, now); err != nil {
					b.Fatal(err)
				}
				now++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "messages/s")
		})
	}
}
