package queue

import (
	"slices"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

func TestEnqueueStoresMessage(t *testing.T) {
	b := setup(t)
	res := b.enqueue("a", func(m *orreryv1.Enqueue) {
		m.HeadersJson = `{"h":1}`
		m.OrderingKey = "order-1"
		m.DelayMicros = 5 * input.Second
		m.TimeToLiveMicros = input.Minute
	})
	if !res.GetCreated() || res.GetId() != "a" {
		t.Fatalf("result %v, want created a", res)
	}
	msg, found := b.message(laneOf(testQueue, "k"), "a")
	if !found {
		t.Fatal("message not stored")
	}
	want := &orreryv1.QueueMessage{
		Id: "a", Lane: laneOf(testQueue, "k"), PayloadJson: `{"id":"a"}`, HeadersJson: `{"h":1}`,
		OrderingKey: "order-1", EnqueuedAtUnixMicros: startMicros,
		VisibleAtUnixMicros: startMicros + 5*input.Second,
		ExpiresAtUnixMicros: startMicros + 5*input.Second + input.Minute,
		MaxDeliveries:       b.lim.DefaultMaxDeliveries, Sequence: 1,
		Compared: true,
	}
	if msg.String() != want.String() {
		t.Fatalf("stored\n%v\nwant\n%v", msg, want)
	}
	if n, size := b.counters(laneOf(testQueue, "k")); n != 1 || size != uint64(len(`{"id":"a"}`)+len(`{"h":1}`)) {
		t.Fatalf("counters %d/%d", n, size)
	}
}

func TestEnqueueIdempotentByID(t *testing.T) {
	b := setup(t)
	b.enqueue("a")
	before := b.store.Clone()
	if res := b.enqueue("a", func(m *orreryv1.Enqueue) { m.DelayMicros, m.MaxDeliveries = input.Minute, 3 }); res.GetCreated() {
		t.Fatal("second enqueue of a created a message")
	}
	if !b.store.Equal(before) {
		t.Fatal("duplicate enqueue wrote")
	}
	// The same id in another lane is another message.
	if res := b.enqueue("a", func(m *orreryv1.Enqueue) { m.Lane = laneOf(testQueue, "other") }); !res.GetCreated() {
		t.Fatal("enqueue in another lane was not created")
	}
	// After an ack the tombstone keeps the id taken.
	got := b.receive(testQueue, 2)
	for _, msg := range got {
		if _, _, err := ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: msg.GetLane(), Id: msg.GetId(), LeaseToken: msg.GetLease().GetToken()}, b.now); err != nil {
			t.Fatal(err)
		}
	}
	before = b.store.Clone()
	if res := b.enqueue("a"); res.GetCreated() {
		t.Fatal("enqueue after ack created the message again")
	}
	if !b.store.Equal(before) {
		t.Fatal("enqueue after ack wrote")
	}
}

func TestEnqueueQuota(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit func(*input.Limits)
	}{
		{"messages", func(l *input.Limits) { l.MaxLaneMessages = 2 }},
		{"bytes", func(l *input.Limits) { l.MaxLaneBytes = 2 * uint64(len(`{"id":"a"}`)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			tc.limit(&b.lim)
			b.enqueue("a")
			b.enqueue("b")
			before := b.store.Clone()
			_, err := ApplyEnqueue(b.store, b.lim, &orreryv1.Enqueue{Lane: laneOf(testQueue, "k"), Id: "c", PayloadJson: `{"id":"c"}`}, b.now, CompareOrReturn)
			wantCode(t, err, orrery.CodeQuotaExceeded, "lane")
			if !b.store.Equal(before) {
				t.Fatal("quota failure wrote")
			}
			// A retry of an existing id on a full lane is still an idempotent success.
			if res := b.enqueue("a"); res.GetCreated() {
				t.Fatal("duplicate created")
			}
			// Other lanes are not affected.
			b.enqueue("c", func(m *orreryv1.Enqueue) { m.Lane = laneOf(testQueue, "k2") })
			// Removing a message frees quota.
			msgs := b.receive(testQueue, 1)
			if _, _, err := ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: msgs[0].GetLane(), Id: msgs[0].GetId(), LeaseToken: msgs[0].GetLease().GetToken()}, b.now); err != nil {
				t.Fatal(err)
			}
			b.enqueue("c")
		})
	}
}

// TestValidationLeavesStoreUnchanged checks every validation rule of every mutation: the
// error is Validation on the named field and the store stays byte-identical.
func TestValidationLeavesStoreUnchanged(t *testing.T) {
	long := strings.Repeat("x", 300)
	lim := input.DefaultLimits()
	enq := func(edit func(*orreryv1.Enqueue)) func(kv.View, int64) error {
		return func(v kv.View, now int64) error {
			m := &orreryv1.Enqueue{Lane: laneOf(testQueue, "k"), Id: "new", PayloadJson: `{}`}
			edit(m)
			_, err := ApplyEnqueue(v, lim, m, now, CompareOrReturn)
			return err
		}
	}
	recv := func(edit func(*orreryv1.Receive)) func(kv.View, int64) error {
		return func(v kv.View, now int64) error {
			m := &orreryv1.Receive{Namespace: testNamespace, Queue: testQueue, Max: 1}
			edit(m)
			_, err := ApplyReceive(v, lim, m, now)
			return err
		}
	}
	// The lease commands target the leased message "a" with a placeholder token; tokens
	// are checked after validation, so a valid command would fail with TokenInvalidated.
	ack := func(edit func(*orreryv1.Ack)) func(kv.View, int64) error {
		return func(v kv.View, now int64) error {
			m := &orreryv1.Ack{Lane: laneOf(testQueue, "k"), Id: "a", LeaseToken: "t"}
			edit(m)
			_, _, err := ApplyAck(v, lim, m, now)
			return err
		}
	}
	rel := func(edit func(*orreryv1.Release)) func(kv.View, int64) error {
		return func(v kv.View, now int64) error {
			m := &orreryv1.Release{Lane: laneOf(testQueue, "k"), Id: "a", LeaseToken: "t"}
			edit(m)
			_, err := ApplyRelease(v, lim, m, now)
			return err
		}
	}
	ext := func(edit func(*orreryv1.ExtendLease)) func(kv.View, int64) error {
		return func(v kv.View, now int64) error {
			m := &orreryv1.ExtendLease{Lane: laneOf(testQueue, "k"), Id: "a", LeaseToken: "t"}
			edit(m)
			_, err := ApplyExtendLease(v, lim, m, now)
			return err
		}
	}
	for _, tc := range []struct {
		name  string
		apply func(kv.View, int64) error
		field string
	}{
		{"enqueue nil", func(v kv.View, now int64) error {
			_, err := ApplyEnqueue(v, lim, nil, now, CompareOrReturn)
			return err
		}, ""},
		{"enqueue no lane", enq(func(m *orreryv1.Enqueue) { m.Lane = nil }), "lane"},
		{"enqueue empty namespace", enq(func(m *orreryv1.Enqueue) { m.Lane.Namespace = "" }), "lane.namespace"},
		{"enqueue bad queue", enq(func(m *orreryv1.Enqueue) { m.Lane.Queue = "a b" }), "lane.queue"},
		{"enqueue dead-letter queue", enq(func(m *orreryv1.Enqueue) { m.Lane.Queue = deadQueue }), "lane.queue"},
		{"enqueue empty key", enq(func(m *orreryv1.Enqueue) { m.Lane.Key = "" }), "lane.key"},
		{"enqueue empty id", enq(func(m *orreryv1.Enqueue) { m.Id = "" }), "id"},
		{"enqueue long id", enq(func(m *orreryv1.Enqueue) { m.Id = long }), "id"},
		{"enqueue control id", enq(func(m *orreryv1.Enqueue) { m.Id = "a\nb" }), "id"},
		{"enqueue recurring occurrence id", enq(func(m *orreryv1.Enqueue) { m.Id = "recurring-0123-0000000000000001-0000000000000000" }), "id"},
		{"enqueue manual occurrence id", enq(func(m *orreryv1.Enqueue) { m.Id = "manual-x" }), "id"},
		{"enqueue bad payload", enq(func(m *orreryv1.Enqueue) { m.PayloadJson = `{` }), "payload_json"},
		{"enqueue big payload", enq(func(m *orreryv1.Enqueue) { m.PayloadJson = `"` + strings.Repeat("x", lim.MaxPayloadBytes) + `"` }), "payload_json"},
		{"enqueue headers not object", enq(func(m *orreryv1.Enqueue) { m.HeadersJson = `[1]` }), "headers_json"},
		{"enqueue big headers", enq(func(m *orreryv1.Enqueue) { m.HeadersJson = `{"h":"` + strings.Repeat("x", lim.MaxHeadersBytes) + `"}` }), "headers_json"},
		{"enqueue bad ordering key", enq(func(m *orreryv1.Enqueue) { m.OrderingKey = "a\x00" }), "ordering_key"},
		{"enqueue negative delay", enq(func(m *orreryv1.Enqueue) { m.DelayMicros = -1 }), "delay_micros"},
		{"enqueue long delay", enq(func(m *orreryv1.Enqueue) { m.DelayMicros = lim.MaxDelayMicros + 1 }), "delay_micros"},
		{"enqueue negative ttl", enq(func(m *orreryv1.Enqueue) { m.TimeToLiveMicros = -1 }), "time_to_live_micros"},
		{"enqueue long ttl", enq(func(m *orreryv1.Enqueue) { m.TimeToLiveMicros = input.MaxTimeToLiveMicros + 1 }), "time_to_live_micros"},
		{"enqueue negative max deliveries", enq(func(m *orreryv1.Enqueue) { m.MaxDeliveries = -1 }), "max_deliveries"},
		{"enqueue many max deliveries", enq(func(m *orreryv1.Enqueue) { m.MaxDeliveries = int32(lim.MaxMaxDeliveries) + 1 }), "max_deliveries"},
		{"enqueue past last instant", func(v kv.View, _ int64) error {
			_, err := ApplyEnqueue(v, lim, &orreryv1.Enqueue{Lane: laneOf(testQueue, "k"), Id: "n", DelayMicros: input.Day}, input.MaxInstantMicros-input.Hour, CompareOrReturn)
			return err
		}, "delay_micros"},
		{"receive nil", func(v kv.View, now int64) error { _, err := ApplyReceive(v, lim, nil, now); return err }, ""},
		{"receive empty namespace", recv(func(m *orreryv1.Receive) { m.Namespace = "" }), "namespace"},
		{"receive bad queue", recv(func(m *orreryv1.Receive) { m.Queue = "$dlq" }), "queue"},
		{"receive too many", recv(func(m *orreryv1.Receive) { m.Max = lim.MaxReceivePerCommand + 1 }), "max"},
		{"receive short lease", recv(func(m *orreryv1.Receive) { m.LeaseDurationMicros = input.Second - 1 }), "lease_duration_micros"},
		{"receive long lease", recv(func(m *orreryv1.Receive) { m.LeaseDurationMicros = lim.MaxLeaseMicros + 1 }), "lease_duration_micros"},
		{"receive negative lease", recv(func(m *orreryv1.Receive) { m.LeaseDurationMicros = -1 }), "lease_duration_micros"},
		{"receive bad owner", recv(func(m *orreryv1.Receive) { m.Owner = long }), "owner"},
		{"ack nil", func(v kv.View, now int64) error { _, _, err := ApplyAck(v, lim, nil, now); return err }, ""},
		{"ack no lane", ack(func(m *orreryv1.Ack) { m.Lane = nil }), "lane"},
		{"ack bad queue", ack(func(m *orreryv1.Ack) { m.Lane.Queue = "-x" }), "lane.queue"},
		{"ack empty id", ack(func(m *orreryv1.Ack) { m.Id = "" }), "id"},
		{"ack empty token", ack(func(m *orreryv1.Ack) { m.LeaseToken = "" }), "lease_token"},
		{"release empty key", rel(func(m *orreryv1.Release) { m.Lane.Key = "" }), "lane.key"},
		{"release empty token", rel(func(m *orreryv1.Release) { m.LeaseToken = "" }), "lease_token"},
		{"release negative delay", rel(func(m *orreryv1.Release) { m.DelayMicros = -1 }), "delay_micros"},
		{"release long delay", rel(func(m *orreryv1.Release) { m.DelayMicros = lim.MaxDelayMicros + 1 }), "delay_micros"},
		{"extend empty id", ext(func(m *orreryv1.ExtendLease) { m.Id = "" }), "id"},
		{"extend short lease", ext(func(m *orreryv1.ExtendLease) { m.LeaseDurationMicros = 1 }), "lease_duration_micros"},
		{"extend long lease", ext(func(m *orreryv1.ExtendLease) { m.LeaseDurationMicros = lim.MaxLeaseMicros + 1 }), "lease_duration_micros"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			b.enqueue("a")
			b.enqueue("b")
			if got := b.receive(testQueue, 1); !slices.Equal(ids(got), []string{"a"}) {
				t.Fatalf("received %v", ids(got))
			}
			before := b.store.Clone()
			wantCode(t, tc.apply(b.store, b.now), orrery.CodeValidation, tc.field)
			if !b.store.Equal(before) {
				t.Fatal("a failed validation wrote to the store")
			}
		})
	}
}

// TestEmptyPayloadIsNone: an Enqueue with empty payload and headers is accepted (none) and
// the worker receives empty strings.
func TestEmptyPayloadIsNone(t *testing.T) {
	b := setup(t)
	b.enqueue("empty", func(m *orreryv1.Enqueue) { m.PayloadJson, m.HeadersJson = "", "" })
	msgs := b.receive(testQueue, 1)
	if len(msgs) != 1 || msgs[0].GetId() != "empty" || msgs[0].GetPayloadJson() != "" || msgs[0].GetHeadersJson() != "" {
		t.Fatalf("received %v", msgs)
	}
}
