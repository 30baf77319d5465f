package clienttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/route"
)

// Conformance checks what the client relies on of a Transport, against any implementation:
// the twin in this package's tests, the silo's cluster transport in package silo's. It covers
// commands (byte-identical replays, idempotency conflicts, routing), the long-poll receive
// (leasing when an enqueue wakes it, timed out, cancelled, abandoned, replayed), a queue's pause and
// retry policy, and every inspection target the client
// reads: schedule, ledger, saga, lane, queue stats, queue list, schedule and saga lists, audit
// log and partition status. It writes only in a fresh random namespace, so the transport need
// not be empty; it reads the audit log and the queue list from where its own writes begin.
// newTransport is called once; closing what it returns is the caller's business.
func Conformance(t *testing.T, newTransport func(t *testing.T) client.Transport) {
	t.Helper()
	tr := newTransport(t)
	partitions := tr.Partitions()
	if partitions <= 0 {
		t.Fatalf("Partitions() = %d, want a positive count", partitions)
	}
	namespace := "conformance-" + client.NewID()[:8]
	lane := &orreryv1.Lane{Namespace: namespace, Queue: "jobs", Key: "k"}
	p := route.Partition(lane, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	command := func(req *orreryv1.CommandRequest) (*orreryv1.Receipt, []byte, error) {
		t.Helper()
		reply, err := tr.Command(ctx, p, req)
		if err != nil {
			return nil, nil, err
		}
		if reply.GetError() != nil {
			return nil, nil, orrery.FromProto(reply.GetError())
		}
		receipt := &orreryv1.Receipt{}
		if err := proto.Unmarshal(reply.GetReceipt(), receipt); err != nil {
			t.Fatalf("receipt does not decode: %v", err)
		}
		if receipt.GetCommandId() != req.GetBatch().GetCommandId() {
			t.Fatalf("receipt answers command %q, sent %q", receipt.GetCommandId(), req.GetBatch().GetCommandId())
		}
		return receipt, reply.GetReceipt(), nil
	}
	enqueue := func(id string) *orreryv1.CommandRequest {
		return &orreryv1.CommandRequest{Principal: client.DefaultPrincipal, Batch: &orreryv1.Batch{
			CommandId: client.NewID(),
			Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: lane, Id: id, PayloadJson: `{}`}}}},
		}}
	}
	receive := func(wait time.Duration) *orreryv1.CommandRequest {
		return &orreryv1.CommandRequest{Principal: client.DefaultPrincipal, WaitMicros: wait.Microseconds(), Batch: &orreryv1.Batch{
			CommandId: client.NewID(),
			Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: namespace, Queue: "jobs", Max: 10}}}},
		}}
	}

	t.Run("replay returns byte-identical receipts", func(t *testing.T) {
		req := enqueue("replayed")
		first, raw, err := command(req)
		if err != nil || first.GetResults()[0].GetEnqueue().GetCreated() != true {
			t.Fatalf("enqueue: %v %v", first, err)
		}
		_, again, err := command(req)
		if err != nil || !bytes.Equal(raw, again) {
			t.Fatalf("replay: %v, byte-identical %v", err, bytes.Equal(raw, again))
		}
		other := enqueue("other")
		other.Batch.CommandId = req.GetBatch().GetCommandId()
		if _, _, err := command(other); orrery.CodeOf(err) != orrery.CodeIdempotencyConflict {
			t.Fatalf("same id, other request: %v, want IdempotencyConflict", err)
		}
	})

	t.Run("an enqueue under a taken id that is another message is IdempotencyConflict", func(t *testing.T) {
		taken := &orreryv1.Lane{Namespace: namespace, Queue: "compared", Key: lane.GetKey()} // routes with lane
		put := func(payloadJSON string) *orreryv1.CommandRequest {
			return &orreryv1.CommandRequest{Principal: client.DefaultPrincipal, Batch: &orreryv1.Batch{
				CommandId: client.NewID(),
				Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: taken, Id: "taken", PayloadJson: payloadJSON}}}},
			}}
		}
		if r, _, err := command(put(`{"n":1}`)); err != nil || !r.GetResults()[0].GetEnqueue().GetCreated() {
			t.Fatalf("enqueue: %v %v", r, err)
		}
		r, _, err := command(put(`{"n":2}`))
		if err != nil {
			t.Fatal(err)
		}
		if e := orrery.FromProto(r.GetResults()[0].GetError()); !errors.Is(e, client.ErrMessageConflict) || !strings.Contains(e.Error(), "payload_json") {
			t.Fatalf("another payload under the id: %v, want ErrMessageConflict naming payload_json", r)
		}
		if r, _, err := command(put(`{"n":1}`)); err != nil || r.GetResults()[0].GetError() != nil || r.GetResults()[0].GetEnqueue().GetCreated() {
			t.Fatalf("the same message again: %v %v, want created=false", r, err)
		}
	})

	t.Run("an enqueue whose unique key the lane holds is a duplicate", func(t *testing.T) {
		unique := &orreryv1.Lane{Namespace: namespace, Queue: "unique", Key: lane.GetKey()} // routes with lane
		put := func(id string) *orreryv1.EnqueueResult {
			t.Helper()
			r, _, err := command(&orreryv1.CommandRequest{Principal: client.DefaultPrincipal, Batch: &orreryv1.Batch{
				CommandId: client.NewID(),
				Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: unique, Id: id, PayloadJson: `1`, Unique: client.Unique("k", 0)}}}},
			}})
			if err != nil || r.GetResults()[0].GetError() != nil {
				t.Fatalf("enqueue %s: %v %v", id, r, err)
			}
			return r.GetResults()[0].GetEnqueue()
		}
		if r := put("holder"); !r.GetCreated() || r.GetDuplicateOf() != "" {
			t.Fatalf("first enqueue under the key: %v", r)
		}
		if r := put("second"); r.GetCreated() || r.GetDuplicateOf() != "holder" {
			t.Fatalf("second enqueue under the key: %v, want a duplicate of holder", r)
		}
	})

	t.Run("a receive leases the higher priority first", func(t *testing.T) {
		prioritized := &orreryv1.Lane{Namespace: namespace, Queue: "prioritized", Key: lane.GetKey()} // routes with lane
		put := func(id string, priority int32) *orreryv1.Mutation {
			return &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: prioritized, Id: id, PayloadJson: `{}`, Priority: priority}}}
		}
		if r, _, err := command(&orreryv1.CommandRequest{Principal: client.DefaultPrincipal, Batch: &orreryv1.Batch{
			CommandId: client.NewID(), Mutations: []*orreryv1.Mutation{put("low", 0), put("high", 9), put("middle", 4)},
		}}); err != nil || r.GetResults()[0].GetError() != nil || r.GetResults()[1].GetError() != nil {
			t.Fatalf("enqueue: %v %v", r, err)
		}
		r, _, err := command(&orreryv1.CommandRequest{Principal: client.DefaultPrincipal, Batch: &orreryv1.Batch{
			CommandId: client.NewID(),
			Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: namespace, Queue: "prioritized", Max: 10}}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range r.GetResults()[0].GetReceive().GetMessages() {
			got = append(got, fmt.Sprintf("%s:%d", m.GetId(), m.GetPriority()))
		}
		if strings.Join(got, " ") != "high:9 middle:4 low:0" {
			t.Fatalf("leased %v, want high:9 middle:4 low:0", got)
		}
	})

	appliedIndex := func() uint64 {
		t.Helper()
		reply, err := tr.Inspect(ctx, p, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Partition{Partition: &orreryv1.InspectPartition{}}})
		if err != nil || reply.GetError() != nil {
			t.Fatalf("partition status: %v %v", reply, err)
		}
		return reply.GetPartition().GetAppliedIndex()
	}

	t.Run("long poll leases on enqueue", func(t *testing.T) {
		if _, _, err := command(receive(0)); err != nil { // lease what the replay test left
			t.Fatalf("receive: %v", err)
		}
		timer := time.AfterFunc(100*time.Millisecond, func() {
			if _, err := tr.Command(ctx, p, enqueue("woken")); err != nil {
				t.Errorf("enqueue: %v", err)
			}
		})
		defer timer.Stop()
		start := time.Now()
		waiting := receive(10 * time.Second)
		receipt, raw, err := command(waiting)
		elapsed := time.Since(start)
		if err != nil {
			t.Fatalf("waiting receive: %v", err)
		}
		msgs := receipt.GetResults()[0].GetReceive().GetMessages()
		if len(msgs) != 1 || msgs[0].GetId() != "woken" || msgs[0].GetDeliveryCount() != 1 || elapsed < 50*time.Millisecond || elapsed > 5*time.Second {
			t.Fatalf("waiting receive leased %v after %s, want the enqueued message just after 100ms", msgs, elapsed)
		}
		start = time.Now()
		_, again, err := command(waiting) // its command id has a receipt: replayed at once
		if err != nil || !bytes.Equal(again, raw) || time.Since(start) > 5*time.Second {
			t.Fatalf("waiting receive of an answered command: %v after %s, byte-identical %v", err, time.Since(start), bytes.Equal(again, raw))
		}
	})

	t.Run("an abandoned long poll leases nothing", func(t *testing.T) {
		waiting := receive(10 * time.Second)
		short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err := tr.Command(short, p, waiting)
		cancelShort()
		if err == nil {
			t.Fatal("receive outlived its context without error")
		}
		abandon := proto.CloneOf(waiting)
		abandon.WaitMicros, abandon.Abandon = 0, true
		reply, err := tr.Command(ctx, p, abandon)
		if err != nil || reply.GetError() != nil || len(reply.GetReceipt()) != 0 {
			t.Fatalf("abandon of a parked receive: %v %v, want neither receipt nor error", reply, err)
		}
		applied := appliedIndex()
		if _, _, err := command(enqueue("after-abandon")); err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		if got := appliedIndex(); got != applied+1 {
			t.Fatalf("the applied index moved from %d to %d, want the enqueue only", applied, got)
		}
		start := time.Now()
		late, err := tr.Command(ctx, p, waiting) // a late copy of the abandoned request
		if err != nil || late.GetError() != nil || len(late.GetReceipt()) != 0 || time.Since(start) > 5*time.Second {
			t.Fatalf("a late copy of an abandoned receive: %v %v after %s, want nothing at once", late, err, time.Since(start))
		}
		leased, _, err := command(receive(0))
		if msgs := leased.GetResults()[0].GetReceive().GetMessages(); err != nil || len(msgs) != 1 || msgs[0].GetId() != "after-abandon" || msgs[0].GetDeliveryCount() != 1 {
			t.Fatalf("receive after the abandon: %v %v, want the message's first delivery", leased, err)
		}
		answered := receive(0)
		_, raw, err := command(answered) // nothing visible: an empty receipt
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		answered.Abandon = true
		reply, err = tr.Command(ctx, p, answered)
		if err != nil || !bytes.Equal(reply.GetReceipt(), raw) {
			t.Fatalf("abandon of an applied receive: %v %v, want its receipt", reply, err)
		}
	})

	t.Run("long poll times out without writing", func(t *testing.T) {
		applied := appliedIndex()
		start := time.Now()
		reply, err := tr.Command(ctx, p, receive(200*time.Millisecond))
		if err != nil || reply.GetError() != nil || len(reply.GetReceipt()) != 0 || time.Since(start) < 150*time.Millisecond {
			t.Fatalf("idle receive: %v %v after %s, want neither receipt nor error after the wait", reply, err, time.Since(start))
		}
		if got := appliedIndex(); got != applied {
			t.Fatalf("an idle receive moved the applied index from %d to %d", applied, got)
		}
	})

	t.Run("cancel ends a waiting receive", func(t *testing.T) {
		short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancelShort()
		start := time.Now()
		waiting := receive(10 * time.Second)
		if _, err := tr.Command(short, p, waiting); err == nil {
			t.Fatal("receive outlived its context without error")
		}
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Fatalf("cancelled receive returned after %s", elapsed)
		}
		waiting.WaitMicros, waiting.Abandon = 0, true // leave nothing parked for the next tests
		if reply, err := tr.Command(ctx, p, waiting); err != nil || reply.GetError() != nil {
			t.Fatalf("abandon: %v %v", reply, err)
		}
	})

	t.Run("inspect", func(t *testing.T) {
		reply, err := tr.Inspect(ctx, p, &orreryv1.InspectRequest{Principal: client.DefaultPrincipal, Target: &orreryv1.InspectRequest_Lane{Lane: &orreryv1.InspectLane{Lane: lane, MaxMessages: 10}}})
		if err != nil || reply.GetError() != nil || len(reply.GetMessages()) != 3 {
			t.Fatalf("inspect lane: %v %v, want the three enqueued messages", reply, err)
		}
		reply, err = tr.Inspect(ctx, p, &orreryv1.InspectRequest{Principal: client.DefaultPrincipal, Target: &orreryv1.InspectRequest_Schedule{Schedule: &orreryv1.InspectSchedule{Lane: lane, ScheduleId: client.NewID()}}})
		if err != nil || reply.GetError() != nil || reply.GetFound() {
			t.Fatalf("inspect absent schedule: %v %v, want found=false", reply, err)
		}
		reply, err = tr.Inspect(ctx, p, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Partition{Partition: &orreryv1.InspectPartition{}}})
		if err != nil || reply.GetPartition().GetPartition() != int32(p) || reply.GetPartition().GetLoggedTimeUnixMicros() == 0 {
			t.Fatalf("partition status: %v %v", reply, err)
		}
	})

	c := client.New(tr, client.Options{Retry: client.RetryPolicy{Initial: 10 * time.Millisecond, Max: 200 * time.Millisecond}})
	inLane := func(queue string) *orreryv1.Lane {
		return &orreryv1.Lane{Namespace: namespace, Queue: queue, Key: lane.GetKey()}
	}

	t.Run("a misrouted mutation fails Validation on its lane", func(t *testing.T) {
		if partitions < 2 {
			t.Skip("one partition: no lane is misrouted")
		}
		other := lane
		for i := 0; route.Partition(other, partitions) == p; i++ {
			other = &orreryv1.Lane{Namespace: namespace, Queue: "jobs", Key: fmt.Sprintf("elsewhere-%d", i)}
		}
		req := enqueue("misrouted")
		req.Batch.Mutations[0].GetEnqueue().Lane = other
		receipt, _, err := command(req)
		if err != nil || len(receipt.GetResults()) != 1 {
			t.Fatalf("misrouted enqueue: %v %v, want a receipt with its result", receipt, err)
		}
		e := orrery.AsError(orrery.FromProto(receipt.GetResults()[0].GetError()))
		if e == nil || e.Code != orrery.CodeValidation || !strings.HasSuffix(e.Field, "lane") {
			t.Fatalf("misrouted enqueue's result %v, want Validation on its lane", receipt.GetResults()[0])
		}
	})

	t.Run("schedule, ledger and schedule list", func(t *testing.T) {
		l := inLane("schedules")
		id := client.NewID()
		def := &orreryv1.ScheduleDefinition{Lane: l, ScheduleId: id,
			Spec:     &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_At{At: &orreryv1.AtSpec{DueAtUnixMicros: time.Now().Add(time.Hour).UnixMicro()}}},
			Template: &orreryv1.MessageTemplate{PayloadJson: `{}`}}
		if _, err := c.ConfigureSchedule(ctx, def, 0); err != nil {
			t.Fatalf("configure: %v", err)
		}
		triggered, err := c.TriggerSchedule(ctx, &orreryv1.TriggerSchedule{Lane: l, ScheduleId: id})
		if err != nil || len(triggered.GetEnqueuedIds()) != 1 {
			t.Fatalf("trigger: %v %v", triggered, err)
		}
		rec, err := c.InspectSchedule(ctx, l, id)
		if err != nil || rec.GetDefinition().GetScheduleId() != id || rec.GetRevision() != triggered.GetRevision() {
			t.Fatalf("inspect schedule: %v %v, want revision %d", rec, err, triggered.GetRevision())
		}
		in, err := c.ScheduleInspection(ctx, l, id)
		if err != nil || in.GetRecord().GetRevision() != triggered.GetRevision() || len(in.GetNextFireTimesUnixMicros()) != 1 {
			t.Fatalf("schedule inspection: %v %v, want the record and its one fire time", in, err)
		}
		if _, err := c.InspectSchedule(ctx, l, client.NewID()); orrery.CodeOf(err) != orrery.CodeNotFound {
			t.Fatalf("inspect an absent schedule: %v, want NotFound", err)
		}
		reply, err := tr.Inspect(ctx, p, &orreryv1.InspectRequest{Principal: client.DefaultPrincipal, Target: &orreryv1.InspectRequest_Schedule{Schedule: &orreryv1.InspectSchedule{Lane: l, ScheduleId: client.NewID()}}})
		if err != nil || reply.GetError() != nil || reply.GetFound() {
			t.Fatalf("inspect an absent schedule: %v %v, want found=false", reply, err)
		}
		ledger, next, err := c.ReadLedger(ctx, l, id, client.LedgerQuery{})
		if err != nil || next != nil || len(ledger) != 1 || ledger[0].GetOutcome() != orreryv1.LedgerOutcome_LEDGER_OUTCOME_MANUAL {
			t.Fatalf("ledger: %v (continuation %v) %v, want the one manual occurrence", ledger, next, err)
		}
		listed, next, err := c.ListSchedules(ctx, client.ListSchedulesRequest{Namespace: namespace})
		if err != nil || next != nil || len(listed) != 1 || listed[0].Record.GetDefinition().GetScheduleId() != id || listed[0].Partition != p {
			t.Fatalf("list schedules: %v (continuation %v) %v, want the one schedule on partition %d", listed, next, err, p)
		}
	})

	t.Run("saga and saga list", func(t *testing.T) {
		l := inLane("sagas")
		id := client.NewID()
		created, err := c.CompareExchangeSaga(ctx, &orreryv1.CompareExchangeSaga{Lane: l, SagaId: id, Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING, StateJson: `{"step":1}`})
		if err != nil || created.GetRevision() != 1 {
			t.Fatalf("create saga: %v %v", created, err)
		}
		rec, err := c.InspectSaga(ctx, l, id)
		if err != nil || rec.GetRevision() != 1 || rec.GetStateJson() != `{"step":1}` {
			t.Fatalf("inspect saga: %v %v", rec, err)
		}
		if _, err := c.InspectSaga(ctx, l, client.NewID()); orrery.CodeOf(err) != orrery.CodeNotFound {
			t.Fatalf("inspect an absent saga: %v, want NotFound", err)
		}
		listed, next, err := c.ListSagas(ctx, client.ListSagasRequest{Namespace: namespace})
		if err != nil || next != nil || len(listed) != 1 || listed[0].Record.GetSagaId() != id || listed[0].Partition != p {
			t.Fatalf("list sagas: %v (continuation %v) %v, want the one saga on partition %d", listed, next, err, p)
		}
	})

	t.Run("queue stats and queue list", func(t *testing.T) {
		l := inLane("stats")
		for _, m := range []*orreryv1.Enqueue{
			{Lane: l, Id: "now", PayloadJson: `{}`},
			{Lane: l, Id: "later", PayloadJson: `{}`, DelayMicros: time.Hour.Microseconds()},
		} {
			if _, err := c.Enqueue(ctx, m); err != nil {
				t.Fatalf("enqueue %s: %v", m.GetId(), err)
			}
		}
		one, err := c.QueueStats(ctx, namespace, "stats", l.GetKey())
		if err != nil || len(one) != 1 || one[0].Partition != p {
			t.Fatalf("lane stats: %v %v, want partition %d's", one, err, p)
		}
		if s := one[0].Stats; s.GetVisible() != 1 || s.GetDelayed() != 1 || s.GetLeased() != 0 || s.GetLaneMessages() != 2 || s.GetLoggedTimeUnixMicros() == 0 {
			t.Fatalf("lane stats %v, want 1 visible and 1 delayed of 2 lane messages", s)
		}
		every, err := c.QueueStats(ctx, namespace, "stats", "")
		if err != nil || len(every) != partitions {
			t.Fatalf("queue stats: %v %v, want one per partition", every, err)
		}
		var visible, delayed uint64
		for i, s := range every {
			if s.Partition != i {
				t.Fatalf("queue stats %d are partition %d's", i, s.Partition)
			}
			visible, delayed = visible+s.Stats.GetVisible(), delayed+s.Stats.GetDelayed()
		}
		if visible != 1 || delayed != 1 {
			t.Fatalf("queue stats sum to %d visible and %d delayed, want 1 and 1", visible, delayed)
		}
		queues, more, err := c.ListQueueStats(ctx, p, 1000)
		if err != nil {
			t.Fatalf("list queues: %v", err)
		}
		var found *orreryv1.QueueStats
		for _, q := range queues {
			if q.GetNamespace() == namespace && q.GetQueue() == "stats" {
				found = q
			}
		}
		if found == nil && !more {
			t.Fatalf("list queues of partition %d: %v, without %s/stats", p, queues, namespace)
		}
		if found != nil && (found.GetVisible() != 1 || found.GetDelayed() != 1) {
			t.Fatalf("listed queue %v, want 1 visible and 1 delayed", found)
		}
	})

	t.Run("a paused queue's long poll waits for the resume; a cancel revokes a lease", func(t *testing.T) {
		paused := &orreryv1.Lane{Namespace: namespace, Queue: "paused", Key: lane.GetKey()} // routes with lane
		one := func(m *orreryv1.Mutation) *orreryv1.CommandRequest {
			return &orreryv1.CommandRequest{Principal: client.DefaultPrincipal, Batch: &orreryv1.Batch{CommandId: client.NewID(), Mutations: []*orreryv1.Mutation{m}}}
		}
		pause := one(&orreryv1.Mutation{Kind: &orreryv1.Mutation_PauseQueue{PauseQueue: &orreryv1.PauseQueue{Namespace: namespace, Queue: "paused"}}})
		if r, _, err := command(pause); err != nil || !r.GetResults()[0].GetQueuePause().GetChanged() {
			t.Fatalf("pause: %v %v", r, err)
		}
		if _, _, err := command(one(&orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: paused, Id: "x", PayloadJson: `{}`}}})); err != nil {
			t.Fatalf("enqueue into the paused queue: %v", err)
		}
		timer := time.AfterFunc(300*time.Millisecond, func() {
			resume := one(&orreryv1.Mutation{Kind: &orreryv1.Mutation_ResumeQueue{ResumeQueue: &orreryv1.ResumeQueue{Namespace: namespace, Queue: "paused"}}})
			if _, err := tr.Command(ctx, p, resume); err != nil {
				t.Errorf("resume: %v", err)
			}
		})
		defer timer.Stop()
		start := time.Now()
		waiting := one(&orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: namespace, Queue: "paused", Max: 10}}})
		waiting.WaitMicros = (10 * time.Second).Microseconds()
		receipt, _, err := command(waiting)
		elapsed := time.Since(start)
		msgs := receipt.GetResults()[0].GetReceive().GetMessages()
		if err != nil || len(msgs) != 1 || msgs[0].GetId() != "x" || elapsed < 200*time.Millisecond || elapsed > 5*time.Second {
			t.Fatalf("long poll on the paused queue: %v (%v) after %s, want x just after the resume at 300ms", msgs, err, elapsed)
		}
		cancelX := one(&orreryv1.Mutation{Kind: &orreryv1.Mutation_CancelMessage{CancelMessage: &orreryv1.CancelMessage{Lane: paused, Id: "x"}}})
		if r, _, err := command(cancelX); err != nil || r.GetResults()[0].GetCancelMessage().GetOutcome() != orreryv1.CancelOutcome_CANCEL_OUTCOME_LEASE_REVOKED {
			t.Fatalf("cancel of the leased message: %v %v", r, err)
		}
		ack := one(&orreryv1.Mutation{Kind: &orreryv1.Mutation_Ack{Ack: &orreryv1.Ack{Lane: paused, Id: "x", LeaseToken: msgs[0].GetLease().GetToken()}}})
		if r, _, err := command(ack); err != nil || orrery.CodeOf(orrery.FromProto(r.GetResults()[0].GetError())) != orrery.CodeTokenInvalidated {
			t.Fatalf("ack of the cancelled message: %v %v, want TokenInvalidated", r, err)
		}
	})

	t.Run("a failed release backs off by its queue's retry policy; its last attempt dead-letters it", func(t *testing.T) {
		retrying := &orreryv1.Lane{Namespace: namespace, Queue: "retrying", Key: lane.GetKey()} // routes with lane
		one := func(m *orreryv1.Mutation) *orreryv1.MutationResult {
			t.Helper()
			r, _, err := command(&orreryv1.CommandRequest{Principal: client.DefaultPrincipal, Batch: &orreryv1.Batch{CommandId: client.NewID(), Mutations: []*orreryv1.Mutation{m}}})
			if err != nil || r.GetResults()[0].GetError() != nil {
				t.Fatalf("%v: %v %v", m, r, err)
			}
			return r.GetResults()[0]
		}
		policy := &orreryv1.RetryPolicy{MaxAttempts: 2, InitialBackoffMicros: time.Hour.Microseconds(), MaxBackoffMicros: time.Hour.Microseconds()}
		set := one(&orreryv1.Mutation{Kind: &orreryv1.Mutation_SetQueueRetryPolicy{SetQueueRetryPolicy: &orreryv1.SetQueueRetryPolicy{Namespace: namespace, Queue: "retrying", Policy: policy}}})
		if !set.GetQueueRetryPolicy().GetChanged() || set.GetQueueRetryPolicy().GetRetry().GetSetBy() != client.DefaultPrincipal {
			t.Fatalf("set retry policy: %v", set)
		}
		one(&orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: retrying, Id: "r1", PayloadJson: `{}`}}})
		one(&orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: retrying, Id: "r2", PayloadJson: `{}`,
			Retry: &orreryv1.RetryPolicy{MaxAttempts: 1}}}})
		got := one(&orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: namespace, Queue: "retrying", Max: 10}}}).GetReceive().GetMessages()
		if len(got) != 2 {
			t.Fatalf("received %v, want r1 and r2", got)
		}
		for _, m := range got {
			one(&orreryv1.Mutation{Kind: &orreryv1.Mutation_Release{Release: &orreryv1.Release{Lane: retrying, Id: m.GetId(), LeaseToken: m.GetLease().GetToken(),
				Error: "boom " + m.GetId(), Backoff: true}}})
		}
		msgs, _, err := c.InspectLane(ctx, retrying, "", 10)
		if err != nil || len(msgs) != 1 || msgs[0].GetId() != "r1" || msgs[0].GetLastError() != "boom r1" || msgs[0].GetDeliveryCount() != 1 ||
			msgs[0].GetVisibleAtUnixMicros() != msgs[0].GetLastFailedAtUnixMicros()+time.Hour.Microseconds() {
			t.Fatalf("the lane after the failures: %v (%v), want r1 alone, its error kept, visible an hour after it failed", msgs, err)
		}
		dead, _, err := c.InspectLane(ctx, &orreryv1.Lane{Namespace: namespace, Queue: "retrying$dlq", Key: lane.GetKey()}, "", 10)
		if err != nil || len(dead) != 1 || dead[0].GetId() != "r2" || dead[0].GetLastError() != "boom r2" {
			t.Fatalf("the dead-letter lane: %v (%v), want r2 with its last error", dead, err)
		}
	})

	t.Run("a capped queue leases at most its share; its long poll waits for an ack", func(t *testing.T) {
		capped := &orreryv1.Lane{Namespace: namespace, Queue: "capped", Key: lane.GetKey()} // routes with lane
		one := func(m *orreryv1.Mutation) *orreryv1.CommandRequest {
			return &orreryv1.CommandRequest{Principal: client.DefaultPrincipal, Batch: &orreryv1.Batch{CommandId: client.NewID(), Mutations: []*orreryv1.Mutation{m}}}
		}
		share := one(&orreryv1.Mutation{Kind: &orreryv1.Mutation_SetQueueShare{SetQueueShare: &orreryv1.SetQueueShare{
			Namespace: namespace, Queue: "capped", Policy: &orreryv1.QueueLimits{MaxLeased: 1}, ShareLeased: 1}}})
		if r, _, err := command(share); err != nil || r.GetResults()[0].GetQueueShare().GetShare().GetShareLeased() != 1 {
			t.Fatalf("set share: %v %v", r, err)
		}
		for _, id := range []string{"x", "y"} {
			if _, _, err := command(one(&orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: capped, Id: id, PayloadJson: `{}`}}})); err != nil {
				t.Fatal(err)
			}
		}
		receiveCapped := func(wait time.Duration) []*orreryv1.QueueMessage {
			t.Helper()
			req := one(&orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: namespace, Queue: "capped", Max: 10}}})
			req.WaitMicros = wait.Microseconds()
			receipt, _, err := command(req)
			if err != nil {
				t.Fatal(err)
			}
			return receipt.GetResults()[0].GetReceive().GetMessages()
		}
		held := receiveCapped(0)
		if len(held) != 1 {
			t.Fatalf("a share of 1 leased %d", len(held))
		}
		if got := receiveCapped(0); len(got) != 0 {
			t.Fatalf("at the share a receive leased %d", len(got))
		}
		ack := one(&orreryv1.Mutation{Kind: &orreryv1.Mutation_Ack{Ack: &orreryv1.Ack{Lane: capped, Id: held[0].GetId(), LeaseToken: held[0].GetLease().GetToken()}}})
		timer := time.AfterFunc(300*time.Millisecond, func() {
			if _, err := tr.Command(ctx, p, ack); err != nil {
				t.Errorf("ack: %v", err)
			}
		})
		defer timer.Stop()
		if got := receiveCapped(10 * time.Second); len(got) != 1 || got[0].GetId() == held[0].GetId() {
			t.Fatalf("the long poll at the share: %v, want the other message once the held one is acked", got)
		}
	})

	t.Run("audit log", func(t *testing.T) {
		denied := client.New(tr, client.Options{Principal: "conformance-denied-" + client.NewID()[:8]})
		var receipt client.Receipt
		_, err := denied.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "denied", PayloadJson: `{}`}, client.WithReceipt(&receipt))
		if orrery.CodeOf(err) != orrery.CodeUnauthorized || receipt.Receipt == nil {
			t.Fatalf("enqueue without a grant: %v (receipt %v), want Unauthorized", err, receipt.Receipt)
		}
		q := client.AuditQuery{From: time.UnixMicro(receipt.GetLoggedTimeUnixMicros()), MaxRecords: client.MaxListMax}
		for page := 0; ; page++ {
			entries, next, err := c.ReadAudit(ctx, q)
			if err != nil {
				t.Fatalf("read audit: %v", err)
			}
			for _, e := range entries {
				r := e.Record
				if r.GetCommandId() == receipt.GetCommandId() && r.GetPrincipal() == denied.Principal() {
					if e.Partition != p || r.GetKind() != orreryv1.AuditKind_AUDIT_KIND_DENIED || r.GetNamespace() != namespace || r.GetMutation() != "enqueue" {
						t.Fatalf("audit record of the denial %v on partition %d", r, e.Partition)
					}
					return
				}
			}
			if next == nil || page == 20 {
				t.Fatalf("the audit log from %v holds no record of command %s", q.From, receipt.GetCommandId())
			}
			q.After = next
		}
	})

	t.Run("partition status", func(t *testing.T) {
		status, err := c.PartitionStatus(ctx, p)
		if err != nil {
			t.Fatalf("partition status: %v", err)
		}
		if status.GetPartition() != int32(p) || status.GetPartitions() != int32(partitions) || status.GetActivationEpoch() == 0 ||
			status.GetAppliedIndex() == 0 || status.GetLoggedTimeUnixMicros() == 0 || status.GetEnqueuedTotal() < 4 || status.GetSilo() == "" ||
			status.GetCommandLimits().GetMaxMutationsPerBatch() == 0 || status.GetCommandLimits().GetMaxMessageBytes() == 0 {
			t.Fatalf("partition status %v of partition %d of %d", status, p, partitions)
		}
	})
}
