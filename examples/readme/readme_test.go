package main

import (
	"os"
	"strings"
	"testing"
)

// TestTheReadmeShowsThisProgram: README.md's program ("Your own program") is this file, so
// that the program a new user copies compiles (go vet and go build cover this one).
func TestTheReadmeShowsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	program, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, after, found := strings.Cut(string(readme), "Your own program")
	if !found {
		t.Fatal(`README.md has no "Your own program" section`)
	}
	_, block, found := strings.Cut(after, "```go\n")
	block, _, closed := strings.Cut(block, "```")
	if !found || !closed {
		t.Fatal(`README.md's "Your own program" has no Go block`)
	}
	if block != string(program) {
		t.Fatalf("README.md's program differs from examples/readme/main.go; copy one onto the other.\nREADME:\n%s", block)
	}
	if lines := strings.Count(block, "\n"); lines > 40 || strings.Contains(block, "orreryv1") {
		t.Fatalf("the program has %d lines (at most 40) or names the wire package", lines)
	}
}
