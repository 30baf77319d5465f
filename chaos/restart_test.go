package chaos

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/route"
	"github.com/orreryhq/orrery/internal/testkit"
)

// These tests run real silo processes (no -race needed in them; the silo binary is built
// without it).

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func dial(t *testing.T, p *SiloProcess) *client.Client {
	t.Helper()
	return dialLogging(t, p, quiet)
}

// dialLogging is dial with the client's logger.
func dialLogging(t *testing.T, p *SiloProcess, logger *slog.Logger) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.DialConfig{Seeds: []string{p.GossipAddress()}, Options: client.Options{Logger: logger}})
	if err != nil {
		t.Fatalf("dial %s: %v\n%s", p.GossipAddress(), err, p.Log())
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// occurrences lists the lane's messages sorted by ordinal.
func occurrences(t *testing.T, ctx context.Context, c *client.Client, lane *orreryv1.Lane) []*orreryv1.QueueMessage {
	t.Helper()
	var all []*orreryv1.QueueMessage
	after := ""
	for {
		page, next, err := c.InspectLane(ctx, lane, after, 1000)
		if err != nil {
			t.Fatalf("inspect lane: %v", err)
		}
		all = append(all, page...)
		if next == "" {
			break
		}
		after = next
	}
	sort.Slice(all, func(i, j int) bool { return all[i].GetOccurrence().GetOrdinal() < all[j].GetOccurrence().GetOrdinal() })
	return all
}

// TestSIGKILLRestartContinuesWithoutDuplicatesOrGaps is the process test: an Every 1s
// schedule on a real silo process, SIGKILL, restart on the same data directory; occurrences
// continue with no duplicate id and no gap, the ones that fell due while the silo was down are
// caught up, and a command id issued before the kill replays its byte-identical receipt.
func TestSIGKILLRestartContinuesWithoutDuplicatesOrGaps(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real silo processes")
	}
	spec := &SiloSpec{DataDir: t.TempDir()}
	silo := StartSilo(t, spec)
	c := dial(t, silo)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	lane := &orreryv1.Lane{Namespace: "process-test", Queue: "ticks", Key: uuid.NewString()}
	scheduleID := uuid.NewString()
	configure := []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
		Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: scheduleID, Template: &orreryv1.MessageTemplate{PayloadJson: `{"n":1}`},
			Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{
				IntervalMicros: time.Second.Microseconds(), FirstDueAtUnixMicros: time.Now().Add(time.Second).Truncate(time.Second).UnixMicro()}}}},
	}}}}
	partition := route.Partition(lane, c.Partitions())
	_, receiptBefore, err := c.Batch(ctx, partition, configure, client.WithCommandID("configure-before-kill"))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "three occurrences before the kill", func() bool { return len(occurrences(t, ctx, c, lane)) >= 3 })

	silo.Kill()
	killedAt := time.Now()
	time.Sleep(4 * time.Second) // occurrences fall due while nothing runs
	silo = StartSilo(t, spec)   // same data directory and ports
	restartedAt := time.Now()
	c = dial(t, silo)

	// Catch-up: every instant due by now is enqueued, contiguous from ordinal 0.
	var msgs []*orreryv1.QueueMessage
	testkit.Eventually(t, 60*time.Second, "catch-up after restart", func() bool {
		msgs = occurrences(t, ctx, c, lane)
		if len(msgs) == 0 {
			return false
		}
		last := time.UnixMicro(msgs[len(msgs)-1].GetOccurrence().GetNominalDueAtUnixMicros())
		return last.After(restartedAt.Add(2 * time.Second))
	})
	seen := map[string]bool{}
	caughtUp := 0
	for i, m := range msgs {
		o := m.GetOccurrence()
		if seen[m.GetId()] {
			t.Fatalf("occurrence %s enqueued twice", m.GetId())
		}
		seen[m.GetId()] = true
		if o.GetOrdinal() != uint64(i) {
			t.Fatalf("gap: position %d holds ordinal %d", i, o.GetOrdinal())
		}
		due := time.UnixMicro(o.GetNominalDueAtUnixMicros())
		enqueued := time.UnixMicro(m.GetEnqueuedAtUnixMicros())
		if enqueued.Before(due) {
			t.Fatalf("ordinal %d enqueued at %v before its due time %v", i, enqueued, due)
		}
		if due.After(killedAt) && due.Before(restartedAt) {
			caughtUp++
			if enqueued.Before(restartedAt.Add(-time.Second)) {
				t.Fatalf("ordinal %d fell due while the silo was down but claims enqueue at %v", i, enqueued)
			}
		}
	}
	if caughtUp < 3 {
		t.Fatalf("only %d occurrences fell due while the silo was down and were caught up", caughtUp)
	}
	t.Logf("%d occurrences, %d of them caught up after the restart", len(msgs), caughtUp)

	// The command issued before the kill replays its byte-identical receipt.
	_, receiptAfter, err := c.Batch(ctx, partition, configure, client.WithCommandID("configure-before-kill"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(receiptAfter, receiptBefore) {
		t.Fatal("the receipt replayed after the restart differs from the original")
	}
}
