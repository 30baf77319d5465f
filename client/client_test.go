package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/saga"
	"github.com/orreryhq/orrery/grains/schedule"
)

func TestScheduleCallsRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t, 8)
	ctx := ctxFor(t)
	l := lane(testQueue, "reports")
	id := client.NewID()
	if err := input.UUID("id", id); err != nil {
		t.Fatalf("NewID: %v", err)
	}
	res, err := b.c.ConfigureSchedule(ctx, everySchedule(l, id, time.Minute, b.clock.Now()), 0)
	if err != nil {
		t.Fatalf("configure: %v", err)
	}
	if res.GetRevision() != 1 || res.GetGeneration() != 1 {
		t.Fatalf("configure result %v", res)
	}
	if got, want := b.lastCall().Partition, b.partitionOf(l); got != want {
		t.Fatalf("configure went to partition %d, want %d", got, want)
	}
	b.clock.Advance(3*time.Minute + 30*time.Second)
	b.emitDue(4) // ordinals 0 to 3
	b.emitDue(0) // each once
	msgs := b.laneMessages(l)
	if len(msgs) != 4 {
		t.Fatalf("lane holds %v, want 4 occurrences", msgs)
	}
	for i, m := range msgs { // ids sort in ordinal order
		if m.GetId() != schedule.OccurrenceID(id, 1, uint64(i)) || m.GetOccurrence().GetScheduleId() != id || m.GetOccurrence().GetOrdinal() != uint64(i) {
			t.Fatalf("lane message %d is %v, want occurrence %d of schedule %s", i, m, i, id)
		}
	}
	emitted, err := b.c.InspectSchedule(ctx, l, id)
	if err != nil || emitted.GetNextOrdinal() != 4 {
		t.Fatalf("inspect after the emission: %v %v, want next ordinal 4", emitted, err)
	}

	paused, err := b.c.PauseSchedule(ctx, &orreryv1.PauseSchedule{Lane: l, ScheduleId: id, ExpectedRevision: emitted.GetRevision()})
	if err != nil {
		t.Fatalf("pause: %v", err)
	}
	if _, err := b.c.TriggerSchedule(ctx, &orreryv1.TriggerSchedule{Lane: l, ScheduleId: id}); err == nil {
		t.Fatal("trigger while paused succeeded")
	}
	resumed, err := b.c.ResumeSchedule(ctx, &orreryv1.ResumeSchedule{Lane: l, ScheduleId: id, ExpectedRevision: paused.GetRevision()})
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	triggered, err := b.c.TriggerSchedule(ctx, &orreryv1.TriggerSchedule{Lane: l, ScheduleId: id})
	if err != nil || len(triggered.GetEnqueuedIds()) != 1 {
		t.Fatalf("trigger: %v %v", triggered, err)
	}
	rec, err := b.c.InspectSchedule(ctx, l, id)
	if err != nil || rec.GetRevision() != triggered.GetRevision() || rec.GetPaused() {
		t.Fatalf("inspect: %v %v", rec, err)
	}
	cancelled, err := b.c.CancelSchedule(ctx, &orreryv1.CancelSchedule{Lane: l, ScheduleId: id, ExpectedRevision: triggered.GetRevision()})
	if err != nil {
		t.Fatalf("cancel: %v (resumed at %d)", err, resumed.GetRevision())
	}
	if _, err := b.c.DeleteSchedule(ctx, &orreryv1.DeleteSchedule{Lane: l, ScheduleId: id, ExpectedRevision: cancelled.GetRevision()}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := b.c.InspectSchedule(ctx, l, id); !errors.Is(err, orrery.ErrNotFound) {
		t.Fatalf("inspect after delete: %v, want NotFound", err)
	}
	// Every call went to the lane's partition, whatever the queue.
	for _, call := range b.commandCalls() {
		if call.Partition != b.partitionOf(l) {
			t.Fatalf("command %s went to partition %d, want %d", call.CommandID(), call.Partition, b.partitionOf(l))
		}
	}
}

func TestSagaCallsRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t, 8)
	ctx := ctxFor(t)
	l := lane("sagas", "order-17")
	id := client.NewID()
	deadline := b.clock.Now().Add(time.Minute)
	res, err := b.c.CompareExchangeSaga(ctx, &orreryv1.CompareExchangeSaga{
		Lane: l, SagaId: id, Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING, StateJson: `{"step":1}`,
		DeadlineUnixMicros: deadline.UnixMicro(),
		Timeout:            &orreryv1.SagaTimeout{Queue: "timeouts", Template: &orreryv1.MessageTemplate{PayloadJson: `{"late":true}`}},
	})
	if err != nil || res.GetRevision() != 1 {
		t.Fatalf("create saga: %v %v", res, err)
	}
	b.emitDue(0) // before the deadline: nothing is due
	if rec, err := b.c.InspectSaga(ctx, l, id); err != nil || rec.GetPhase() != orreryv1.SagaPhase_SAGA_PHASE_WAITING {
		t.Fatalf("inspect saga before its deadline: %v %v, want it waiting", rec, err)
	}
	b.clock.Advance(time.Until(deadline) + time.Second)
	b.emitDue(1)
	b.emitDue(0)
	rec, err := b.c.InspectSaga(ctx, l, id)
	if err != nil || rec.GetPhase() != orreryv1.SagaPhase_SAGA_PHASE_TIMED_OUT || rec.GetTimeoutMessageId() != saga.TimeoutMessageID(id, 1) {
		t.Fatalf("inspect saga: %v %v, want it timed out", rec, err)
	}
	timeouts := b.laneMessages(lane("timeouts", "order-17"))
	if len(timeouts) != 1 || timeouts[0].GetId() != rec.GetTimeoutMessageId() {
		t.Fatalf("timeout lane holds %v, want %s", timeouts, rec.GetTimeoutMessageId())
	}
	if _, err := b.c.CompareExchangeSaga(ctx, &orreryv1.CompareExchangeSaga{Lane: l, SagaId: id, ExpectedRevision: 1, Phase: orreryv1.SagaPhase_SAGA_PHASE_COMPLETED}); !errors.Is(err, orrery.ErrRevisionConflict) {
		t.Fatalf("exchange on a timed-out saga: %v, want RevisionConflict", err)
	}
	if _, err := b.c.InspectSaga(ctx, l, client.NewID()); !errors.Is(err, orrery.ErrNotFound) {
		t.Fatalf("inspect unknown saga: %v, want NotFound", err)
	}
}

func TestQueueCallsRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t, 8)
	ctx := ctxFor(t)
	l := lane(testQueue, "k1")
	p := b.partitionOf(l)

	original := &orreryv1.Enqueue{Lane: l, PayloadJson: `{"n":1}`, HeadersJson: `{"h":"v"}`}
	res, err := b.c.Enqueue(ctx, original)
	if err != nil || !res.GetCreated() {
		t.Fatalf("enqueue: %v %v", res, err)
	}
	if original.GetId() != "" || input.UUID("id", res.GetId()) != nil {
		t.Fatalf("enqueue id %q (caller's message changed to %q), want a generated UUID", res.GetId(), original.GetId())
	}
	again, err := b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: l, Id: res.GetId(), PayloadJson: `{"n":1}`, HeadersJson: `{"h":"v"}`})
	if err != nil || again.GetCreated() {
		t.Fatalf("enqueue of an existing id: %v %v, want created=false", again, err)
	}

	receive := &orreryv1.Receive{Namespace: testNamespace, Queue: testQueue, Max: 10, LeaseDurationMicros: 5 * input.Second, Owner: "me"}
	msgs, err := b.c.Receive(ctx, p, receive, 0)
	if err != nil || len(msgs) != 1 || msgs[0].GetDeliveryCount() != 1 {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	m := msgs[0]
	if m.GetHeadersJson() != `{"h":"v"}` || m.GetLease().GetOwner() != "me" {
		t.Fatalf("received %v", m)
	}
	ext, err := b.c.ExtendLease(ctx, l, m.GetId(), m.GetLease().GetToken(), 10*time.Second)
	if err != nil || ext.GetLeaseUntilUnixMicros() <= m.GetLease().GetUntilUnixMicros() {
		t.Fatalf("extend: %v %v", ext, err)
	}
	if _, err := b.c.Release(ctx, l, m.GetId(), m.GetLease().GetToken(), 0); err != nil {
		t.Fatalf("release: %v", err)
	}
	if _, err := b.c.Ack(ctx, l, m.GetId(), m.GetLease().GetToken()); err == nil {
		t.Fatal("ack with a released lease's token succeeded")
	}
	msgs, err = b.c.Receive(ctx, p, receive, 0)
	if err != nil || len(msgs) != 1 || msgs[0].GetDeliveryCount() != 2 {
		t.Fatalf("second receive: %v %v", msgs, err)
	}
	if _, err := b.c.Ack(ctx, l, msgs[0].GetId(), msgs[0].GetLease().GetToken()); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if left := b.laneMessages(l); len(left) != 0 {
		t.Fatalf("lane holds %v after ack", left)
	}
	status, err := b.c.PartitionStatus(ctx, p)
	if err != nil || status.GetPartition() != int32(p) || status.GetAppliedIndex() == 0 || status.GetLoggedTimeUnixMicros() == 0 {
		t.Fatalf("partition status: %v %v", status, err)
	}
	if _, err := b.c.PartitionStatus(ctx, 8); !errors.Is(err, orrery.ErrValidation) {
		t.Fatalf("status of partition 8 of 8: %v, want Validation", err)
	}
	if _, err := b.c.Receive(ctx, -1, receive, 0); !errors.Is(err, orrery.ErrValidation) {
		t.Fatalf("receive on partition -1: %v, want Validation", err)
	}
}

func TestRoutingIgnoresQueueName(t *testing.T) {
	t.Parallel()
	b := setup(t, 16)
	ctx := ctxFor(t)
	seen := map[int]bool{}
	for i := range 40 {
		key := client.NewID()
		first, second := lane("a", key), lane("b", key)
		if b.partitionOf(first) != b.partitionOf(second) {
			t.Fatalf("queues a and b of key %s route apart", key)
		}
		for j, l := range []*orreryv1.Lane{first, second} {
			b.enqueue(l, "m")
			if got, want := b.lastCall().Partition, b.partitionOf(l); got != want {
				t.Fatalf("enqueue %d/%d went to partition %d, want %d", i, j, got, want)
			}
		}
		seen[b.partitionOf(first)] = true
		// Both messages are visible on that partition and nowhere else.
		if n := len(b.laneMessages(first)) + len(b.laneMessages(second)); n != 2 {
			t.Fatalf("key %s: %d messages, want 2", key, n)
		}
	}
	if len(seen) < 8 {
		t.Fatalf("40 random keys used only %d of 16 partitions", len(seen))
	}
	// A batch is refused before sending when a lane belongs to another partition.
	l := lane("a", "fixed")
	other := (b.partitionOf(l) + 1) % 16
	before := len(b.commandCalls())
	_, _, err := b.c.Batch(ctx, other, []*orreryv1.Mutation{enqueueMutation(l, "x")})
	if !errors.Is(err, orrery.ErrValidation) || len(b.commandCalls()) != before {
		t.Fatalf("misrouted batch: %v (%d calls sent), want Validation and none sent", err, len(b.commandCalls())-before)
	}
}

func TestBatchAppliesAtomically(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	ctx := ctxFor(t)
	l := lane(testQueue, "k")
	p := b.partitionOf(l)
	sagaID := client.NewID()
	receipt, raw, err := b.c.Batch(ctx, p, []*orreryv1.Mutation{
		enqueueMutation(l, "one"),
		{Kind: &orreryv1.Mutation_CompareExchangeSaga{CompareExchangeSaga: &orreryv1.CompareExchangeSaga{Lane: lane("sagas", "k"), SagaId: sagaID, Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING}}},
		enqueueMutation(l, ""), // invalid: no id
	})
	if err != nil || len(raw) == 0 || len(receipt.GetResults()) != 3 {
		t.Fatalf("batch: %v %v", receipt, err)
	}
	if !errors.Is(orrery.FromProto(receipt.GetResults()[2].GetError()), orrery.ErrValidation) || receipt.GetResults()[0].GetEnqueue() == nil {
		t.Fatalf("batch results %v", receipt.GetResults())
	}
	// All or nothing: the failing mutation rolls back the valid one.
	receipt, _, err = b.c.Batch(ctx, p, []*orreryv1.Mutation{enqueueMutation(l, "two"), enqueueMutation(l, "")}, client.WithAllOrNothing())
	if !errors.Is(err, orrery.ErrValidation) || receipt.GetError() == nil || len(receipt.GetResults()) != 0 {
		t.Fatalf("all-or-nothing batch: %v %v, want a rolled-back receipt and Validation", receipt, err)
	}
	if msgs := b.laneMessages(l); len(msgs) != 1 || msgs[0].GetId() != "one" {
		t.Fatalf("lane holds %v, want only one", msgs)
	}
}

func TestCloseClosesTransport(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	if err := b.c.Close(); err != nil || !b.tr.Closed() {
		t.Fatalf("close: %v, transport closed %v", err, b.tr.Closed())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := b.c.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane(testQueue, "k"), Id: "x"}); !errors.Is(err, orrery.ErrDeadlineExceeded) {
		t.Fatalf("enqueue on a closed transport: %v, want retries until the deadline", err)
	}
}

func enqueueMutation(l *orreryv1.Lane, id string) *orreryv1.Mutation {
	return &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: l, Id: id, PayloadJson: `{}`}}}
}

func TestScheduleInspectionAndLedgerRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	c := b.c
	ctx := context.Background()
	lane := &orreryv1.Lane{Namespace: "ns", Queue: "q", Key: "ledger"}
	id := client.NewID()
	if _, err := c.ConfigureSchedule(ctx, &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: id,
		Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{IntervalMicros: time.Minute.Microseconds(), FirstDueAtUnixMicros: b.clock.Now().UnixMicro()}}}}, 0); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(3*time.Minute + 30*time.Second)
	b.emitDue(4)
	in, err := c.ScheduleInspection(ctx, lane, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.GetNextFireTimesUnixMicros()) != 10 || in.GetRecord().GetNextOrdinal() != 4 {
		t.Fatalf("inspection %v", in)
	}
	recs, next, err := c.ReadLedger(ctx, lane, id, client.LedgerQuery{MaxRecords: 2})
	if err != nil || len(recs) != 2 || next == nil {
		t.Fatalf("first ledger page: %d records, continuation %v, err %v", len(recs), next, err)
	}
	rest, next, err := c.ReadLedger(ctx, lane, id, client.LedgerQuery{After: next})
	if err != nil || next != nil || len(recs)+len(rest) != int(in.GetRecord().GetNextOrdinal()) {
		t.Fatalf("second page: %d records, continuation %v, err %v; want %d in all", len(rest), next, err, in.GetRecord().GetNextOrdinal())
	}
	if _, err := c.ScheduleInspection(ctx, lane, client.NewID()); !errors.Is(err, orrery.ErrNotFound) {
		t.Fatalf("absent schedule: %v", err)
	}
}
