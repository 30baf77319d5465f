package orrery

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// setsGOMAXPROCS matches a call that changes GOMAXPROCS (GOMAXPROCS(0) only reads it).
var setsGOMAXPROCS = regexp.MustCompile(`runtime\.GOMAXPROCS\(\s*[^0\s)]`)

// TestOnlyBinariesSetGOMAXPROCS: no library package changes GOMAXPROCS, a process-wide setting
// that belongs to whoever runs the process (docs/design.md §2); only the binaries under cmd/ may.
func TestOnlyBinariesSetGOMAXPROCS(t *testing.T) {
	var found []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (path == "cmd" || strings.HasPrefix(d.Name(), ".") && path != ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if setsGOMAXPROCS.MatchString(line) {
				found = append(found, path+":"+strconv.Itoa(i+1))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Fatalf("library code sets GOMAXPROCS (only cmd/ may): %v", found)
	}
	if !setsGOMAXPROCS.MatchString("runtime.GOMAXPROCS(procs)") || setsGOMAXPROCS.MatchString("runtime.GOMAXPROCS(0)") {
		t.Fatal("the pattern does not tell a call that sets GOMAXPROCS from one that reads it")
	}
}
