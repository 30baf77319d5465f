package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer lets the workers' handlers write concurrently.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// TestQuickstartPrintsOccurrencesAndTheTimeout runs the README's example against an embedded
// silo (a protoactor cluster: no -race, see the Makefile).
func TestQuickstartPrintsOccurrencesAndTheTimeout(t *testing.T) {
	var out syncBuffer
	if err := run(&out, "", 8*time.Second); err != nil {
		t.Fatalf("quickstart: %v\n%s", err, out.buf.String())
	}
	text := out.buf.String()
	if n := strings.Count(text, "occurrence #"); n < 2 {
		t.Fatalf("%d occurrences printed, want at least 2:\n%s", n, text)
	}
	if !strings.Contains(text, "saga timeout") {
		t.Fatalf("no saga timeout printed:\n%s", text)
	}
}
