package duecoordinator

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/duecoordinator/coordinatortest"
	"github.com/orreryhq/orrery/grains/input"
)

// logLines is a slog handler that keeps every record's message and attributes.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logLines) WithGroup(string) slog.Handler            { return l }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.Key + "=" + a.Value.String()
		return true
	})
	line += " level=" + r.Level.String()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	return nil
}

// count returns how many lines start with prefix.
func (l *logLines) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.HasPrefix(line, prefix) {
			n++
		}
	}
	return n
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestWatchdogReportsAFailingScheduleOnceAndItsRecovery: a schedule whose lane is full fails
// every emit; across all its retries the watchdog logs it failing once (with the reason),
// counts it, and lists it; once the lane has room it logs the recovery once and lists nothing.
func TestWatchdogReportsAFailingScheduleOnceAndItsRecovery(t *testing.T) {
	t.Parallel()
	limits := input.DefaultLimits()
	limits.MaxLaneMessages = 1
	logs := &logLines{}
	b := setup(t, options{limits: limits, hints: true, cfg: func(c *Config) { c.Logger = slog.New(logs) }})
	full := lane("full")
	fillLane(b, full, 1)
	b.apply(0, configure(full, scheduleID(1), at(t0.Add(10*time.Second)), 0))
	b.start(0)
	b.runUntil(t0.Add(5 * time.Minute))

	if s := b.c.Stats(); s.RefsSkipped < 3 {
		t.Fatalf("stats %+v: want several failed attempts", s)
	}
	if n := logs.count("due coordinator: schedule failing"); n != 1 {
		t.Fatalf("%d failing lines, want 1:\n%s", n, logs)
	}
	live := b.c.Liveness()
	if len(live) != 1 || live[0].State != LivenessFailing || live[0].ID != scheduleID(1) || live[0].Partition != 0 ||
		!strings.Contains(live[0].Reason, "lane") || !live[0].DueAt.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("liveness %+v, want schedule 1 failing for its full lane", live)
	}
	s := b.c.Stats()
	if s.LivenessChanges != 1 || s.Partitions[0].FailingRecords != 1 || s.Partitions[0].LateRecords != 0 {
		t.Fatalf("stats %+v: want one change and one failing record", s)
	}

	// Make room: receive and ack the filler.
	r := b.apply(0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: "acme", Queue: "jobs", Max: 10, Owner: "w"}}})
	for _, m := range r.GetResults()[0].GetReceive().GetMessages() {
		b.apply(0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Ack{Ack: &orreryv1.Ack{Lane: full, Id: m.GetId(), LeaseToken: m.GetLease().GetToken()}}})
	}
	b.runUntil(t0.Add(15 * time.Minute))
	if msgs := b.messages(0, full); len(msgs) != 1 || msgs[0].GetOccurrence().GetScheduleId() != scheduleID(1) {
		t.Fatalf("full lane holds %v, want schedule 1's occurrence", msgs)
	}
	if n := logs.count("due coordinator: schedule recovered"); n != 1 {
		t.Fatalf("%d recovered lines, want 1:\n%s", n, logs)
	}
	if live := b.c.Liveness(); len(live) != 0 {
		t.Fatalf("liveness %+v after recovery", live)
	}
	if s := b.c.Stats(); s.LivenessChanges != 2 || s.Partitions[0].FailingRecords != 0 {
		t.Fatalf("stats %+v: want two changes and nothing failing", s)
	}
	if n := logs.count("due coordinator: schedule failing"); n != 1 {
		t.Fatalf("%d failing lines at the end, want 1:\n%s", n, logs)
	}
}

// TestWatchdogReportsALateScheduleOnce: while its partition refuses commands, a due schedule
// is seen by every round's scan; past LateAfter the watchdog logs it late once, and once it is
// emitted logs its recovery.
func TestWatchdogReportsALateScheduleOnce(t *testing.T) {
	t.Parallel()
	logs := &logLines{}
	b := setup(t, options{hints: true, cfg: func(c *Config) { c.Logger = slog.New(logs); c.LateAfter = 20 * time.Second }})
	b.apply(0, configure(lane("a"), scheduleID(1), at(t0.Add(10*time.Second)), 0))
	var mu sync.Mutex
	refuse := true
	b.twin.SetHooks(coordinatortest.Hooks{BeforeCommand: func(context.Context, int, *orreryv1.CommandRequest) error {
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			return orrery.Errorf(orrery.CodeUnavailable, "no leader")
		}
		return nil
	}})
	b.start(0)
	b.runUntil(t0.Add(25 * time.Second))
	if live := b.c.Liveness(); len(live) != 0 {
		t.Fatalf("liveness %+v 15 s after the due instant, within LateAfter", live)
	}
	b.runUntil(t0.Add(3 * time.Minute))
	if n := logs.count("due coordinator: schedule late"); n != 1 {
		t.Fatalf("%d late lines, want 1:\n%s", n, logs)
	}
	live := b.c.Liveness()
	if len(live) != 1 || live[0].State != LivenessLate || b.c.Stats().Partitions[0].LateRecords != 1 {
		t.Fatalf("liveness %+v, stats %+v: want schedule 1 late", live, b.c.Stats())
	}
	mu.Lock()
	refuse = false
	mu.Unlock()
	b.runUntil(t0.Add(5 * time.Minute))
	if len(b.messages(0, lane("a"))) != 1 {
		t.Fatal("the late schedule was not emitted once commands went through")
	}
	if n := logs.count("due coordinator: schedule recovered"); n != 1 || len(b.c.Liveness()) != 0 || b.c.Stats().LivenessChanges != 2 {
		t.Fatalf("%d recovered lines, liveness %+v:\n%s", n, b.c.Liveness(), logs)
	}
}

// TestWatchdogReportsAtMostMaxWatchedRecords: past the bound, records are left out with one
// warning, and a record already reported still changes state.
func TestWatchdogReportsAtMostMaxWatchedRecords(t *testing.T) {
	logs := &logLines{}
	w := newWatchdog(time.Second, slog.New(logs))
	refs := make([]*orreryv1.DueRef, MaxWatchedRecords+10)
	for i := range refs {
		refs[i] = &orreryv1.DueRef{Kind: orreryv1.DueKind_DUE_KIND_SCHEDULE, Lane: lane("a"), Id: scheduleID(i), Token: 1, DueAtUnixMicros: micros(t0)}
	}
	w.observe(0, refs, micros(t0.Add(time.Minute)), t0.Add(time.Minute))
	if got := len(w.list()); got != MaxWatchedRecords {
		t.Fatalf("%d records reported, want %d", got, MaxWatchedRecords)
	}
	if n := logs.count("due coordinator: more records"); n != 1 {
		t.Fatalf("%d warnings about the bound, want 1", n)
	}
	w.failed(0, refs[0], orrery.Errorf(orrery.CodeQuotaExceeded, "lane full"), t0.Add(time.Minute))
	if l := w.list()[0]; l.ID != scheduleID(0) || l.State != LivenessFailing {
		t.Fatalf("first record %+v, want it failing", l)
	}
	if n := logs.count("due coordinator: schedule late"); n != MaxWatchedRecords {
		t.Fatalf("%d late lines, want %d", n, MaxWatchedRecords)
	}
}

// all returns every line.
func (l *logLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

// TestWatchdogReportsAnExpiredScheduleFailingUntilSkipped: a schedule stopped at an occurrence
// whose time to live passed before it was emitted is reported failing with the reason
// "expired", and emits nothing; once an operator skips the expired occurrence the schedule
// goes on and the watchdog reports its recovery.
func TestWatchdogReportsAnExpiredScheduleFailingUntilSkipped(t *testing.T) {
	t.Parallel()
	logs := &logLines{}
	b := setup(t, options{hints: true, cfg: func(c *Config) { c.Logger = slog.New(logs) }})
	l := lane("stale")
	// Ordinal 0 was due a minute before the coordinator starts and lived 1 s; ordinal 1 is due
	// in 10 minutes.
	b.apply(0, configure(l, scheduleID(1), every(t0.Add(-time.Minute), 11*time.Minute), time.Second))
	b.start(0)
	b.runUntil(t0.Add(2 * time.Minute))
	live := b.c.Liveness()
	if len(live) != 1 || live[0].State != LivenessFailing || !strings.Contains(live[0].Reason, "expired") {
		t.Fatalf("liveness %+v, want the schedule failing with reason expired", live)
	}
	if msgs := b.messages(0, l); len(msgs) != 0 {
		t.Fatalf("the stopped schedule enqueued %v", msgs)
	}
	r := b.apply(0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_SkipExpired{SkipExpired: &orreryv1.SkipExpired{Lane: l, ScheduleId: scheduleID(1)}}})
	if n := r.GetResults()[0].GetSchedule().GetPassedWithoutMessage(); n != 1 {
		t.Fatalf("skip-expired passed %d: %v", n, r)
	}
	b.runUntil(t0.Add(20 * time.Minute))
	if msgs := b.messages(0, l); len(msgs) != 1 {
		t.Fatalf("after the skip the lane holds %v, want ordinal 1's occurrence", msgs)
	}
	if n := logs.count("due coordinator: schedule recovered"); n != 1 {
		t.Fatalf("%d recovered lines, want 1:\n%s", n, logs)
	}
}
