package partition

import (
	"testing"
	"time"

	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/internal/oldlayout"
	"github.com/orreryhq/orrery/persistence"
)

// TestAHostOpensAnImportedDataRoot: a data root of the old layout, imported, opens as a host
// whose partitions hold their old state, and a new command's logged time follows the old
// partition's last logged time, though that is an hour ahead of the clock.
func TestAHostOpensAnImportedDataRoot(t *testing.T) {
	dataRoot := t.TempDir()
	ahead := time.Now().Add(time.Hour).UnixMicro()
	old := make([]oldlayout.Partition, 4)
	for n := range old {
		old[n] = oldlayout.Partition{State: map[string]string{"zz/imported": "from the old layout"}, LoggedTimeMicros: ahead + int64(n), AppliedIndex: 9}
	}
	oldlayout.Write(t, dataRoot, old)
	if _, err := OpenHost(HostConfig{DataRoot: dataRoot, Partitions: 4, Logger: quiet}); err == nil {
		t.Fatal("a host opened the old layout")
	}
	if _, err := persistence.ImportPartitionStores(dataRoot, 4, persistence.Options{Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	h := newHostHarness(t, func(cfg *HostConfig) { cfg.DataRoot = dataRoot }, nil)
	state, err := h.cfg.Host.store.Partition(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := state.View(func(r kv.Reader) error {
		value, found, err := r.Get([]byte("zz/imported"))
		if err != nil || !found || string(value) != "from the old layout" {
			t.Errorf("imported key: %q, %v, %v", value, found, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rc := receipt(t, h.do(command("c1", 0, enqueue("m1"))))
	if got := rc.GetLoggedTimeUnixMicros(); got <= old[1].LoggedTimeMicros {
		t.Fatalf("the first command after the import is logged at %d, not after the old partition's %d", got, old[1].LoggedTimeMicros)
	}
	if msgs := h.lane(); len(msgs) != 1 {
		t.Fatalf("%d messages after the import and an enqueue, want 1", len(msgs))
	}
}
