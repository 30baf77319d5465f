package main

import (
	"strings"
	"testing"
)

// TestWalkthroughSaysWhatItDoes: the walkthrough's schedule fires every 2 s and its payload
// says so, its saga times out, and its last line points at what exists (make run, make
// quickstart), not at a silo still to be built.
func TestWalkthroughSaysWhatItDoes(t *testing.T) {
	var out strings.Builder
	walkthrough(&out)
	text := out.String()
	lines := strings.Split(strings.TrimSpace(text), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "make run") || strings.Contains(last, "exists") {
		t.Errorf("last line %q", last)
	}
	if !strings.Contains(text, `payload={"report":"every 2 s"}`) || strings.Contains(text, "hourly") {
		t.Errorf("the handled occurrences do not carry the 2 s schedule's payload:\n%s", text)
	}
	if !strings.Contains(text, "TIMED_OUT") {
		t.Errorf("the saga never timed out:\n%s", text)
	}
}
