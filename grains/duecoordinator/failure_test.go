package duecoordinator

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/duecoordinator/coordinatortest"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/schedule"
)

// commandIDs lists the command ids the twin applied to a partition, in order.
func (b *bench) commandIDs(partition int) []string {
	var ids []string
	for _, c := range b.twin.Calls() {
		if c.Kind == "command" && c.Partition == partition {
			ids = append(ids, c.CommandID)
		}
	}
	return ids
}

// TestStaleTokenIsIgnored: the schedule is replaced between the scan and the dispatch; the
// emit for the old generation fails TokenInvalidated, is counted as stale, and the new
// generation is emitted at its own due instants.
func TestStaleTokenIsIgnored(t *testing.T) {
	t.Parallel()
	b := setup(t, options{hints: true})
	b.apply(0, configure(lane("a"), scheduleID(1), every(t0.Add(time.Minute), time.Minute), 0))
	var once sync.Once
	b.twin.SetHooks(coordinatortest.Hooks{BeforeCommand: func(_ context.Context, partition int, _ *orreryv1.CommandRequest) error {
		once.Do(func() {
			replace := configure(lane("a"), scheduleID(1), every(t0.Add(5*time.Minute), time.Minute), 0)
			replace.GetConfigureSchedule().ExpectedRevision = 1
			b.apply(partition, replace)
		})
		return nil
	}})
	b.start(0)
	b.runUntil(t0.Add(6*time.Minute + time.Second))
	msgs := b.messages(0, lane("a"))
	ids := enqueuedAt(t, msgs)
	want := []string{schedule.OccurrenceID(scheduleID(1), 2, 0), schedule.OccurrenceID(scheduleID(1), 2, 1)}
	if len(ids) != len(want) {
		t.Fatalf("messages %v, want %v", ids, want)
	}
	for _, id := range want {
		if _, ok := ids[id]; !ok {
			t.Fatalf("messages %v, want %v", ids, want)
		}
	}
	checkOnTime(t, msgs)
	if s := b.c.Stats(); s.StaleIgnored != 1 || s.Errors != 0 {
		t.Fatalf("stats %+v, want one stale token and no error", s)
	}
}

// TestLostReplyIsRetriedWithTheSameCommandID: the partition applies the command but the reply
// is lost (Unavailable once); the coordinator retries with the same id, the retry applies
// again and its CAS tokens make it enqueue nothing, and exactly one set of messages exists.
func TestLostReplyIsRetriedWithTheSameCommandID(t *testing.T) {
	t.Parallel()
	b := setup(t, options{partitions: 2})
	b.apply(0, configure(lane("a"), scheduleID(1), every(t0.Add(time.Minute), time.Hour), 0),
		configure(lane("a"), scheduleID(2), at(t0.Add(time.Minute)), 0))
	var mu sync.Mutex
	var receipts [][]byte
	b.twin.SetHooks(coordinatortest.Hooks{AfterCommand: func(_ int, _ *orreryv1.CommandRequest, reply *orreryv1.CommandReply) error {
		mu.Lock()
		defer mu.Unlock()
		receipts = append(receipts, reply.GetReceipt())
		if len(receipts) == 1 {
			return orrery.Errorf(orrery.CodeUnavailable, "reply lost")
		}
		return nil
	}})
	b.start(0, 1)
	b.runUntil(t0.Add(2 * time.Minute))
	ids := b.commandIDs(0)
	if len(ids) != 2 || ids[0] != ids[1] || !strings.HasPrefix(ids[0], "silo-1-") {
		t.Fatalf("command ids %v, want the same id twice", ids)
	}
	if len(receipts) != 2 {
		t.Fatalf("%d receipts, want the lost one and the retry's", len(receipts))
	}
	msgs := b.messages(0, lane("a"))
	enqueuedAt(t, msgs)
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want 2", len(msgs))
	}
	if s := b.c.Stats(); s.Retries != 1 || s.CommandsSent != 2 || s.RefsDispatched != 2 || s.Errors != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestRequestTimeoutIsRetriedWithTheSameCommandID: the first attempt outlives the per-request
// timeout without being applied; the retry carries the same id.
func TestRequestTimeoutIsRetriedWithTheSameCommandID(t *testing.T) {
	t.Parallel()
	b := setup(t, options{cfg: func(c *Config) { c.RequestTimeout = 50 * time.Millisecond }})
	b.apply(0, configure(lane("a"), scheduleID(1), at(t0.Add(time.Minute)), 0))
	var mu sync.Mutex
	var attempts []string
	b.twin.SetHooks(coordinatortest.Hooks{BeforeCommand: func(ctx context.Context, _ int, req *orreryv1.CommandRequest) error {
		mu.Lock()
		attempts = append(attempts, req.GetBatch().GetCommandId())
		first := len(attempts) == 1
		mu.Unlock()
		if first {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}})
	b.start(0)
	b.runUntil(t0.Add(2 * time.Minute))
	if len(attempts) != 2 || attempts[0] != attempts[1] {
		t.Fatalf("attempts %v, want the same id twice", attempts)
	}
	if msgs := b.messages(0, lane("a")); len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
}

// TestGivesUpAfterOneRetryAndBacksOff: each command is tried twice with one id and then given
// up; the partition's two refs (one per round) are both in flight when it starts failing, and
// once they have failed it is tried again only after a backoff of at least 1 s, with fresh
// command ids, even though its scan said more refs were due (a failing partition is not
// requeued at once).
func TestGivesUpAfterOneRetryAndBacksOff(t *testing.T) {
	t.Parallel()
	b := setup(t, options{cfg: func(c *Config) { c.RefsPerRound = 1 }})
	b.apply(0, configure(lane("a"), scheduleID(1), at(t0.Add(time.Minute)), 0),
		configure(lane("a"), scheduleID(2), at(t0.Add(time.Minute)), 0))
	var mu sync.Mutex
	var attempts []string
	var times []time.Duration
	b.twin.SetHooks(coordinatortest.Hooks{BeforeCommand: func(_ context.Context, _ int, req *orreryv1.CommandRequest) error {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, req.GetBatch().GetCommandId())
		times = append(times, b.clock.Now().Sub(t0))
		if len(attempts) <= 4 {
			return orrery.Errorf(orrery.CodeUnavailable, "partition moving")
		}
		return nil
	}})
	b.start(0)
	b.runUntil(t0.Add(2 * time.Minute))
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 6 {
		t.Fatalf("attempts %v at %v: want 4 failing, then 2", attempts, times)
	}
	failed := map[string]int{}
	for _, id := range attempts[:4] {
		failed[id]++
	}
	for id, n := range failed {
		if n != 2 {
			t.Fatalf("attempts %v: command %s tried %d times, want twice", attempts, id, n)
		}
	}
	if len(failed) != 2 || failed[attempts[4]] != 0 || failed[attempts[5]] != 0 || attempts[4] == attempts[5] {
		t.Fatalf("attempts %v: want two commands tried twice each, then fresh ids", attempts)
	}
	m, s := time.Minute, time.Second
	for i, at := range times {
		if (i < 4 && at != m) || (i >= 4 && at < m+s) {
			t.Fatalf("attempts at %v: want the failing ones at 1m and the next after a backoff of at least 1s", times)
		}
	}
	if msgs := b.messages(0, lane("a")); len(msgs) != 2 {
		t.Fatalf("%d messages, want 2", len(msgs))
	}
	if s := b.c.Stats(); s.Retries != 2 || s.Errors == 0 || s.Partitions[0].ConsecutiveFailures != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestStuckRefDoesNotHotLoopOrStarve: five schedules whose lane is full stay due while it is.
// With two refs per round they fill the first pages of the due index; the coordinator backs
// them off, pages past them, emits the healthy schedules behind them on time, and sends the
// stuck ones only a bounded number of times.
func TestStuckRefDoesNotHotLoopOrStarve(t *testing.T) {
	t.Parallel()
	limits := input.DefaultLimits()
	limits.MaxLaneMessages = 100
	b := setup(t, options{limits: limits, hints: true, cfg: func(c *Config) { c.RefsPerRound = 2 }})
	fillLane(b, lane("stuck"), 100)
	for i := range 5 {
		b.apply(0, configure(lane("stuck"), scheduleID(i), every(t0.Add(-30*time.Minute), time.Hour), 0))
	}
	b.apply(0, configure(lane("ok"), scheduleID(10), at(t0), 0),
		configure(lane("ok"), scheduleID(11), every(t0.Add(10*time.Second), 20*time.Second), 0),
		configure(lane("ok"), scheduleID(12), at(t0.Add(5*time.Minute)), 0))
	b.start(0)
	b.runUntil(t0.Add(30 * time.Minute))

	msgs := b.messages(0, lane("ok"))
	enqueuedAt(t, msgs)
	checkOnTime(t, msgs)
	if want := 1 + 90 + 1; len(msgs) != want {
		t.Fatalf("%d healthy occurrences, want %d", len(msgs), want)
	}
	if got := len(b.messages(0, lane("stuck"))); got != 100 {
		t.Fatalf("%d messages in the full lane, want its 100 fillers", got)
	}
	sent := map[string]int{}
	for _, c := range b.twin.Calls() {
		for _, m := range c.Mutations {
			if e := m.GetEmitOccurrences(); e.GetLane().GetKey() == "stuck" {
				sent[e.GetScheduleId()]++
			}
		}
	}
	// Backoff 1 s doubling to 5 min: 14 attempts in 30 minutes.
	for i := range 5 {
		if n := sent[scheduleID(i)]; n < 5 || n > 16 {
			t.Errorf("stuck schedule %d sent %d times in 30 minutes", i, n)
		}
	}
	s := b.c.Stats()
	t.Logf("stats %+v", s)
	// 91 due instants and 14 retry instants, each a round plus at most one more for the hint
	// of its own commit (which names a stuck ref, so it is deferred by stuckHintDelay), plus
	// safety rescans; each round reads at most maxPagesPerRound pages.
	if s.Rounds > 2*(91+14)+60 || s.Scans > maxPagesPerRound*s.Rounds {
		t.Errorf("%d rounds and %d scans in 30 minutes", s.Rounds, s.Scans)
	}
	if s.RefsSkipped == 0 || s.Errors != 0 || s.Partitions[0].SkippedRefs != 5 {
		t.Errorf("stats %+v", s)
	}
}

// TestAFullLaneFailsOnlyItsOwnRef: in one due command, the emit into a full lane fails alone
// (QuotaExceeded) and goes on backoff, the other lane's occurrence is emitted on time by the
// same command, and the full lane's occurrence follows once there is room.
func TestAFullLaneFailsOnlyItsOwnRef(t *testing.T) {
	t.Parallel()
	limits := input.DefaultLimits()
	limits.MaxLaneMessages = 1
	b := setup(t, options{limits: limits, hints: true})
	full := lane("full")
	b.apply(0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: full, Id: "filler", PayloadJson: `{}`}}})
	b.apply(0, configure(full, scheduleID(1), at(t0.Add(10*time.Second)), 0),
		configure(lane("free"), scheduleID(2), at(t0.Add(10*time.Second)), 0))
	var mu sync.Mutex
	var first *orreryv1.CommandReply
	b.twin.SetHooks(coordinatortest.Hooks{AfterCommand: func(_ int, _ *orreryv1.CommandRequest, reply *orreryv1.CommandReply) error {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = reply
		}
		return nil
	}})
	b.start(0)
	b.runUntil(t0.Add(time.Minute))
	mu.Lock()
	rc := &orreryv1.Receipt{}
	if err := proto.Unmarshal(first.GetReceipt(), rc); err != nil || rc.GetError() != nil || len(rc.GetResults()) != 2 {
		t.Fatalf("the first command's receipt %v (%v): want one result per ref, not a rollback", rc, err)
	}
	codes := []orrery.Code{orrery.CodeOf(orrery.FromProto(rc.GetResults()[0].GetError())), orrery.CodeOf(orrery.FromProto(rc.GetResults()[1].GetError()))}
	mu.Unlock()
	if !slices.Contains(codes, orrery.CodeQuotaExceeded) || !slices.Contains(codes, orreryv1.ErrorCode_ERROR_CODE_UNSPECIFIED) {
		t.Fatalf("the first command's results %v: want the full lane's QuotaExceeded and the other's success", codes)
	}
	free := b.messages(0, lane("free"))
	if len(free) != 1 {
		t.Fatalf("%d messages in the free lane, want 1", len(free))
	}
	checkOnTime(t, free)
	if got := len(b.messages(0, full)); got != 1 {
		t.Fatalf("%d messages in the full lane, want the filler only", got)
	}
	if s := b.c.Stats(); s.RefsSkipped == 0 {
		t.Fatalf("stats %+v: the full lane's ref is not on backoff", s)
	}
	// Make room: receive and ack the filler.
	r := b.apply(0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: "acme", Queue: "jobs", Max: 10, Owner: "w"}}})
	for _, m := range r.GetResults()[0].GetReceive().GetMessages() {
		if m.GetId() == "filler" {
			b.apply(0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Ack{Ack: &orreryv1.Ack{Lane: full, Id: "filler", LeaseToken: m.GetLease().GetToken()}}})
		}
	}
	b.runUntil(t0.Add(10 * time.Minute))
	msgs := b.messages(0, full)
	if len(msgs) != 1 || msgs[0].GetOccurrence().GetScheduleId() != scheduleID(1) {
		t.Fatalf("full lane holds %v, want schedule 1's occurrence", msgs)
	}
}

// TestARevokedCreatorsRefBacksOffAndResumesOnceRestored: the emit of a schedule whose creator
// lost its grant is answered Unauthorized; the coordinator backs the ref off instead of
// sending it again and again, counts it skipped (no error logged), and once the grant is back
// the next attempt emits the occurrences that fell due meanwhile, each once.
func TestARevokedCreatorsRefBacksOffAndResumesOnceRestored(t *testing.T) {
	t.Parallel()
	b := setup(t, options{hints: true})
	b.apply(0, configure(lane("revoked"), scheduleID(1), every(t0.Add(time.Minute), time.Minute), 0))
	if err := b.twin.Grant(&orreryv1.PutGrant{Principal: "alice"}); err != nil {
		t.Fatal(err)
	}
	b.start(0)
	b.runUntil(t0.Add(10 * time.Minute))
	if got := b.messages(0, lane("revoked")); len(got) != 0 {
		t.Fatalf("a revoked creator's schedule enqueued %d messages", len(got))
	}
	sent := 0
	for _, c := range b.twin.Calls() {
		for _, m := range c.Mutations {
			if m.GetEmitOccurrences() != nil {
				sent++
			}
		}
	}
	// Backoff 1 s doubling: at most 10 attempts in the 9 minutes since the first due instant.
	if sent == 0 || sent > 10 {
		t.Fatalf("the revoked schedule's emit was sent %d times in 9 minutes", sent)
	}
	if s := b.c.Stats(); s.RefsSkipped == 0 || s.Errors != 0 {
		t.Fatalf("stats %+v", s)
	}
	if err := b.twin.Grant(grants.Everything("alice")); err != nil {
		t.Fatal(err)
	}
	b.runUntil(t0.Add(20 * time.Minute))
	msgs := b.messages(0, lane("revoked"))
	seen := map[uint64]bool{}
	for _, m := range msgs {
		o := m.GetOccurrence().GetOrdinal()
		if seen[o] {
			t.Fatalf("ordinal %d emitted twice", o)
		}
		seen[o] = true
	}
	for o := range uint64(20) { // due at minutes 1..20
		if !seen[o] {
			t.Fatalf("ordinal %d missing after the grant was restored (%d messages)", o, len(msgs))
		}
	}
}

// fillLane enqueues n filler messages into l.
func fillLane(b *bench, l *orreryv1.Lane, n int) {
	b.t.Helper()
	var ms []*orreryv1.Mutation
	for i := range n {
		ms = append(ms, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: l, Id: fmt.Sprintf("filler-%d", i), PayloadJson: `{}`}}})
	}
	b.apply(0, ms...)
}

// TestAShortOutageLogsNoWarningALongOneLogsOne: a partition whose rounds fail three times (a
// leader election's worth) logs them at DEBUG; one that keeps failing logs one WARN at its fourth
// failure, no more however long it lasts, and one INFO when a round succeeds again.
func TestAShortOutageLogsNoWarningALongOneLogsOne(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		failing    int
		warn, info int
	}{{failing: 3}, {failing: 8, warn: 1, info: 1}} {
		t.Run(fmt.Sprintf("%d failures", tc.failing), func(t *testing.T) {
			logs := &logLines{}
			b := setup(t, options{cfg: func(c *Config) { c.Logger = slog.New(logs) }})
			b.apply(0, configure(lane("a"), scheduleID(1), at(t0.Add(time.Minute)), 0))
			var mu sync.Mutex
			rounds := 0
			b.twin.SetHooks(coordinatortest.Hooks{BeforeScan: func(context.Context, int, *orreryv1.ScanDueRequest) error {
				mu.Lock()
				defer mu.Unlock()
				if rounds++; rounds <= tc.failing {
					return orrery.Errorf(orrery.CodeUnavailable, "no leader")
				}
				return nil
			}})
			b.start(0)
			b.runUntil(t0.Add(10 * time.Minute))
			if msgs := b.messages(0, lane("a")); len(msgs) != 1 {
				t.Fatalf("%d messages, want 1", len(msgs))
			}
			if n := logs.count("due coordinator: round failed"); n != tc.failing {
				t.Errorf("%d round failures logged, want %d", n, tc.failing)
			}
			warned := 0
			for _, line := range logs.all() {
				// (the watchdog's own line for a schedule late through the outage is another matter)
				if strings.HasPrefix(line, "due coordinator: round failed") && !strings.HasSuffix(line, "level=DEBUG") {
					warned++
				}
			}
			if warned != tc.warn || logs.count("due coordinator: partition answers again") != tc.info {
				t.Errorf("%d WARN lines and %d recoveries logged, want %d and %d:\n%s", warned,
					logs.count("due coordinator: partition answers again"), tc.warn, tc.info, strings.Join(logs.all(), "\n"))
			}
		})
	}
}
