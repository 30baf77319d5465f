package partition

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

const sagaID = "5f0c2b1e-7d4a-4c3b-9a8e-1f2d3c4b5a69"

func withOwnEmission(c *Config) { c.OwnEmission = true }

// loggedCommand is one command entry of the partition's Raft log.
type loggedCommand struct {
	principal string
	cmd       *orreryv1.PartitionCommand
}

// logged reads every command entry of the harness partition's Raft log.
func (h *harness) logged() []loggedCommand {
	h.t.Helper()
	storage, err := h.cfg.Host.store.RaftLog().Storage(1)
	if err != nil {
		h.t.Fatal(err)
	}
	first, _ := storage.FirstIndex()
	last, _ := storage.LastIndex()
	ents, err := storage.Entries(first, last+1, math.MaxUint64)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []loggedCommand
	for _, e := range ents {
		if len(e.GetData()) == 0 {
			continue
		}
		pe := &orreryv1.PartitionEntry{}
		cmd := &orreryv1.PartitionCommand{}
		if err := proto.Unmarshal(e.GetData(), pe); err != nil {
			h.t.Fatal(err)
		}
		if err := proto.Unmarshal(pe.GetCommand(), cmd); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, loggedCommand{principal: pe.GetPrincipal(), cmd: cmd})
	}
	return out
}

// receiveAll long-polls the test queue until it has received want messages, failing after a
// generous bound.
func (h *harness) receiveAll(want int) []*orreryv1.QueueMessage {
	h.t.Helper()
	var got []*orreryv1.QueueMessage
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; len(got) < want; i++ {
		if time.Now().After(deadline) {
			h.t.Fatalf("received %d messages, want %d", len(got), want)
		}
		got = append(got, h.longPoll(fmt.Sprint("recv-", i), 2*time.Second, receive(10))...)
	}
	return got
}

// TestOwnEmissionEmitsAtTheDueInstant: with OwnEmission a partition emits a schedule's
// occurrences and expires a saga at their due instants with nobody scanning it or sending it
// commands: no next-due notice goes out, the log holds its own batches, and they store no
// inbox entry.
func TestOwnEmissionEmitsAtTheDueInstant(t *testing.T) {
	h := newHarness(t, withOwnEmission)
	first := time.Now().Add(300 * time.Millisecond)
	if r := receipt(t, h.do(command("configure", 0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
		Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: scheduleID, Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{
			Every: &orreryv1.EverySpec{IntervalMicros: input.Second, FirstDueAtUnixMicros: first.UnixMicro()}}}}}}}))); r.GetResults()[0].GetError() != nil {
		t.Fatalf("configure: %v", r)
	}
	deadline := time.Now().Add(500 * time.Millisecond)
	if r := receipt(t, h.do(command("saga", 0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_CompareExchangeSaga{CompareExchangeSaga: &orreryv1.CompareExchangeSaga{
		Lane: lane, SagaId: sagaID, Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING, StateJson: `{}`, DeadlineUnixMicros: deadline.UnixMicro(),
		Timeout: &orreryv1.SagaTimeout{Queue: lane.GetQueue(), Template: &orreryv1.MessageTemplate{PayloadJson: `"late"`}},
	}}}))); r.GetResults()[0].GetError() != nil {
		t.Fatalf("saga: %v", r)
	}

	msgs := h.receiveAll(4)
	occurrences, timeouts := 0, 0
	for _, m := range msgs {
		switch {
		case m.GetOccurrence() != nil:
			due := m.GetOccurrence().GetNominalDueAtUnixMicros()
			if m.GetEnqueuedAtUnixMicros() < due {
				t.Fatalf("occurrence %s enqueued at %d, before its due instant %d", m.GetId(), m.GetEnqueuedAtUnixMicros(), due)
			}
			occurrences++
		case m.GetSagaTimeout() != nil:
			if m.GetEnqueuedAtUnixMicros() < deadline.UnixMicro() {
				t.Fatalf("timeout enqueued at %d, before the deadline %d", m.GetEnqueuedAtUnixMicros(), deadline.UnixMicro())
			}
			timeouts++
		}
	}
	if timeouts != 1 || occurrences < 3 {
		t.Fatalf("received %d occurrences and %d timeouts, want at least 3 and 1", occurrences, timeouts)
	}
	h.mu.Lock()
	notices := len(h.due)
	h.mu.Unlock()
	if notices != 0 {
		t.Fatalf("%d next-due notices with OwnEmission, want none", notices)
	}

	h.system.Root.StopFuture(h.pid).Wait()
	own := 0
	for _, e := range h.logged() {
		if e.cmd.GetOwn() {
			if e.principal != OwnDuePrincipal {
				t.Errorf("own entry of principal %q", e.principal)
			}
			own++
		}
	}
	if own < 2 {
		t.Fatalf("%d own batches in the log, want the emits and the expiry", own)
	}
	if err := h.cfg.Host.machines[1].state.View(func(r kv.Reader) error {
		return kv.ScanPrefix(r, keys.InboxKey(OwnDuePrincipal, ""), func(key, _ []byte) (bool, error) {
			t.Errorf("inbox entry %q for an own batch", key)
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
}

// TestOwnEmissionBacksOffARefThatFails: a schedule whose emit keeps failing (its first
// occurrence expired before it could be emitted) fails alone, the other schedule's occurrences
// keep coming, and it is tried again only after its backoff, not in every own batch the
// partition proposes.
func TestOwnEmissionBacksOffARefThatFails(t *testing.T) {
	h := newHarness(t, withOwnEmission)
	other := &orreryv1.Lane{Namespace: lane.GetNamespace(), Queue: "other", Key: lane.GetKey()} // same partition
	const stuck = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	every := func(l *orreryv1.Lane, id string, first time.Time, ttl int64) *orreryv1.Mutation {
		return &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
			Definition: &orreryv1.ScheduleDefinition{Lane: l, ScheduleId: id, Template: &orreryv1.MessageTemplate{TimeToLiveMicros: ttl},
				Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{
					Every: &orreryv1.EverySpec{IntervalMicros: input.Second, FirstDueAtUnixMicros: first.UnixMicro()}}}}}}}
	}
	// The stuck schedule's first occurrence, due 10 s ago, lived 1 s: its emit fails Expired,
	// every time (the misfire policy does not skip it).
	r := receipt(t, h.do(command("configure", 0, every(other, stuck, time.Now().Add(-10*time.Second), input.Second),
		every(lane, scheduleID, time.Now().Add(200*time.Millisecond), 0))))
	for _, res := range r.GetResults() {
		if res.GetError() != nil {
			t.Fatalf("configure: %v", r)
		}
	}
	started := time.Now()
	if msgs := h.receiveAll(3); len(msgs) < 3 {
		t.Fatalf("received %v", msgs)
	}
	elapsed := time.Since(started)

	h.system.Root.StopFuture(h.pid).Wait()
	attempts := 0
	for _, e := range h.logged() {
		for _, m := range e.cmd.GetBatch().GetMutations() {
			if e.cmd.GetOwn() && m.GetEmitOccurrences().GetScheduleId() == stuck {
				attempts++
			}
		}
	}
	// Backoff of 1 s, then 2 s, ...: tries at about 0, 1 and 3 s.
	if attempts < 1 || attempts > 2+int(elapsed/time.Second) {
		t.Fatalf("the stuck schedule was tried %d times in %v", attempts, elapsed.Round(time.Millisecond))
	}
	t.Logf("the stuck schedule was tried %d times in %v", attempts, elapsed.Round(time.Millisecond))
}

// TestOwnEmissionDrainsALargePayloadBacklogWithinTheTransactionLimit: four schedules with
// 200 KiB templates and ten occurrences due each are emitted by the partition itself, every
// occurrence once, without a batch ever exceeding the transaction limit (which would put the
// refs on backoff).
func TestOwnEmissionDrainsALargePayloadBacklogWithinTheTransactionLimit(t *testing.T) {
	h := newHarness(t, withOwnEmission)
	payload := `"` + strings.Repeat("x", 200<<10) + `"`
	first := time.Now().Add(-9500 * time.Millisecond) // ten due now, the next in 0.5 s
	for i := range 4 {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012x", i)
		r := receipt(t, h.do(command(fmt.Sprint("configure-", i), 0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
			Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: id, Template: &orreryv1.MessageTemplate{PayloadJson: payload},
				Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{IntervalMicros: input.Second,
					FirstDueAtUnixMicros: first.UnixMicro()}}}}}}})))
		if r.GetResults()[0].GetError() != nil {
			t.Fatalf("configure %d: %v", i, r)
		}
	}
	seen := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; len(seen) < 4*10; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("%d distinct occurrences after 30 s, want at least 40", len(seen))
		}
		// Receive one at a time: a receive's reply carries its payloads.
		for _, m := range h.longPoll(fmt.Sprint("recv-", i), 2*time.Second, receive(1)) {
			if seen[m.GetId()] {
				t.Fatalf("occurrence %s received twice", m.GetId())
			}
			seen[m.GetId()] = true
		}
	}
}

// TestOwnEmissionProposesTheNextBatchWhileOneIsInFlight: with more refs due than one own batch
// takes, the partition proposes a second batch of the refs the first left out while the first
// is still being logged: the second is logged before the first has applied (in the same round,
// or in the next one, before that round's applies), and every occurrence is emitted once.
func TestOwnEmissionProposesTheNextBatchWhileOneIsInFlight(t *testing.T) {
	var held *heldLog
	h := newHostHarness(t, func(cfg *HostConfig) { held = holdLog(cfg) }, withOwnEmission)
	held.passing.Store(true)
	t.Cleanup(held.free)
	const schedules = ownDueRefs + 44
	first := time.Now().Add(time.Second).Truncate(time.Second).Add(time.Second)
	for c := 0; c < schedules; c += 150 {
		var muts []*orreryv1.Mutation
		for i := c; i < min(c+150, schedules); i++ {
			muts = append(muts, &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
				Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: fmt.Sprintf("00000000-0000-4000-8000-%012x", i),
					Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{IntervalMicros: 3600 * input.Second,
						FirstDueAtUnixMicros: first.UnixMicro()}}}}}}})
		}
		receipt(t, h.do(command(fmt.Sprint("configure-", c), 0, muts...)))
	}
	held.passing.Store(false) // hold the rounds that log the own batches
	if n := held.waitEntered(t); n == 1 {
		held.release <- nil
		held.waitEntered(t) // the second batch's round, which also commits the first
		if msgs := h.lane(); len(msgs) != 0 {
			t.Fatalf("the second own batch was logged after the first applied (%d messages): not while it was in flight", len(msgs))
		}
	} else if n != 2 {
		t.Fatalf("the first held round logs %d command entries, want one or both own batches", n)
	}
	held.free()
	seen := map[string]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for len(seen) < schedules {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d occurrences after 20 s", len(seen), schedules)
		}
		for _, m := range h.lane() {
			seen[m.GetId()] = true
		}
		time.Sleep(10 * time.Millisecond)
	}
	if msgs := h.lane(); len(msgs) != schedules {
		t.Fatalf("%d messages for %d first occurrences", len(msgs), schedules)
	}
}
