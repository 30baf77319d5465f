package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/route"
	"github.com/orreryhq/orrery/internal/testkit"
)

// Shape of TestSIGKILLInTheMiddleOfABurstLosesAndDoublesNothing.
const (
	burstSchedules = 1000
	burstLanes     = 64
)

// TestSIGKILLInTheMiddleOfABurstLosesAndDoublesNothing: 1,000 Every 1s schedules on a real silo
// process, all due on the same instants, so each second starts a burst of 1,000 emissions
// across the partitions; the silo is SIGKILLed inside a burst, while its due commands are
// proposed, persisted and applied, and restarted on the same data directory. Every schedule's
// occurrences are then ordinals 0, 1, 2, ... with none missing, none under two ids and none
// enqueued before its instant, and every schedule went on past the restart. A kill counts as
// inside the burst when some of the burst's occurrences were enqueued before it and some after
// the restart; the test kills again, at another offset from a later burst's instant, until one
// does, and fails when none of burstKillAttempts does.
func TestSIGKILLInTheMiddleOfABurstLosesAndDoublesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real silo processes")
	}
	spec := &SiloSpec{DataDir: t.TempDir()}
	silo := StartSilo(t, spec)
	c := dial(t, silo)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	run := uuid.NewString()
	lanes := make([]*orreryv1.Lane, burstLanes)
	for i := range lanes {
		lanes[i] = &orreryv1.Lane{Namespace: "burst-kill", Queue: "ticks", Key: fmt.Sprintf("%s-%d", run, i)}
	}
	first := time.Now().Add(3 * time.Second).Truncate(time.Second)
	byPartition := map[int][]*orreryv1.Mutation{}
	scheduleLane := map[string]*orreryv1.Lane{}
	for i := range burstSchedules {
		lane, id := lanes[i%burstLanes], uuid.NewString()
		scheduleLane[id] = lane
		p := route.Partition(lane, c.Partitions())
		byPartition[p] = append(byPartition[p], &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
			Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: id, Template: &orreryv1.MessageTemplate{PayloadJson: `{"n":1}`},
				Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{
					IntervalMicros: time.Second.Microseconds(), FirstDueAtUnixMicros: first.UnixMicro()}}}},
		}}})
	}
	for p, muts := range byPartition {
		for len(muts) > 0 {
			n := min(len(muts), 200)
			receipt, _, err := c.Batch(ctx, p, muts[:n])
			if err != nil {
				t.Fatalf("configure on partition %d: %v", p, err)
			}
			for _, r := range receipt.GetResults() {
				if r.GetError() != nil {
					t.Fatalf("configure on partition %d: %v", p, r.GetError())
				}
			}
			muts = muts[n:]
		}
	}
	if time.Now().After(first) {
		t.Fatalf("configuring %d schedules took past their first instant %v", burstSchedules, first)
	}

	// The kill must fall inside a burst: after some of its due commands applied and before the
	// rest did. A burst applies in a few milliseconds, so the kill's offset from the burst's
	// instant is searched: a kill that fell before the burst (none of it enqueued before the
	// kill) is moved later, one that fell after it (all of it enqueued before) earlier.
	var (
		lo, hi = time.Duration(0), 40 * time.Millisecond
		offset = 4 * time.Millisecond
		tried  []string
		landed bool
	)
	for attempt := 1; attempt <= burstKillAttempts && !landed; attempt++ {
		burst := uint64(max(2, int64(time.Since(first)/time.Second)+2)) // the third burst, or the first instant at least a second away
		time.Sleep(time.Until(first.Add(time.Duration(burst)*time.Second + offset)))
		silo.Kill()
		time.Sleep(1500 * time.Millisecond) // the next burst falls due while nothing runs
		silo = StartSilo(t, spec)           // same data directory and ports
		restartedAt := time.Now()
		c = dial(t, silo)
		before, after := checkBursts(t, ctx, c, lanes, scheduleLane, first, restartedAt, burst)
		tried = append(tried, fmt.Sprintf("burst %d killed at +%v: %d occurrences enqueued before the kill, %d after the restart", burst, offset, before, after))
		t.Log(tried[len(tried)-1])
		switch {
		case before > 0 && after > 0:
			landed = true
		case before == 0:
			lo = offset
		default:
			hi = offset
		}
		offset = (lo + hi) / 2
	}
	if !landed {
		t.Fatalf("no kill fell inside a burst in %d attempts:\n%s", burstKillAttempts, strings.Join(tried, "\n"))
	}
}

// burstKillAttempts bounds the kills TestSIGKILLInTheMiddleOfABurstLosesAndDoublesNothing
// tries before one falls inside a burst.
const burstKillAttempts = 6

// checkBursts waits until every schedule went on past a restart at restartedAt, fails t if any
// schedule's occurrences are not ordinals 0, 1, 2, ... each once, due on its instant and
// enqueued no earlier, and returns how many occurrences of ordinal burst were enqueued before
// the restart and after it.
func checkBursts(t *testing.T, ctx context.Context, c *client.Client, lanes []*orreryv1.Lane, scheduleLane map[string]*orreryv1.Lane, first, restartedAt time.Time, burst uint64) (before, after int) {
	t.Helper()
	var problems []string
	testkit.Eventually(t, 90*time.Second, "every schedule's occurrences past the restart, none lost or doubled", func() bool {
		problems, before, after = nil, 0, 0
		next := map[string]uint64{} // schedule → the ordinal expected next
		lastDue := map[string]time.Time{}
		for _, lane := range lanes {
			for _, m := range occurrences(t, ctx, c, lane) {
				o := m.GetOccurrence()
				id := o.GetScheduleId()
				if scheduleLane[id] == nil {
					problems = append(problems, fmt.Sprintf("message %s of an unknown schedule %q", m.GetId(), id))
					continue
				}
				due := time.UnixMicro(o.GetNominalDueAtUnixMicros())
				switch want := next[id]; {
				case o.GetOrdinal() < want:
					problems = append(problems, fmt.Sprintf("schedule %s: ordinal %d enqueued twice (message %s)", id, o.GetOrdinal(), m.GetId()))
				case o.GetOrdinal() > want:
					problems = append(problems, fmt.Sprintf("schedule %s: ordinals %d..%d missing", id, want, o.GetOrdinal()-1))
				}
				if want := first.Add(time.Duration(o.GetOrdinal()) * time.Second); !due.Equal(want) {
					problems = append(problems, fmt.Sprintf("schedule %s: ordinal %d due at %v, want %v", id, o.GetOrdinal(), due, want))
				}
				enqueued := time.UnixMicro(m.GetEnqueuedAtUnixMicros())
				if enqueued.Before(due) {
					problems = append(problems, fmt.Sprintf("schedule %s: ordinal %d enqueued at %v, before its instant %v", id, o.GetOrdinal(), enqueued, due))
				}
				if o.GetOrdinal() == burst && enqueued.Before(restartedAt) {
					before++
				} else if o.GetOrdinal() == burst {
					after++
				}
				next[id] = max(next[id], o.GetOrdinal()+1)
				lastDue[id] = due
			}
		}
		if len(problems) > 0 {
			return true // a violation never heals: stop polling and report it
		}
		for id := range scheduleLane {
			if !lastDue[id].After(restartedAt.Add(time.Second)) {
				return false
			}
		}
		return true
	})
	if len(problems) > 0 {
		t.Fatalf("%d problems after a SIGKILL in the middle of a burst, first: %v", len(problems), problems[:min(len(problems), 10)])
	}
	return before, after
}
