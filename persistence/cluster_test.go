package persistence

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
)

func TestClusterMetaIsWrittenOnceAndChecked(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "data")
	if err := EnsureClusterMeta(root, 32); err != nil {
		t.Fatalf("first EnsureClusterMeta: %v", err)
	}
	path := filepath.Join(root, ClusterMetaFile)
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Partitions int    `json:"partitions"`
		Created    string `json:"created"`
	}
	if err := json.Unmarshal(first, &meta); err != nil || meta.Partitions != 32 || meta.Created == "" {
		t.Fatalf("cluster.json = %s (%v)", first, err)
	}

	if err := EnsureClusterMeta(root, 32); err != nil {
		t.Fatalf("same count again: %v", err)
	}
	if again, _ := os.ReadFile(path); string(again) != string(first) {
		t.Errorf("cluster.json rewritten:\n%s\n%s", first, again)
	}

	err = EnsureClusterMeta(root, 16)
	if !errors.Is(err, orrery.ErrValidation) {
		t.Fatalf("different count: %v, want Validation", err)
	}
	for _, part := range []string{"created with 32 partitions", "configured with 16"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not say %q", err, part)
		}
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 1 {
		t.Errorf("data root holds %d entries, want only cluster.json (no temporary files)", len(entries))
	}
}

func TestClusterMetaRefusesBadInput(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := EnsureClusterMeta(root, 0); !errors.Is(err, orrery.ErrValidation) {
		t.Errorf("0 partitions: %v", err)
	}
	if err := os.WriteFile(filepath.Join(root, ClusterMetaFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := EnsureClusterMeta(root, 4); !errors.Is(err, orrery.ErrValidation) || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("damaged cluster.json: %v", err)
	}
}

func TestPartitionDir(t *testing.T) {
	t.Parallel()
	if got, want := PartitionDir("/data", 7), filepath.Join("/data", "partitions", "7"); got != want {
		t.Errorf("PartitionDir = %q, want %q", got, want)
	}
}
