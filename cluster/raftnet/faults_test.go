package raftnet

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
)

func TestParseFaults(t *testing.T) {
	f, err := ParseFaults(" drop:2,3 ; delay:4=200ms,5=1s ")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.String(), "drop:2,3;delay:4=200ms,5=1s"; got != want {
		t.Fatalf("parsed %q, want %q", got, want)
	}
	for _, tc := range []struct {
		self, peer uint64
		cut        bool
		delay      time.Duration
	}{
		{1, 2, true, 0}, {1, 3, true, 0}, {1, 4, false, 200 * time.Millisecond}, {1, 6, false, 0},
		{2, 6, true, 0}, {4, 6, false, 200 * time.Millisecond}, {5, 4, false, time.Second},
	} {
		if cut, delay := f.between(tc.self, tc.peer); cut != tc.cut || delay != tc.delay {
			t.Errorf("between(%d, %d) = %v, %v; want %v, %v", tc.self, tc.peer, cut, delay, tc.cut, tc.delay)
		}
	}
	f.Heal(2, 4)
	if got := f.String(); got != "drop:3;delay:5=1s" {
		t.Fatalf("after Heal(2, 4): %q", got)
	}
	f.HealAll()
	if got := f.String(); got != "" {
		t.Fatalf("after HealAll: %q", got)
	}
	if f, err := ParseFaults(""); err != nil || f.String() != "" {
		t.Fatalf("empty spec: %v %q", err, f.String())
	}
	var none *Faults
	if cut, delay := none.between(1, 2); cut || delay != 0 {
		t.Fatal("a nil Faults has faults")
	}
}

func TestParseFaultsRefusesBadSpecs(t *testing.T) {
	for _, spec := range []string{"drop", "drop:", "drop:x", "drop:0", "delay:2", "delay:2=soon", "delay:2=-1s", "cut:2", "delay:=1s"} {
		_, err := ParseFaults(spec)
		if orrery.CodeOf(err) != orrery.CodeValidation {
			t.Errorf("ParseFaults(%q) = %v, want a Validation error", spec, err)
			continue
		}
		if e := orrery.AsError(err); e.Field != FaultsEnv {
			t.Errorf("ParseFaults(%q) names field %q, want %q", spec, e.Field, FaultsEnv)
		}
	}
}

func TestReplaceSwapsEveryFault(t *testing.T) {
	f, _ := ParseFaults("drop:2;delay:3=1s")
	g, _ := ParseFaults("drop:4")
	f.Replace(g)
	if got := f.String(); got != "drop:4" {
		t.Fatalf("after Replace: %q, want drop:4", got)
	}
	g.Cut(5) // f holds a copy
	if got := f.String(); got != "drop:4" {
		t.Fatalf("a change to the replacement reached f: %q", got)
	}
	f.Replace(nil)
	if got := f.String(); got != "" {
		t.Fatalf("after Replace(nil): %q", got)
	}
}

// TestFollowAppliesTheFileAsItChanges: Follow leaves the faults alone while the file is absent,
// replaces them with each new content, keeps them over a spec that does not parse, and heals
// everything once the file is removed.
func TestFollowAppliesTheFileAsItChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "faults")
	f, _ := ParseFaults("drop:9")
	type change struct {
		faults string
		err    error
	}
	changes := make(chan change, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Follow(ctx, path, 5*time.Millisecond, func(faults string, err error) { changes <- change{faults, err} })
	}()
	defer func() { cancel(); <-done }()
	next := func(what string) change {
		t.Helper()
		select {
		case c := <-changes:
			return c
		case <-time.After(10 * time.Second):
			t.Fatalf("no change reported after %s", what)
			return change{}
		}
	}
	write := func(spec string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.String(); got != "drop:9" {
		t.Fatalf("with no file the faults became %q", got)
	}
	write("drop:1,2")
	// The first change reported is the file's: the absent file changed nothing.
	if c := next("drop:1,2"); c.err != nil || c.faults != "drop:1,2" {
		t.Fatalf("after writing drop:1,2: %+v", c)
	}
	write("nonsense")
	if c := next("nonsense"); orrery.CodeOf(c.err) != orrery.CodeValidation || c.faults != "drop:1,2" {
		t.Fatalf("after writing nonsense: %+v, want a Validation error and drop:1,2 kept", c)
	}
	write("delay:3=10ms")
	if c := next("delay:3=10ms"); c.err != nil || c.faults != "delay:3=10ms" {
		t.Fatalf("after writing delay:3=10ms: %+v", c)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if c := next("removing the file"); c.err != nil || c.faults != "" {
		t.Fatalf("after removing the file: %+v, want no faults", c)
	}
}
