package silo

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery/persistence"
)

// TestStartReturnsOnceThePartitionsAnswer: when Start returns, every partition the topology
// places on the silo has opened: /readyz answers 200 at once.
func TestStartReturnsOnceThePartitionsAnswer(t *testing.T) {
	s := startSilo(t, t.TempDir(), nil)
	if len(s.Owned()) != 8 {
		t.Fatalf("a lone silo owns %v", s.Owned())
	}
	if code, body := getJSON(t, "http://"+s.AdminAddress()+"/readyz"); code != http.StatusOK {
		t.Fatalf("readyz right after Start: %d %v", code, body)
	}
}

// TestStartFailsWhenAPartitionCannotOpen: a partition whose directory cannot be written (or,
// as root, a regular file where its directory should be) makes Start fail within OpenTimeout,
// naming the partition and the reason.
func TestStartFailsWhenAPartitionCannotOpen(t *testing.T) {
	dataDir := t.TempDir()
	if err := persistence.EnsureClusterMeta(dataDir, 8); err != nil {
		t.Fatal(err)
	}
	dir := persistence.PartitionDir(dataDir, 3)
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		t.Fatal(err)
	}
	reason := "permission denied"
	if os.Geteuid() == 0 { // chmod does not stop root
		reason = "not a directory"
		if err := os.WriteFile(dir, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	} else {
		if err := os.Mkdir(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o750) })
	}
	const bound = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	began := time.Now()
	s, err := Start(ctx, Config{DataDir: dataDir, Partitions: 8, Admin: "127.0.0.1:0", Logger: quiet, OpenTimeout: bound})
	if err == nil {
		s.Stop()
		t.Fatal("Start succeeded with partition 3 unopenable")
	}
	if took := time.Since(began); took > bound+15*time.Second {
		t.Errorf("Start failed after %v, the bound is %v", took, bound)
	}
	t.Logf("Start: %v", err)
	for _, want := range []string{"partitions [3]", "partition 3:", reason} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
