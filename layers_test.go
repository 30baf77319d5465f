package orrery

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/orreryhq/orrery"

// layers is every package's layer (docs/architecture.md, "Layering"), inside out: 1 the pure
// core and the wire, 2 the partition engine, 3 persistence, 4 replication, grains and actors, 5
// the cluster, 6 the edges. A package is placed by the longest prefix listed.
var layers = map[string]int{
	"":                      1, // the error package at the root
	"api":                   1,
	"grains":                1,
	"grains/engine":         2,
	"persistence":           3,
	"internal/oldlayout":    3,
	"internal/testkit":      1,
	"replication":           4,
	"partition":             4,
	"grains/duecoordinator": 4,
	"actors":                4,
	"clock":                 4,
	"tracing":               4,
	"cluster":               5,
	"client":                6,
	"silo":                  6,
	"cmd":                   6,
	"examples":              6,
	"chaos":                 6,
	"bench":                 6,
}

// forbidden are arrows the layers allow but the design does not: the cluster never imports the
// partition grain (the silo wires them together).
var forbidden = map[[2]string]bool{
	{"cluster", "partition"}: true,
}

// layerOf returns the layer of package dir (relative to the module) and the prefix that
// placed it.
func layerOf(dir string) (int, string, bool) {
	best, found := "", false
	for prefix := range layers {
		if (prefix == "" || dir == prefix || strings.HasPrefix(dir, prefix+"/")) && (!found || len(prefix) > len(best)) {
			best, found = prefix, true
		}
	}
	if dir != "" && best == "" && strings.Contains(dir, "/") {
		return 0, "", false // only the root itself is placed by ""
	}
	return layers[best], best, found
}

// TestImportsRunDownTheLayers: no package imports one of a layer further out, nor an arrow
// of forbidden; every package of the module has a layer.
func TestImportsRunDownTheLayers(t *testing.T) {
	fset := token.NewFileSet()
	var problems []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if dir == "." {
			dir = ""
		}
		from, fromPrefix, ok := layerOf(dir)
		if !ok || (dir != "" && fromPrefix == "") {
			problems = append(problems, path+": its package has no layer in layers_test.go")
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			target, _ := strconv.Unquote(imp.Path.Value)
			if target != module && !strings.HasPrefix(target, module+"/") {
				continue
			}
			rel := strings.TrimPrefix(strings.TrimPrefix(target, module), "/")
			to, toPrefix, ok := layerOf(rel)
			if !ok || (rel != "" && toPrefix == "") {
				problems = append(problems, path+": imports "+rel+", which has no layer")
				continue
			}
			if to > from {
				problems = append(problems, path+" (layer "+strconv.Itoa(from)+") imports "+rel+" (layer "+strconv.Itoa(to)+"), further out")
			}
			if forbidden[[2]string{fromPrefix, toPrefix}] {
				problems = append(problems, path+": "+fromPrefix+" may not import "+toPrefix)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		t.Fatalf("%d imports against the layers:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}
