package persistence

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
)

// TestSiloStoreClusterID: a new store belongs to no cluster; SetClusterID records the id once,
// across close and reopen; setting it again is a no-op, another id is a Validation error on
// cluster_id naming both ids and the store, and zero is refused.
func TestSiloStoreClusterID(t *testing.T) {
	t.Parallel()
	dir := SiloStoreDir(t.TempDir())
	s := openSiloStore(t, dir, 4)
	if id := s.ClusterID(); id != 0 {
		t.Fatalf("a new store's cluster id is %016x, want 0", id)
	}
	if err := s.SetClusterID(0); !errors.Is(err, orrery.ErrValidation) {
		t.Errorf("SetClusterID(0) = %v, want Validation", err)
	}
	const id, other = 0x0123456789abcdef, 0xfedcba9876543210
	if err := s.SetClusterID(id); err != nil {
		t.Fatal(err)
	}
	if s.ClusterID() != id {
		t.Fatalf("cluster id %016x after SetClusterID, want %016x", s.ClusterID(), uint64(id))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSiloStore(t, dir, 4)
	if s.ClusterID() != id {
		t.Fatalf("cluster id after reopening %016x, want %016x", s.ClusterID(), uint64(id))
	}
	if err := s.SetClusterID(id); err != nil {
		t.Errorf("setting the recorded id again: %v", err)
	}
	err := s.SetClusterID(other)
	var oerr *orrery.Error
	if !errors.As(err, &oerr) || oerr.Code != orrery.CodeValidation || oerr.Field != "cluster_id" {
		t.Fatalf("SetClusterID(another id) = %v, want a Validation error on cluster_id", err)
	}
	for _, want := range []string{"0123456789abcdef", "fedcba9876543210", dir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s = openSiloStore(t, dir, 4); s.ClusterID() != id {
		t.Errorf("the refused id replaced the recorded one: %016x", s.ClusterID())
	}
}

// crashClusterID is the cluster id the child sets.
const crashClusterID = 0x5eed5eed5eed5eed

// TestClusterIDIsDurableWhenSetReturns: a child process sets the cluster id, prints that
// SetClusterID returned and is SIGKILLed; the store keeps the id both as the kill left it (a
// process crash) and with each write-ahead log cut back to what its syncs covered (a machine
// crash).
func TestClusterIDIsDurableWhenSetReturns(t *testing.T) {
	if dir := crashChildDir(); dir != "" {
		clusterIDChild(dir)
		return
	}
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	reported, stderr := killChild(t, dir, nil, func(line string) bool { return line == "cluster id set" })
	if !reported {
		t.Fatalf("the child did not report the cluster id set; stderr:\n%s", stderr)
	}
	power := dir + "-power-loss"
	imageSyncedWALs(t, dir, power)
	for _, image := range []struct{ dir, what string }{{dir, "process crash"}, {power, "machine crash"}} {
		s := openSiloStore(t, image.dir, 2)
		if s.ClusterID() != crashClusterID {
			t.Errorf("%s: cluster id %016x, want %016x", image.what, s.ClusterID(), uint64(crashClusterID))
		}
		_ = s.Close()
	}
}

// clusterIDChild opens the store, sets the cluster id, reports it and waits to be killed.
func clusterIDChild(dir string) {
	s, err := OpenSiloStore(dir, 2, smallOptions())
	if err == nil {
		s.wals.syncLog = recordSynced(dir + ".synced")
		err = s.SetClusterID(crashClusterID)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("cluster id set")
	select {}
}
