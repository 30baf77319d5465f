package partition

import (
	"errors"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/persistence"
)

// heldSync replaces the partition's sync: each call reports its store and waits for a result
// (nil: sync for real).
type heldSync struct {
	entered chan *persistence.Store
	release chan error
	freed   chan struct{}
}

func newHeldSync(cfg *Config) *heldSync {
	s := &heldSync{entered: make(chan *persistence.Store, 16), release: make(chan error, 16), freed: make(chan struct{})}
	cfg.syncStore = func(store *persistence.Store) error {
		select {
		case s.entered <- store:
		case <-s.freed:
		}
		select {
		case err := <-s.release:
			if err != nil {
				return err
			}
		case <-s.freed:
		}
		return store.Sync()
	}
	return s
}

// free lets every sync through from now on (so the activation can stop).
func (s *heldSync) free() { close(s.freed) }

func (s *heldSync) waitEntered(t *testing.T) *persistence.Store {
	t.Helper()
	select {
	case store := <-s.entered:
		return store
	case <-time.After(10 * time.Second):
		t.Fatal("no sync began")
		return nil
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

// waitApplied polls until the store has applied index want (durable or not).
func waitApplied(t *testing.T, store *persistence.Store, want uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for store.AppliedIndex() < want {
		if time.Now().After(deadline) {
			t.Fatalf("applied index %d, want %d", store.AppliedIndex(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// noReplyYet fails if the command is answered within a short while.
func noReplyYet(t *testing.T, f <-chan outcome, what string) {
	t.Helper()
	select {
	case <-f:
		t.Fatalf("%s was answered before its group was durable", what)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestGroupsApplyWhileAnEarlierGroupSyncs: a command arriving while the group before it syncs
// is applied (gets its logged time) at once, over the unsynced group, instead of waiting for
// that sync; no reply leaves before the sync that makes its group durable, and one sync can
// cover several groups.
func TestGroupsApplyWhileAnEarlierGroupSyncs(t *testing.T) {
	var held *heldSync
	h := newHarness(t, func(cfg *Config) { held = newHeldSync(cfg) })
	t.Cleanup(held.free)
	first := h.send(command("c1", 0, enqueue("m1")))
	store := held.waitEntered(t) // c1 applied; its sync is held
	base := store.AppliedIndex()
	second := h.send(command("c2", 0, enqueue("m2")))
	waitApplied(t, store, base+1) // c2 applied while c1's sync is held
	noReplyYet(t, first, "c1")
	noReplyYet(t, second, "c2")
	held.release <- nil
	rc1 := receipt(t, replyOf(t, first))
	// c2 was applied after c1's sync began, so it is answered only after a sync of its own
	// (the store's sync may have covered it already; the partition does not count on that).
	held.waitEntered(t)
	noReplyYet(t, second, "c2")
	held.release <- nil
	rc2 := receipt(t, replyOf(t, second))
	if !(rc1.GetLoggedTimeUnixMicros() < rc2.GetLoggedTimeUnixMicros()) {
		t.Errorf("logged times c1 %d, c2 %d: want c1 first", rc1.GetLoggedTimeUnixMicros(), rc2.GetLoggedTimeUnixMicros())
	}
	if index, _ := store.Durable(); index != base+1 {
		t.Errorf("durable index %d after the second sync, want %d", index, base+1)
	}
}

// TestAFailedSyncAnswersEveryUnsyncedGroupUnavailable: when a sync fails, no group applied
// since the last good sync is known to be durable: each of their commands is answered
// Unavailable (the caller retries with the same id) and the activation stops.
func TestAFailedSyncAnswersEveryUnsyncedGroupUnavailable(t *testing.T) {
	var held *heldSync
	h := newHarness(t, func(cfg *Config) { held = newHeldSync(cfg) })
	t.Cleanup(held.free)
	first := h.send(command("c1", 0, enqueue("m1")))
	store := held.waitEntered(t)
	base := store.AppliedIndex()
	second := h.send(command("c2", 0, enqueue("m2")))
	waitApplied(t, store, base+1)
	held.release <- errors.New("disk gone")
	for name, f := range map[string]<-chan outcome{"c1": first, "c2": second} {
		if err := orrery.FromProto(replyOf(t, f).GetError()); !errors.Is(err, orrery.ErrUnavailable) {
			t.Errorf("%s answered %v after the failed sync, want Unavailable", name, err)
		}
	}
	res, err := h.system.Root.RequestFuture(h.pid, command("c3", 0, enqueue("m3")), time.Second).Result()
	if reply, ok := res.(*orreryv1.CommandReply); err == nil && ok && reply.GetError() == nil {
		t.Errorf("a command after the failed sync succeeded: the activation should have stopped")
	}
}
