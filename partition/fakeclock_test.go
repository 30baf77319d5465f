package partition

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/grains/duecoordinator"
	"github.com/orreryhq/orrery/grains/input"
	"google.golang.org/protobuf/proto"
)

// newFakeClockHarness is a harness whose host and grain run on one fake clock: time moves only
// when the test advances it.
func newFakeClockHarness(t *testing.T, mutate func(*Config)) (*harness, *clock.Fake) {
	fake := clock.NewFake(time.Now().Truncate(time.Second))
	h := newHostHarness(t, func(c *HostConfig) { c.Clock = fake }, func(c *Config) {
		c.Clock = fake
		if mutate != nil {
			mutate(c)
		}
	})
	return h, fake
}

// TestLongPollWaitEndsOnTheClock: a parked receive on an empty queue is answered with nothing
// when the grain's clock passes its wait, and not a moment before; no real time passes for it.
func TestLongPollWaitEndsOnTheClock(t *testing.T) {
	h, fake := newFakeClockHarness(t, nil)
	out := h.send(command("r1", 30*time.Second, receive(1)))
	h.waitParked(1)
	fake.Advance(29 * time.Second)
	h.status() // the grain has handled whatever the clock's timers sent it before this
	select {
	case o := <-out:
		t.Fatalf("answered %v before its wait ended", o.reply)
	default:
	}
	fake.Advance(time.Second)
	reply := replyOf(t, out)
	if reply.GetError() != nil || len(reply.GetReceipt()) != 0 {
		t.Fatalf("a wait that ended answered %v, want neither receipt nor error", reply)
	}
}

// grainPartitions is the due coordinator's seam to partition grains spawned without a
// cluster: partition n's grain, on its actor system.
type grainPartitions map[int]grainRef

// grainRef is a grain and the actor system it runs on.
type grainRef struct {
	system *actor.ActorSystem
	pid    *actor.PID
}

func (g grainPartitions) ScanDue(ctx context.Context, n int, req *orreryv1.ScanDueRequest) (*orreryv1.ScanDueReply, error) {
	return callGrain[*orreryv1.ScanDueReply](ctx, g, n, req)
}

func (g grainPartitions) Command(ctx context.Context, n int, req *orreryv1.CommandRequest) (*orreryv1.CommandReply, error) {
	return callGrain[*orreryv1.CommandReply](ctx, g, n, req)
}

func callGrain[T proto.Message](ctx context.Context, g grainPartitions, n int, req proto.Message) (T, error) {
	var zero T
	timeout := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	res, err := g[n].system.Root.RequestFuture(g[n].pid, req, timeout).Result()
	if err != nil {
		return zero, orrery.Wrap(orrery.CodeUnavailable, err, "partition %d", n)
	}
	out, ok := res.(T)
	if !ok {
		return zero, orrery.Errorf(orrery.CodeInternal, "partition %d answered %T", n, res)
	}
	return out, nil
}

// startCoordinator runs a due coordinator on clk serving the harness's grain (partition 1),
// with the grain's next-due notices routed to it, as a silo wires them.
func (h *harness) startCoordinator(clk clock.Clock) *duecoordinator.Coordinator {
	h.t.Helper()
	coord := duecoordinator.New(duecoordinator.Config{
		Partitions: grainPartitions{1: {h.system, h.pid}},
		Clock:      clk, Logger: quiet,
	})
	h.notify.Store(&coord)
	coord.Start(context.Background())
	coord.SetOwned([]int{1})
	h.t.Cleanup(coord.Stop)
	return coord
}

// waitArmed waits until the coordinator's partition waits on its timer, neither queued nor in
// a round: a timer is set relative to the clock's time, so advancing the fake clock while a
// round ends would set the next one that much later than the round asked.
func waitArmed(t *testing.T, coord *duecoordinator.Coordinator) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := coord.Stats()
		if len(s.Partitions) == 1 && !s.Partitions[0].Queued && !s.Partitions[0].InFlight && !s.Partitions[0].TimerAt.IsZero() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the coordinator never waited on its timer: %+v", s)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTheCoordinatorEmitsOnTheClock: with every clock fake (host, grain, coordinator), a
// schedule due an hour ahead is emitted, by the due coordinator's due command, when the clock
// reaches its due instant and not before, at a logged time not before it.
func TestTheCoordinatorEmitsOnTheClock(t *testing.T) {
	h, fake := newFakeClockHarness(t, nil)
	coord := h.startCoordinator(fake)
	due := fake.Now().Add(time.Hour)
	receipt(t, h.do(command("configure", 0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
		Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: scheduleID, Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{
			Every: &orreryv1.EverySpec{IntervalMicros: 3600 * input.Second, FirstDueAtUnixMicros: due.UnixMicro()}}}}}}})))
	waitArmed(t, coord)
	fake.Advance(59 * time.Minute)
	h.status()
	if msgs := h.lane(); len(msgs) != 0 {
		t.Fatalf("%d messages a minute before the due instant", len(msgs))
	}
	waitArmed(t, coord)
	fake.AdvanceTo(due)
	deadline := time.Now().Add(10 * time.Second)
	for len(h.lane()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("nothing emitted once the clock reached the due instant; coordinator %+v", coord.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	m := h.lane()[0]
	if m.GetOccurrence().GetNominalDueAtUnixMicros() != due.UnixMicro() || m.GetEnqueuedAtUnixMicros() < due.UnixMicro() {
		t.Fatalf("occurrence due %d enqueued at %d, want due %d and not before it", m.GetOccurrence().GetNominalDueAtUnixMicros(), m.GetEnqueuedAtUnixMicros(), due.UnixMicro())
	}
	h.system.Root.StopFuture(h.pid).Wait()
	for _, e := range h.logged() {
		if e.cmd.GetBatch().GetMutations()[0].GetEmitOccurrences() != nil && !e.cmd.GetDue() {
			t.Fatalf("the emit was logged as an ordinary command, not a due command")
		}
	}
}
