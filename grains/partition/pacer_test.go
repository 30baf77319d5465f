package partition

import (
	"sync"
	"testing"
	"time"

	"github.com/orreryhq/orrery/persistence"
)

// TestSyncPacerTurnsBusyAboveAndIdleBelow: the gap applies from a sample above BusyAbove
// until one below IdleBelow; samples between keep the state.
func TestSyncPacerTurnsBusyAboveAndIdleBelow(t *testing.T) {
	t.Parallel()
	p := NewSyncPacer(SyncPacerConfig{BusyGap: 30 * time.Millisecond, BusyAbove: 0.8, IdleBelow: 0.6})
	for _, step := range []struct {
		use  float64
		want time.Duration
	}{
		{0.7, 0}, {0.81, 30 * time.Millisecond}, {0.7, 30 * time.Millisecond}, {0.95, 30 * time.Millisecond},
		{0.59, 0}, {0.7, 0}, {0.9, 30 * time.Millisecond},
	} {
		p.observe(step.use)
		if got := p.Gap(); got != step.want {
			t.Fatalf("after a sample of %.2f the gap is %v, want %v", step.use, got, step.want)
		}
	}
	never := NewSyncPacer(SyncPacerConfig{BusyGap: -1})
	never.observe(1)
	if never.Busy() {
		t.Error("a pacer with a negative gap turned busy")
	}
	var none *SyncPacer
	if none.Gap() != 0 {
		t.Error("a nil pacer has a gap")
	}
}

// TestABusyPacerSpacesAPartitionsSyncs: while the pacer is busy, a partition's next sync
// starts no sooner than the gap after the previous one began; the groups applied meanwhile
// are applied at once (their logged times are not held back) and one sync covers them.
func TestABusyPacerSpacesAPartitionsSyncs(t *testing.T) {
	const gap = 300 * time.Millisecond
	pacer := NewSyncPacer(SyncPacerConfig{BusyGap: gap})
	pacer.observe(1)
	var mu sync.Mutex
	var starts []time.Time
	var store *persistence.Store
	h := newHarness(t, func(cfg *Config) {
		cfg.SyncPacer = pacer
		cfg.syncStore = func(s *persistence.Store) error {
			mu.Lock()
			starts, store = append(starts, time.Now()), s
			mu.Unlock()
			return s.Sync()
		}
	})
	receipt(t, h.do(command("c1", 0, enqueue("m1"))))
	mu.Lock()
	synced, first := len(starts), starts[len(starts)-1]
	s := store
	mu.Unlock()
	base := s.AppliedIndex()
	second, third := h.send(command("c2", 0, enqueue("m2"))), (<-chan outcome)(nil)
	waitApplied(t, s, base+1)
	third = h.send(command("c3", 0, enqueue("m3")))
	waitApplied(t, s, base+2)
	if elapsed := time.Since(first); elapsed < gap/2 {
		// Both groups applied well inside the gap; neither may be answered yet.
		noReplyYet(t, second, "c2")
	}
	replyOf(t, second)
	replyOf(t, third)
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != synced+1 {
		t.Fatalf("%d syncs after c1's, want one covering c2 and c3", len(starts)-synced)
	}
	if d := starts[len(starts)-1].Sub(first); d < gap-20*time.Millisecond {
		t.Errorf("the next sync began %v after the previous one, want at least the gap of %v", d, gap)
	}
}

// TestABusyPacerSpacesAPartitionsGroups: while the pacer is busy, a partition's next group
// starts no sooner than BusyApplyGap after the previous one began, and the commands that
// arrive meanwhile gather into that one group (one logged time).
func TestABusyPacerSpacesAPartitionsGroups(t *testing.T) {
	const gap = 300 * time.Millisecond
	pacer := NewSyncPacer(SyncPacerConfig{BusyGap: time.Millisecond}) // syncs all but unpaced
	pacer.observe(1)
	h := newHarness(t, func(cfg *Config) {
		cfg.SyncPacer = pacer
		cfg.BusyApplyGap = gap
	})
	first := receipt(t, h.do(command("c1", 0, enqueue("m1")))).GetLoggedTimeUnixMicros()
	second, third := h.send(command("c2", 0, enqueue("m2"))), h.send(command("c3", 0, enqueue("m3")))
	r2, r3 := receipt(t, replyOf(t, second)), receipt(t, replyOf(t, third))
	if r2.GetLoggedTimeUnixMicros() != r3.GetLoggedTimeUnixMicros() {
		t.Fatalf("c2 and c3 applied at %d and %d, want one group", r2.GetLoggedTimeUnixMicros(), r3.GetLoggedTimeUnixMicros())
	}
	if d := time.Duration(r2.GetLoggedTimeUnixMicros()-first) * time.Microsecond; d < gap-20*time.Millisecond {
		t.Fatalf("the group after c1's began %v after it, want at least the gap of %v", d, gap)
	}
}
