package queue

import (
	"slices"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// leaseCommand is one of Ack, Release, ExtendLease against (id, token).
type leaseCommand func(v kv.View, lim input.Limits, id, token string, now int64) error

func ackCommand(v kv.View, lim input.Limits, id, token string, now int64) error {
	_, _, err := ApplyAck(v, lim, &orreryv1.Ack{Lane: laneOf(testQueue, "k"), Id: id, LeaseToken: token}, now)
	return err
}

func releaseCommand(v kv.View, lim input.Limits, id, token string, now int64) error {
	_, err := ApplyRelease(v, lim, &orreryv1.Release{Lane: laneOf(testQueue, "k"), Id: id, LeaseToken: token}, now)
	return err
}

func extendCommand(v kv.View, lim input.Limits, id, token string, now int64) error {
	_, err := ApplyExtendLease(v, lim, &orreryv1.ExtendLease{Lane: laneOf(testQueue, "k"), Id: id, LeaseToken: token}, now)
	return err
}

// TestLeaseTokenRule checks the token rule shared by Ack, Release and ExtendLease: every
// failure has its code and field and writes nothing.
func TestLeaseTokenRule(t *testing.T) {
	for _, cmd := range []struct {
		name string
		run  leaseCommand
	}{{"ack", ackCommand}, {"release", releaseCommand}, {"extend", extendCommand}} {
		for _, tc := range []struct {
			name  string
			id    string
			token func(first, second *orreryv1.QueueMessage) string
			code  orrery.Code
			field string
		}{
			{"absent message", "nope", func(_, s *orreryv1.QueueMessage) string { return s.GetLease().GetToken() }, orrery.CodeNotFound, "id"},
			{"never leased", "fresh", func(_, s *orreryv1.QueueMessage) string { return s.GetLease().GetToken() }, orrery.CodeTokenInvalidated, "lease_token"},
			{"stale token", "a", func(f, _ *orreryv1.QueueMessage) string { return f.GetLease().GetToken() }, orrery.CodeTokenInvalidated, "lease_token"},
			{"made-up token", "a", func(_, _ *orreryv1.QueueMessage) string { return "0123456789abcdef0123456789abcdef" }, orrery.CodeTokenInvalidated, "lease_token"},
		} {
			t.Run(cmd.name+"/"+tc.name, func(t *testing.T) {
				b := setup(t)
				b.enqueue("a")
				first := b.receive(testQueue, 1)[0]
				b.advance(b.lim.DefaultLeaseMicros)
				second := b.receive(testQueue, 1)[0]
				b.enqueue("fresh")
				before := b.store.Clone()
				wantCode(t, cmd.run(b.store, b.lim, tc.id, tc.token(first, second), b.now), tc.code, tc.field)
				if !b.store.Equal(before) {
					t.Fatal("a refused lease command wrote")
				}
			})
		}
	}
}

func TestAck(t *testing.T) {
	b := setup(t)
	b.enqueue("a", func(m *orreryv1.Enqueue) { m.HeadersJson = `{"h":true}` })
	b.enqueue("b")
	msg := b.receive(testQueue, 1)[0]
	// The lease has ended but nobody received the message again: the token still acks.
	b.advance(b.lim.DefaultLeaseMicros + input.Minute)
	res, acked, err := ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: msg.GetLane(), Id: "a", LeaseToken: msg.GetLease().GetToken()}, b.now)
	if err != nil {
		t.Fatal(err)
	}
	if res.GetId() != "a" || res.GetLeaseUntilUnixMicros() != 0 || acked.String() != msg.String() {
		t.Fatalf("ack result %v, message %v", res, acked)
	}
	b.check()
	if _, found := b.message(msg.GetLane(), "a"); found {
		t.Fatal("acked message still live")
	}
	if ts, found := b.tombstone(msg.GetLane(), "a"); !found || ts.GetExpired() || ts.GetRemovedAtUnixMicros() != b.now {
		t.Fatalf("tombstone %v %v", ts, found)
	}
	if n, size := b.counters(msg.GetLane()); n != 1 || size != uint64(len(`{"id":"b"}`)) {
		t.Fatalf("counters %d/%d", n, size)
	}
	// A second ack finds nothing.
	_, _, err = ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: msg.GetLane(), Id: "a", LeaseToken: msg.GetLease().GetToken()}, b.now)
	wantCode(t, err, orrery.CodeNotFound, "id")
	// Acking the last message removes the lane's counters record.
	last := b.receive(testQueue, 1)[0]
	if _, _, err := ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: last.GetLane(), Id: "b", LeaseToken: last.GetLease().GetToken()}, b.now); err != nil {
		t.Fatal(err)
	}
	b.check()
	if _, found, _ := b.store.Get(keys.LaneCountersKey(last.GetLane())); found {
		t.Fatal("an empty lane kept its counters")
	}
}

func TestRelease(t *testing.T) {
	for _, tc := range []struct {
		name        string
		delayMicros int64
	}{{"at once", 0}, {"with delay", 10 * input.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			b.enqueue("a")
			msg := b.receive(testQueue, 1)[0]
			b.advance(input.Second)
			res, err := ApplyRelease(b.store, b.lim, &orreryv1.Release{Lane: msg.GetLane(), Id: "a", LeaseToken: msg.GetLease().GetToken(), DelayMicros: tc.delayMicros}, b.now)
			if err != nil || res.GetId() != "a" || res.GetLeaseUntilUnixMicros() != 0 {
				t.Fatalf("release %v %v", res, err)
			}
			b.check()
			stored, _ := b.message(msg.GetLane(), "a")
			if stored.GetLease() != nil || stored.GetVisibleAtUnixMicros() != b.now+tc.delayMicros || stored.GetDeliveryCount() != 1 {
				t.Fatalf("released message %v", stored)
			}
			if at, _, _ := NextVisibleAt(b.store, testNamespace, testQueue); at != b.now+tc.delayMicros {
				t.Fatalf("next visible %d, want %d", at, b.now+tc.delayMicros)
			}
			if tc.delayMicros > 0 {
				b.advance(tc.delayMicros - 1)
				if got := b.receive(testQueue, 1); len(got) != 0 {
					t.Fatalf("released message visible before its delay: %v", ids(got))
				}
				b.advance(1)
			}
			again := b.receive(testQueue, 1)
			if len(again) != 1 || again[0].GetDeliveryCount() != 2 {
				t.Fatalf("redelivery %v", again)
			}
			// The released token is dead.
			wantCode(t, releaseCommand(b.store, b.lim, "a", msg.GetLease().GetToken(), b.now), orrery.CodeTokenInvalidated, "lease_token")
		})
	}
}

func TestExtendLease(t *testing.T) {
	b := setup(t)
	b.enqueue("a")
	msg := b.receive(testQueue, 1)[0]
	token := msg.GetLease().GetToken()
	b.advance(b.lim.DefaultLeaseMicros - 1)
	res, err := ApplyExtendLease(b.store, b.lim, &orreryv1.ExtendLease{Lane: msg.GetLane(), Id: "a", LeaseToken: token, LeaseDurationMicros: 2 * input.Minute}, b.now)
	if err != nil || res.GetId() != "a" || res.GetLeaseUntilUnixMicros() != b.now+2*input.Minute {
		t.Fatalf("extend %v %v", res, err)
	}
	b.check()
	b.advance(1) // the original lease end
	if got := b.receive(testQueue, 1); len(got) != 0 {
		t.Fatalf("redelivered %v at the old lease end", ids(got))
	}
	// Duration 0 means the default lease.
	res, err = ApplyExtendLease(b.store, b.lim, &orreryv1.ExtendLease{Lane: msg.GetLane(), Id: "a", LeaseToken: token}, b.now)
	if err != nil || res.GetLeaseUntilUnixMicros() != b.now+b.lim.DefaultLeaseMicros {
		t.Fatalf("default extend %v %v", res, err)
	}
	b.now = res.GetLeaseUntilUnixMicros()
	before := b.store.Clone()
	wantCode(t, extendCommand(b.store, b.lim, "a", token, b.now), orrery.CodeExpired, "lease_token")
	if !b.store.Equal(before) {
		t.Fatal("refused extend wrote")
	}
	got := b.receive(testQueue, 1)
	if !slices.Equal(ids(got), []string{"a"}) || got[0].GetDeliveryCount() != 2 {
		t.Fatalf("redelivery at the extended end: %v", got)
	}
}

// TestAckedRecurringOccurrenceLeavesNoTombstone: an acked recurring occurrence (stored with
// PutFresh; its id cannot come back) leaves no tombstone, while a manual occurrence and a
// client message do, so re-enqueuing their ids stays a no-op.
func TestAckedRecurringOccurrenceLeavesNoTombstone(t *testing.T) {
	b := setup(t)
	lane := laneOf(testQueue, "k")
	put := func(id string, origin *orreryv1.OccurrenceOrigin) {
		msg := &orreryv1.QueueMessage{Id: id, Lane: lane, PayloadJson: `{}`, EnqueuedAtUnixMicros: b.now, VisibleAtUnixMicros: b.now,
			MaxDeliveries: b.lim.DefaultMaxDeliveries, Origin: &orreryv1.QueueMessage_Occurrence{Occurrence: origin}}
		if err := PutFresh(b.store, b.lim, msg); err != nil {
			t.Fatal(err)
		}
	}
	put("recurring-1", &orreryv1.OccurrenceOrigin{ScheduleId: "s", Generation: 1, Ordinal: 0})
	put("manual-1", &orreryv1.OccurrenceOrigin{ScheduleId: "s", Generation: 1, Manual: true})
	b.enqueue("client-1")
	for _, msg := range b.receive(testQueue, 3) {
		if _, _, err := ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: lane, Id: msg.GetId(), LeaseToken: msg.GetLease().GetToken()}, b.now); err != nil {
			t.Fatal(err)
		}
	}
	b.check()
	for id, want := range map[string]bool{"recurring-1": false, "manual-1": true, "client-1": true} {
		if _, found := b.tombstone(lane, id); found != want {
			t.Errorf("tombstone of %s: %v, want %v", id, found, want)
		}
	}
	if n, _ := b.counters(lane); n != 0 {
		t.Errorf("lane counts %d messages after every ack", n)
	}
}
