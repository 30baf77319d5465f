package orreryv1

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// protoFiles are the sources of the generated code, in the order gen-proto.sh hashes them.
func protoFiles(t *testing.T) []string {
	files, err := filepath.Glob("*.proto")
	if err != nil || len(files) == 0 {
		t.Fatalf("no .proto files: %v", err)
	}
	return files // Glob sorts, as the shell glob in gen-proto.sh does
}

// TestGeneratedCodeIsFresh fails when the committed .pb.go files do not match the .proto
// files. With protoc installed it regenerates into a temp dir and compares bytes; without it,
// it checks the descriptor hash recorded at generation time (make proto writes it).
func TestGeneratedCodeIsFresh(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err == nil && os.Getenv("ORRERY_SKIP_PROTOC") == "" {
		out := t.TempDir()
		cmd := exec.Command("../../scripts/gen-proto.sh", out)
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("regenerate: %v\n%s", err, msg)
		}
		for _, src := range protoFiles(t) {
			gen := strings.TrimSuffix(src, ".proto") + ".pb.go"
			fresh, err := os.ReadFile(filepath.Join(out, "api", "v1", gen))
			if err != nil {
				t.Fatal(err)
			}
			committed, err := os.ReadFile(gen)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(fresh, committed) {
				t.Errorf("%s is stale: run make proto", gen)
			}
		}
	} else {
		t.Log("protoc not used: checking the recorded descriptor hash only")
	}
	h := sha256.New()
	for _, src := range protoFiles(t) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	recorded, err := os.ReadFile("proto.sha256")
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != strings.TrimSpace(string(recorded)) {
		t.Errorf("the .proto files changed since generation (hash %s, recorded %s): run make proto", got, strings.TrimSpace(string(recorded)))
	}
}
