package partition

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/internal/testkit"
	"github.com/orreryhq/orrery/persistence"
)

// heldLog wraps the host's Raft log: each Persist that writes command entries reports how many
// it writes and waits for a result (nil: persist for real).
type heldLog struct {
	persistence.RaftLog
	// passing lets every Persist through while set.
	passing  atomic.Bool
	entered  chan int
	release  chan error
	freed    chan struct{}
	freeOnce sync.Once
}

// holdLog wraps the host's log so that its Persists are held once hold is called (the
// harness's own commands, its grants, pass before).
func holdLog(cfg *HostConfig) *heldLog {
	l := &heldLog{entered: make(chan int, 16), release: make(chan error, 16), freed: make(chan struct{})}
	l.passing.Store(true)
	cfg.wrapLog = func(inner persistence.RaftLog) persistence.RaftLog {
		l.RaftLog = inner
		return l
	}
	return l
}

func (l *heldLog) Persist(writes []persistence.RaftWrite) error {
	commands := 0
	for _, w := range writes {
		for _, e := range w.Entries {
			if len(e.GetData()) > 0 {
				commands++
			}
		}
	}
	if commands > 0 && !l.passing.Load() {
		select {
		case l.entered <- commands:
		case <-l.freed:
		}
		select {
		case err := <-l.release:
			if err != nil {
				return err
			}
		case <-l.freed:
		}
	}
	return l.RaftLog.Persist(writes)
}

// hold holds every Persist that writes commands from now on, until released.
func (l *heldLog) hold() { l.passing.Store(false) }

// free lets every Persist through from now on (so the host can close).
func (l *heldLog) free() { l.freeOnce.Do(func() { close(l.freed) }) }

// waitEntered returns how many command entries the next held Persist writes.
func (l *heldLog) waitEntered(t *testing.T) int {
	t.Helper()
	select {
	case n := <-l.entered:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no round persisted a command")
		return 0
	}
}

// outcome is a command's reply or the error of waiting for it.
type outcome struct {
	reply *orreryv1.CommandReply
	err   error
}

// send sends a command and returns where its outcome arrives (a protoactor future wakes only
// one waiter, so exactly one goroutine waits on it).
func (h *harness) send(req *orreryv1.CommandRequest) <-chan outcome {
	f := h.system.Root.RequestFuture(h.pid, req, 10*time.Second)
	out := make(chan outcome, 1)
	go func() {
		res, err := f.Result()
		reply, _ := res.(*orreryv1.CommandReply)
		out <- outcome{reply: reply, err: err}
	}()
	return out
}

func replyOf(t *testing.T, f <-chan outcome) *orreryv1.CommandReply {
	t.Helper()
	o := <-f
	if o.err != nil || o.reply == nil {
		t.Fatalf("reply %v: %v", o.reply, o.err)
	}
	return o.reply
}

// noReplyYet fails if the command is answered within a short while.
func noReplyYet(t *testing.T, f <-chan outcome, what string) {
	t.Helper()
	select {
	case <-f:
		t.Fatalf("%s was answered before its entry was durable", what)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestCommandsShareTheRoundAfterAHeldOne: commands that arrive while a round persists all go
// into the next round, one synced write for all of them; a command is answered once the round
// that appended it is written, and not before: a sole voter acknowledges its own append when
// the append's round is done, so the entry commits in the next round, where it applies
// without waiting for that round's own write; commands apply in the order they came.
func TestCommandsShareTheRoundAfterAHeldOne(t *testing.T) {
	var held *heldLog
	h := newHostHarness(t, func(cfg *HostConfig) { held = holdLog(cfg) }, nil)
	t.Cleanup(held.free)
	held.hold()
	first := h.send(command("c1", 0, enqueue("m1")))
	if n := held.waitEntered(t); n != 1 {
		t.Fatalf("the first round writes %d commands, want 1", n)
	}
	second := h.send(command("c2", 0, enqueue("m2")))
	third := h.send(command("c3", 0, enqueue("m3")))
	noReplyYet(t, first, "c1")
	held.release <- nil // c1 appended
	if n := held.waitEntered(t); n != 2 {
		t.Fatalf("the round after the held one writes %d commands, want c2 and c3", n)
	}
	rc1 := receipt(t, replyOf(t, first)) // durable since the first round: not held by the second
	noReplyYet(t, second, "c2")
	noReplyYet(t, third, "c3")
	held.release <- nil
	rc2, rc3 := receipt(t, replyOf(t, second)), receipt(t, replyOf(t, third))
	if !(rc1.GetLoggedTimeUnixMicros() < rc2.GetLoggedTimeUnixMicros() && rc2.GetLoggedTimeUnixMicros() < rc3.GetLoggedTimeUnixMicros()) {
		t.Errorf("logged times c1 %d, c2 %d, c3 %d: want increasing", rc1.GetLoggedTimeUnixMicros(), rc2.GetLoggedTimeUnixMicros(), rc3.GetLoggedTimeUnixMicros())
	}
}

// TestAFailedPersistAnswersUnavailableAndFailsTheHost: when a round's write fails, nothing in it
// is known to be durable: its command is answered Unavailable (the caller retries with the same
// id), the host reports its failure, and later commands are refused.
func TestAFailedPersistAnswersUnavailableAndFailsTheHost(t *testing.T) {
	var held *heldLog
	h := newHostHarness(t, func(cfg *HostConfig) { held = holdLog(cfg) }, nil)
	t.Cleanup(held.free)
	held.hold()
	first := h.send(command("c1", 0, enqueue("m1")))
	held.waitEntered(t)
	held.release <- errors.New("disk gone")
	if err := orrery.FromProto(replyOf(t, first).GetError()); !errors.Is(err, orrery.ErrUnavailable) {
		t.Errorf("c1 answered %v after the failed write, want Unavailable", err)
	}
	select {
	case <-h.cfg.Host.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("the host did not report its failure")
	}
	if err := orrery.FromProto(h.do(command("c2", 0, enqueue("m2"))).GetError()); !errors.Is(err, orrery.ErrUnavailable) {
		t.Errorf("a command after the failed write answered %v, want Unavailable", err)
	}
}

// TestTheFreeDiskFloorRefusesCommandsAndRecovers: below the store's free-disk floor a command
// is refused Unavailable, naming the floor, before anything is logged; the host keeps running,
// and once the disk has room again commands apply.
func TestTheFreeDiskFloorRefusesCommandsAndRecovers(t *testing.T) {
	var free atomic.Uint64
	free.Store(2 << 30)
	h := newHostHarness(t, func(cfg *HostConfig) {
		cfg.Store.MinFreeBytes = 1 << 30
		cfg.Store.FreeBytesFunc = func(string) (uint64, error) { return free.Load(), nil }
	}, nil)
	receipt(t, h.do(command("c1", 0, enqueue("m1"))))
	free.Store(1 << 20)
	// The disk is read at most every persistence.FreeSpaceRecheck: commands sent meanwhile
	// are still taken, each under its own id.
	var err error
	var before uint64
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatalf("no command refused below the floor within 100 tries, 20 ms apart: %v", err)
		}
		before = h.appliedIndex()
		err = orrery.FromProto(h.do(command(fmt.Sprintf("c2-%d", i), 0, enqueue(fmt.Sprintf("m2-%d", i)))).GetError())
		if err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !errors.Is(err, orrery.ErrUnavailable) || !strings.Contains(err.Error(), "below the floor") {
		t.Fatalf("a command below the floor answered %v, want Unavailable naming the floor", err)
	}
	if got := h.appliedIndex(); got != before {
		t.Errorf("the refused command was logged: %d entries applied, %d before", got, before)
	}
	if err := h.cfg.Host.Err(); err != nil {
		t.Fatalf("the host failed below the floor: %v", err)
	}
	free.Store(2 << 30)
	testkit.Eventually(t, 10*time.Second, "a command taken once the disk has room again", func() bool {
		return h.do(command("c3", 0, enqueue("m3"))).GetError() == nil
	})
}

// TestBelowTheFloorQueuesStillDrain: below the free-disk floor but above half of it, a
// command that only drains (a receive here, engine.Drains) is taken while an enqueue is
// refused; below half the floor the receive is refused too.
func TestBelowTheFloorQueuesStillDrain(t *testing.T) {
	var free atomic.Uint64
	free.Store(2 << 30)
	h := newHostHarness(t, func(cfg *HostConfig) {
		cfg.Store.MinFreeBytes = 1 << 30
		cfg.Store.FreeBytesFunc = func(string) (uint64, error) { return free.Load(), nil }
	}, nil)
	// The host closes its store with room on the disk: below the floor Close leaves Badger
	// open (persistence.SiloStore.Close).
	t.Cleanup(func() { free.Store(2 << 30) })
	receipt(t, h.do(command("c1", 0, enqueue("m1"), enqueue("m2"))))
	free.Store(600 << 20) // below the 1 GiB floor, above its half
	testkit.Eventually(t, 10*time.Second, "an enqueue refused below the floor", func() bool {
		err := orrery.FromProto(h.do(command(fmt.Sprint("e-", time.Now().UnixNano()), 0, enqueue("m3"))).GetError())
		return errors.Is(err, orrery.ErrUnavailable) && strings.Contains(err.Error(), "below the floor")
	})
	if got := receipt(t, h.do(command("r1", 0, receive(1)))).GetResults()[0].GetReceive().GetMessages(); len(got) != 1 {
		t.Fatalf("a receive below the floor, above half of it, leased %d messages, want 1", len(got))
	}
	free.Store(400 << 20) // below half the floor
	testkit.Eventually(t, 10*time.Second, "a receive refused below half the floor", func() bool {
		err := orrery.FromProto(h.do(command(fmt.Sprint("r-", time.Now().UnixNano()), 0, receive(1))).GetError())
		return errors.Is(err, orrery.ErrUnavailable) && strings.Contains(err.Error(), "below the floor of 536870912 bytes")
	})
}
