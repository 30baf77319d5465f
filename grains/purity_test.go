package grains

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// forbiddenDeps may not appear anywhere in a core package's transitive dependencies.
var forbiddenDeps = []string{
	"github.com/asynkron/protoactor-go",
	"github.com/dgraph-io/badger",
	"github.com/hashicorp/memberlist",
	"math/rand",
	"net",
	"os/exec",
	"time/tzdata",
}

// forbiddenImports may not be imported directly by core source: I/O, randomness, concurrency.
var forbiddenImports = map[string]bool{
	"os": true, "io/ioutil": true, "net": true, "net/http": true, "syscall": true, "sync": true,
	"sync/atomic": true, "math/rand": true, "math/rand/v2": true, "crypto/rand": true, "unsafe": true,
	"time/tzdata": true,
}

// forbiddenTimeCalls read the clock, start timers or read the silo's zone database (which
// differs between hosts: zone rules reach apply only in the entry or the state, see
// schedule.ZoneRulesFor).
var forbiddenTimeCalls = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true, "AfterFunc": true,
	"Tick": true, "NewTimer": true, "NewTicker": true, "LoadLocation": true, "Local": true,
}

// zoneRulesImporters are the only core files that may read the zone rules compiled into the
// binary (package zonerules): what a leader carries into the entries it proposes. Anything
// else reading them would apply this binary's rules instead of the entry's or the state's.
var zoneRulesImporters = map[string]bool{"schedule/zone.go": true}

// coordinator is the one folder under grains/ outside the deterministic core: the due
// coordinator (docs/design.md §2 layer 4) runs goroutines and reads the clock by design, and so
// does its backoff, grains/duecoordinator/backoff. The purity rules do not apply to it; the core
// must not import it (checked below).
const coordinator = "duecoordinator"

// corePackages lists the directories under grains/ that hold Go source (this test's own
// directory and the coordinator folder excluded).
func corePackages(t *testing.T) []string {
	var dirs []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == "." || d.Name() == "testdata" {
			return err
		}
		if path == coordinator {
			return filepath.SkipDir
		}
		if matches, _ := filepath.Glob(filepath.Join(path, "*.go")); len(matches) > 0 {
			dirs = append(dirs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 6 {
		t.Fatalf("found only %v under grains/", dirs)
	}
	return dirs
}

// violations parses one non-test source file and reports every impure construct in it.
func violations(fset *token.FileSet, name string, src any) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []string
	timeName := ""
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if forbiddenImports[path] {
			out = append(out, fset.Position(imp.Pos()).String()+": imports "+path)
		}
		if strings.HasSuffix(path, "/grains/schedule/zonerules") && !zoneRulesImporters[filepath.ToSlash(name)] {
			out = append(out, fset.Position(imp.Pos()).String()+": imports the binary's zone rules (only a proposer may: schedule.ZoneRulesFor)")
		}
		if path == "time" {
			timeName = "time"
			if imp.Name != nil {
				timeName = imp.Name.Name
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			out = append(out, fset.Position(n.Pos()).String()+": starts a goroutine")
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Local" && len(n.Args) == 0 {
				out = append(out, fset.Position(n.Pos()).String()+": converts to the silo's local zone (.Local())")
			}
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && timeName != "" && id.Name == timeName && forbiddenTimeCalls[n.Sel.Name] {
				out = append(out, fset.Position(n.Pos()).String()+": uses time."+n.Sel.Name)
			}
		}
		return true
	})
	return out, nil
}

// TestCoreIsPure is the lint of docs/design.md §2, layer 1, written as a test: the core packages use no
// clock, randomness, goroutines or I/O, and depend on no actor system, store or network.
func TestCoreIsPure(t *testing.T) {
	fset := token.NewFileSet()
	for _, dir := range corePackages(t) {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			bad, err := violations(fset, file, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bad {
				t.Error(b)
			}
		}
		out, err := exec.Command("go", "list", "-deps", "./"+dir).Output()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v", dir, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.Contains(dep, "/grains/"+coordinator) {
				t.Errorf("grains/%s depends on %s, outside the core", dir, dep)
			}
			for _, bad := range forbiddenDeps {
				if dep == bad || strings.HasPrefix(dep, bad+"/") {
					t.Errorf("grains/%s depends on %s", dir, dep)
				}
			}
		}
	}
}

// TestLintCatchesViolations shows the lint fails on what it forbids.
func TestLintCatchesViolations(t *testing.T) {
	src := `package bad
import (
	clock "time"
	"math/rand"
	"os"
	_ "time/tzdata"
	"github.com/orreryhq/orrery/grains/schedule/zonerules"
)
func f() {
	_ = clock.Now()
	clock.Sleep(1)
	go func() {}()
	_ = rand.Int()
	_, _ = os.ReadFile("x")
	_ = os.Getenv("ZONEINFO")
	_, _ = clock.LoadLocation("Europe/Berlin")
	_ = clock.Unix(0, 0).In(clock.Local)
	_ = clock.Unix(0, 0).Local()
	_, _ = zonerules.Lookup("Europe/Berlin")
}`
	bad, err := violations(token.NewFileSet(), "bad.go", src)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"imports math/rand", "imports os", "uses time.Now", "uses time.Sleep", "starts a goroutine",
		"imports time/tzdata", "uses time.LoadLocation", "uses time.Local", "local zone (.Local())", "imports the binary's zone rules"}
	joined := strings.Join(bad, "\n")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("lint missed %q in:\n%s", w, joined)
		}
	}
}
