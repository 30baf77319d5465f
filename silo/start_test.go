package silo

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// TestStartFailsWhenTheStoreCannotOpen: a silo store directory that cannot be written (or,
// as root, a regular file where it should be) makes Start fail, naming the store and the
// reason.
func TestStartFailsWhenTheStoreCannotOpen(t *testing.T) {
	dataDir := t.TempDir()
	dir := persistence.SiloStoreDir(dataDir)
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
	s, err := Start(context.Background(), Config{DataDir: dataDir, Partitions: 8, Admin: "127.0.0.1:0", Logger: quiet, InsecureDev: true})
	if err == nil {
		s.Stop()
		t.Fatal("Start succeeded with an unopenable store")
	}
	t.Logf("Start: %v", err)
	for _, want := range []string{dir, reason} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestASecondSiloOnTheSameDataRootIsRefused: one silo uses a data root at a time; a second one
// started on it fails at once, saying the store is held elsewhere, and the first keeps serving.
func TestASecondSiloOnTheSameDataRootIsRefused(t *testing.T) {
	dataDir := t.TempDir()
	first := startSilo(t, dataDir, nil)
	second, err := Start(context.Background(), Config{DataDir: dataDir, Partitions: 8, Admin: "127.0.0.1:0", Logger: quiet, InsecureDev: true})
	if err == nil {
		second.Stop()
		t.Fatal("a second silo started on a data root in use")
	}
	if !strings.Contains(err.Error(), "held elsewhere") {
		t.Errorf("error %q does not say the store is held elsewhere", err)
	}
	if code, body := getJSON(t, "http://"+first.AdminAddress()+"/readyz"); code != http.StatusOK {
		t.Fatalf("the first silo's readyz after the refusal: %d %v", code, body)
	}
}

// TestStartRefusesTheOldLayout: a data root holding one store per partition
// (<data>/partitions/<n>) is refused with a message naming it and the command that imports
// it, and nothing is created.
func TestStartRefusesTheOldLayout(t *testing.T) {
	dataDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dataDir, "partitions", "0"), 0o750); err != nil {
		t.Fatal(err)
	}
	s, err := Start(context.Background(), Config{DataDir: dataDir, Partitions: 8, Admin: "127.0.0.1:0", Logger: quiet, InsecureDev: true})
	if err == nil {
		s.Stop()
		t.Fatal("Start accepted the old layout")
	}
	if !strings.Contains(err.Error(), filepath.Join(dataDir, "partitions")) || !strings.Contains(err.Error(), "old layout") {
		t.Errorf("error %q does not name the old layout", err)
	}
	if command := "silo import --data " + dataDir; !strings.Contains(err.Error(), command) {
		t.Errorf("error %q does not name the command that imports it, %q", err, command)
	}
	if _, statErr := os.Stat(persistence.SiloStoreDir(dataDir)); !os.IsNotExist(statErr) {
		t.Errorf("the refused start created the silo store: %v", statErr)
	}
}
